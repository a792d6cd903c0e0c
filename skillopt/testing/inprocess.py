"""An in-process rollout executor, for trainer tests and controller benchmarks: no sandbox
host, no gRPC, no container.

It runs an env's real agent and real trusted grader in this process, against a real model
endpoint (the scripted model server over HTTP in tests), for the agents that execute no code
(the env declares ``sandbox="none"``: the question-answering agents). Everything the trainer
sees is what a sandbox host would send: the same rows, traces, usage and typed failures (a
provider error becomes a ``model-…`` infrastructure row, never a score). Code agents need a
sandbox; asking this executor for one is a configuration error, never a host subprocess.

Usage::

    with simulation_server() as sim:
        executor = InProcessExecutor(OpenAIChatModel("sim", base_url=sim.base_url, api_key=""))
        rollouts = Rollouts(executor, RolloutSpec(run_id="t", env="searchqa", agent="qa", ...))
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from skillopt.agents.context import AgentContext
from skillopt.envs.registry import get_env
from skillopt.errors import ConfigError, failure_of
from skillopt.models.base import ChatModel, ChatRequest, ChatResponse
from skillopt.skill.checks import DEFAULT_SELF_TEST_TIMEOUT_S, ScriptCheck, unchecked
from skillopt.types import Limits, ModelSpec, RolloutRequest, RolloutResult, SkillVersion

if TYPE_CHECKING:
    from skillopt.config import Config
    from skillopt.trainer import Trainer
    from skillopt.trainer.callbacks import Callback
    from skillopt.trainer.rundir import Failpoint

__all__ = ["InProcessExecutor", "simulated_trainer"]

_DEFAULT_WALL_S = 60.0


class InProcessExecutor:
    """:class:`~skillopt.trainer.executor.RolloutExecutor` running no-sandbox agents here.

    Args:
        model: the target model every rollout calls.
        host: the host id stamped on rows.
        workers: rollouts run at once (1: in request order, the same file order every run).

    Attributes:
        requests: every request it was asked to run, in order (tests count them).
    """

    def __init__(self, model: ChatModel, *, host: str = "in-process", workers: int = 1) -> None:
        self.model = model
        self.host = host
        self.workers = max(1, workers)
        self.requests: list[RolloutRequest] = []
        self._lock = threading.Lock()

    def hosts(self) -> list[str]:
        return [self.host]

    def run(
        self,
        requests: Sequence[RolloutRequest],
        *,
        on_result: Callable[[RolloutResult], None],
        stop: threading.Event,
    ) -> None:
        """Run ``requests`` (every row delivered through ``on_result``); stops early when
        ``stop`` is set.

        Raises:
            ConfigError: an agent needs a sandbox (a container), which this executor has not.
        """
        for req in requests:
            env = get_env(req.env)
            if env.container(req.agent) != "none":
                raise ConfigError(
                    f"the in-process executor runs agents without a sandbox only; {req.env}/{req.agent} "
                    "runs code: use the embedded sandbox or --endpoints"
                )
        with self._lock:
            self.requests += requests

        def one(req: RolloutRequest) -> None:
            if not stop.is_set():
                on_result(self._run(req))

        if self.workers == 1:
            for req in requests:
                one(req)
            return
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            list(pool.map(one, requests))

    def check_scripts(
        self,
        spec: SkillVersion,
        paths: Sequence[str],
        *,
        self_test_timeout_s: float = DEFAULT_SELF_TEST_TIMEOUT_S,
    ) -> list[ScriptCheck]:
        """Scripts are checked in a sandbox container, which this executor has not: each
        script of ``paths`` is ``unchecked`` (a failed verdict, never a pass)."""
        return unchecked(
            spec,
            paths,
            "not checked: the in-process executor has no sandbox container to run scripts in; "
            "use the embedded sandbox or --endpoints (a host with sessions) to check them. An "
            "unchecked script is not accepted.",
        )

    def _run(self, req: RolloutRequest) -> RolloutResult:
        t0 = time.monotonic()
        wall = float(req.limits.wall_time_s or _DEFAULT_WALL_S)
        ctx = AgentContext(
            request=req,
            sandbox=None,
            model=_Seeded(self.model, req.seed) if req.seed else self.model,
            limits=dataclasses.replace(req.limits, wall_time_s=wall),
            emit=lambda _event: None,
            deadline=t0 + wall,
        )
        try:
            row = get_env(req.env).run(req.agent, ctx)
        except Exception as exc:  # typed, as a host reports it (a bug: internal)
            row = RolloutResult.of_infra(req, failure_of(exc))
        return dataclasses.replace(
            row,
            id=row.id or req.task.id,
            rollout_id=req.rollout_id,
            host=self.host,
            timings_s={**dict(row.timings_s), "total": time.monotonic() - t0},
        )


class _Seeded:
    """The rollout's model with its seed on every call (what a host's gateway session adds)."""

    def __init__(self, model: ChatModel, seed: int) -> None:
        self.model, self.seed, self.name = model, seed, model.name

    def complete(self, request: ChatRequest) -> ChatResponse:
        return self.model.complete(dataclasses.replace(request, seed=self.seed))


def simulated_trainer(
    config: Config,
    out_dir: Path,
    *,
    base_url: str,
    callbacks: Sequence[Callback] = (),
    failpoint: Failpoint | None = None,
    workers: int = 1,
) -> tuple[Trainer, InProcessExecutor]:
    """A :class:`Trainer` over ``config``'s env with the simulation's target and optimizer at
    ``base_url`` (a :func:`~skillopt.testing.simulation.simulation_server`), rolling out in
    this process: the wiring ``skillopt train`` does, without a sandbox (QA envs only).
    ``run.simulate: noisy`` plays the noisy simulation, and records its ground truth
    (:class:`~skillopt.testing.truth.SimulationTruth`) as ``skillopt train`` does; the trackers
    ``config.tracking`` enables log the run, as they do for ``skillopt train``.

    Returns:
        The trainer and its executor (``executor.requests`` lists every rollout asked for).
    """
    from skillopt.models.openai_chat import OpenAIChatModel
    from skillopt.models.roles import RoleModel, UsageTracker
    from skillopt.testing.simulation import SIM_PROVIDER, sim_models
    from skillopt.testing.truth import simulation_truth
    from skillopt.tracking import tracking_callbacks
    from skillopt.trainer import Trainer
    from skillopt.trainer.planning import initial_skill, load_data
    from skillopt.trainer.rollouts import Rollouts, RolloutSpec
    from skillopt.trainer.state import RunMode

    e = config.env
    data = load_data(config)
    noisy = config.run.simulate == "noisy"
    target, optimizer_model = sim_models(noisy=noisy)
    executor = InProcessExecutor(
        OpenAIChatModel(SIM_PROVIDER, base_url=base_url, api_key="", max_retries=0), workers=workers
    )
    optimizer = RoleModel(
        OpenAIChatModel(SIM_PROVIDER, base_url=base_url, api_key="", max_retries=0),
        ModelSpec(provider=SIM_PROVIDER, model=optimizer_model),
        UsageTracker(),
    )
    rollouts = Rollouts(
        executor,
        RolloutSpec(
            run_id=out_dir.name,
            env=e.name,
            agent=e.agent,
            model=ModelSpec(provider=SIM_PROVIDER, model=target),
            limits=Limits(),
            seed=config.train.seed,
        ),
    )
    if noisy:
        callbacks = [*callbacks, simulation_truth(config, data)]
    callbacks = [*callbacks, *tracking_callbacks(config)]
    trainer = Trainer(
        config,
        data=data,
        rollouts=rollouts,
        optimizer=optimizer,
        out_dir=out_dir,
        initial_skill=initial_skill(config, data),
        callbacks=callbacks,
        mode=RunMode(simulated=True, noisy=noisy, reason="in-process simulation"),
        failpoint=failpoint,
    )
    return trainer, executor
