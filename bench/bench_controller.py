"""Controller overhead per step and memory over a long simulated run (figures, not a test).

Run: ``python bench/bench_controller.py [--steps 200]``.

The trainer runs for real (reflection, merge, ranking, edit application, gate, slow update,
meta skill, run directory, resume state) with the scripted model server as optimizer over
HTTP. Rollouts come from an in-process executor that answers like the offline simulation's
target without a sandbox, so what is left per step, after subtracting model and rollout time,
is the controller's own overhead. RSS is sampled after every step.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from skillopt.config import load_config  # noqa: E402
from skillopt.envs.registry import load_env_data  # noqa: E402
from skillopt.models.openai_chat import OpenAIChatModel  # noqa: E402
from skillopt.models.roles import RoleModel, UsageTracker  # noqa: E402
from skillopt.testing.simulation import SIM_OPTIMIZER, simulated_pass, simulation_server  # noqa: E402
from skillopt.trainer.callbacks import Callback  # noqa: E402
from skillopt.trainer.loop import Trainer  # noqa: E402
from skillopt.trainer.rollouts import RolloutSpec, RolloutStage  # noqa: E402
from skillopt.types import CaseResult, Limits, Message, ModelSpec, RolloutResult, Trace, Usage  # noqa: E402


class InstantExecutor:
    """Rows as the simulated target would earn them, without containers (bench only)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._lock = threading.Lock()

    def hosts(self) -> list[str]:
        return ["in-process"]

    def run(self, requests, *, on_result, stop) -> None:
        t0 = time.perf_counter()
        for req in requests:
            ok = simulated_pass(req.task.id, req.skill.content)
            reason = "" if ok else "eval-mismatch: value@Sheet1!B2: gt=1.0 pred=None"
            on_result(
                RolloutResult(
                    id=req.task.id,
                    rollout_id=req.rollout_id,
                    hard=1.0 if ok else 0.0,
                    soft=1.0 if ok else 0.0,
                    fail_reason=reason,
                    phase="done" if ok else "eval",
                    agent_ok=True,
                    n_turns=1,
                    cases=(
                        CaseResult(name="1", ok=ok, stage="eval", reason=reason, report="[verification] ..."),
                    ),
                    trace=Trace(
                        messages=(
                            Message(role="system", content="system prompt " * 50 + req.skill.content),
                            Message(role="user", content=req.task.instruction + " preview " * 100),
                            Message(role="assistant", content="```python\nprint('x')\n```"),
                        ),
                        system_prompt="system",
                        user_prompt=req.task.instruction,
                        code="print('x')",
                    ),
                    usage=Usage(calls=1, prompt_tokens=500, completion_tokens=100),
                )
            )
        with self._lock:
            self.seconds += time.perf_counter() - t0


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Sampler(Callback):
    def __init__(self, executor: InstantExecutor, optimizer: RoleModel) -> None:
        self.executor = executor
        self.optimizer = optimizer
        self.rows: list[tuple[int, float, float, float]] = []
        self.t_prev = time.perf_counter()
        self.exec_prev = 0.0
        self.model_prev = 0.0

    def on_step_end(self, trainer, event) -> None:
        now = time.perf_counter()
        model_s = self.optimizer.model_seconds
        wall = now - self.t_prev
        overhead = wall - (self.executor.seconds - self.exec_prev) - (model_s - self.model_prev)
        self.rows.append((event.step, wall, overhead, rss_mb()))
        self.t_prev, self.exec_prev, self.model_prev = now, self.executor.seconds, model_s


class TimedModel:
    """Wraps the optimizer's ChatModel to add up the time spent in model calls."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.name = inner.name
        self.seconds = 0.0
        self._lock = threading.Lock()

    def complete(self, request):
        t0 = time.perf_counter()
        try:
            return self.inner.complete(request)
        finally:
            with self._lock:
                self.seconds += time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    epochs = max(1, args.steps // 2)  # 10 train items, batch 5: 2 steps per epoch
    cfg = load_config(
        "spreadsheetbench_demo",
        [f"train.num_epochs={epochs}", "evaluation.eval_test=false", "run.progress=false", "run.plot=false"],
    )
    out = Path(tempfile.mkdtemp(prefix="so-bench-ctl-"))
    data = load_env_data("spreadsheetbench")
    with simulation_server(max_records=50) as sim:  # its request log is not the controller's memory
        timed = TimedModel(OpenAIChatModel("sim", base_url=sim.base_url, api_key="", max_retries=0))
        optimizer = RoleModel(timed, ModelSpec(provider="sim", model=SIM_OPTIMIZER), UsageTracker())
        optimizer.model_seconds = 0.0  # type: ignore[attr-defined]
        executor = InstantExecutor()
        stage = RolloutStage(
            executor,
            RolloutSpec(
                run_id="bench",
                env="spreadsheetbench",
                agent="codegen_single",
                model=ModelSpec(provider="sim", model="t"),
                limits=Limits(),
            ),
        )
        sampler = Sampler(executor, optimizer)

        class _Model(Callback):
            def on_step_start(self, trainer, event) -> None:
                optimizer.model_seconds = timed.seconds  # type: ignore[attr-defined]

            def on_step_end(self, trainer, event) -> None:
                optimizer.model_seconds = timed.seconds  # type: ignore[attr-defined]

        trainer = Trainer(
            cfg,
            data=data,
            rollouts=stage,
            optimizer=optimizer,
            out_dir=out,
            initial_skill=data.initial_skill(),
            callbacks=[_Model(), sampler],
        )
        t0 = time.perf_counter()
        trainer.fit()
        total = time.perf_counter() - t0
    shutil.rmtree(out, ignore_errors=True)
    rows = sampler.rows
    overhead_ms = [r[2] * 1000 for r in rows]
    print(f"steps                          {len(rows)}")
    print(f"total wall s                   {total:.1f}")
    print(f"step wall p50 ms               {statistics.median(r[1] * 1000 for r in rows):.1f}")
    print(f"controller overhead p50 ms     {statistics.median(overhead_ms):.1f}")
    print(f"controller overhead p90 ms     {sorted(overhead_ms)[int(0.9 * len(overhead_ms))]:.1f}")
    print(f"model time total s             {timed.seconds:.1f}")
    print(f"rollout time total s           {executor.seconds:.2f}")
    first = rows[min(9, len(rows) - 1)][3]
    print(f"RSS after step 10 MB           {first:.1f}")
    print(f"RSS after step {len(rows):<4} MB          {rows[-1][3]:.1f}")
    print(f"RSS growth MB                  {rows[-1][3] - first:.1f}")
    print(f"pid {os.getpid()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
