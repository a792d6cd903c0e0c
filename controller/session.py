"""Wiring for ``train`` and ``eval``: models, sandbox fleet (or the embedded one), simulation.

The composition root's one helper: it resolves everything from the config once and hands the
trainer typed objects. Misconfiguration fails here, at startup, with what to set.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import structlog

from controller.client.sandbox_client import ChannelConfig
from controller.embedded import embedded_sandbox
from controller.fleet.executor import FleetExecutor
from skillopt.config import Config
from skillopt.errors import ConfigError
from skillopt.models.openai_chat import OpenAIChatModel
from skillopt.models.profiles import load_profiles, validate_profiles
from skillopt.models.roles import RoleModel, UsageTracker
from skillopt.trainer.rollouts import RolloutSpec, RolloutStage
from skillopt.types import Limits, ModelSpec

__all__ = ["Session", "decide_simulation", "open_session", "run_id_for"]

log = structlog.get_logger("skillopt.controller.session")
MiB = 1024 * 1024


@dataclass
class Session:
    rollouts: RolloutStage
    optimizer: RoleModel
    simulated: bool
    sandbox_address: str


def decide_simulation(cfg: Config) -> tuple[bool, str]:
    """Whether to run the offline simulation, and why."""
    mode = cfg.run.simulate
    if mode == "on":
        return True, "run.simulate=on"
    if mode == "off":
        return False, ""
    try:
        profiles = load_profiles(file=cfg.model.providers_file or None)
    except ConfigError as exc:
        return True, f"the provider configuration is not usable ({exc.message})"
    missing = [p for p in (cfg.model.optimizer_provider, cfg.model.target_provider) if p not in profiles]
    if missing:
        return True, (
            f"no provider key for {', '.join(sorted(set(missing)))} (set OPENAI_API_KEY, or define the profiles in "
            "model.providers_file)"
        )
    return False, ""


def run_id_for(out_dir: Path) -> str:
    """A stable id of this run (kept in the run dir), prefixing every rollout id."""
    path = out_dir / "run_id"
    if path.exists():
        return path.read_text().strip()
    rid = f"{out_dir.name[:40]}-{secrets.token_hex(4)}"
    out_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(rid + "\n")
    return rid


def _limits(cfg: Config) -> Limits:
    e = cfg.env
    return Limits(
        wall_time_s=e.task_timeout,
        max_turns=e.max_turns,
        exec_timeout_s=e.exec_timeout,
        memory_bytes=e.memory_mb * MiB,
        cpus=e.cpus,
    )


@contextlib.contextmanager
def open_session(cfg: Config, *, out_dir: Path, simulate: bool | None = None) -> Iterator[Session]:
    """Start what the run needs (simulation server, embedded sandbox) and stop it afterwards.

    Raises:
        ConfigError: a provider or endpoint setting is missing or wrong (says what to set).
    """
    simulated, _why = decide_simulation(cfg) if simulate is None else (simulate, "")
    with contextlib.ExitStack() as stack:
        tracker = UsageTracker()
        m = cfg.model
        if simulated:
            from skillopt.testing.simulation import SIM_OPTIMIZER, SIM_TARGET, simulation_server

            if cfg.sandbox.endpoints:
                raise ConfigError(
                    "the offline simulation runs on the embedded sandbox; clear sandbox.endpoints"
                )
            sim = stack.enter_context(simulation_server())
            provider_specs = [f"sim=openai_compatible,base_url={sim.base_url},max_retries=0"]
            optimizer_model = OpenAIChatModel("sim", base_url=sim.base_url, api_key="", max_retries=0)
            optimizer = RoleModel(optimizer_model, ModelSpec(provider="sim", model=SIM_OPTIMIZER), tracker)
            target = ModelSpec(provider="sim", model=SIM_TARGET)
        else:
            profiles = load_profiles(file=m.providers_file or None)
            # Fail now, with what to set, rather than at the first call of a long run.
            models = validate_profiles(profiles, [m.optimizer_provider, m.target_provider])
            optimizer = RoleModel(
                models[m.optimizer_provider],
                ModelSpec(
                    provider=m.optimizer_provider,
                    model=m.optimizer,
                    temperature=m.optimizer_temperature,
                    max_output_tokens=m.max_completion_tokens,
                    reasoning_effort=m.reasoning_effort or None,
                ),
                tracker,
            )
            target = ModelSpec(
                provider=m.target_provider,
                model=m.target,
                temperature=m.target_temperature,
                max_output_tokens=m.max_completion_tokens,
                reasoning_effort=m.reasoning_effort or None,
            )
            provider_specs = []
        if cfg.sandbox.endpoints:
            token = (
                Path(cfg.sandbox.token_file).read_text().strip()
                if cfg.sandbox.token_file
                else os.environ.get("SKILLOPT_SANDBOX_TOKEN")
            )
            channels = [
                ChannelConfig(
                    address=ep,
                    token=token or None,
                    tls_ca_file=cfg.sandbox.tls_ca_file,
                    tls_cert_file=cfg.sandbox.tls_cert_file,
                    tls_key_file=cfg.sandbox.tls_key_file,
                )
                for ep in cfg.sandbox.endpoints
            ]
            address = ",".join(cfg.sandbox.endpoints)
        else:
            capacity = cfg.sandbox.embedded_capacity or max(
                2, min(cfg.env.workers, 2 * (os.cpu_count() or 2))
            )
            emb = stack.enter_context(
                embedded_sandbox(
                    capacity=capacity,
                    pool_size=cfg.sandbox.embedded_pool_size or capacity,
                    providers=provider_specs,
                    providers_file=m.providers_file,
                    image=cfg.sandbox.image,
                    runtime=cfg.sandbox.runtime,
                    memory_mb=cfg.env.memory_mb,
                    cpus=cfg.env.cpus,
                    log_dir=out_dir,
                    cache_dir=cfg.sandbox.model_cache_dir,
                )
            )
            channels = [ChannelConfig(address=emb.address, token=emb.token)]
            address = emb.address
        executor = FleetExecutor(
            channels, workers=cfg.env.workers, rpc_slack_s=cfg.sandbox.rpc_timeout_slack_s
        )
        spec = RolloutSpec(
            run_id=run_id_for(out_dir),
            env=cfg.env.name,
            agent=cfg.env.agent,
            model=target,
            limits=_limits(cfg),
            model_cache=cfg.sandbox.model_cache,
        )
        yield Session(
            rollouts=RolloutStage(executor, spec),
            optimizer=optimizer,
            simulated=simulated,
            sandbox_address=address,
        )
