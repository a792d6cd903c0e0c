"""Controller overhead per step and memory over a long simulated run (figures, not a test).

Run: ``python bench/bench_controller.py [--steps 200]``.

The trainer runs for real (reflection, merge, ranking, edit application, gate, slow update,
meta skill, run directory, commits and resume state) on the SearchQA sample, with the scripted
model server as target and optimizer over HTTP. Rollouts run in this process
(:class:`skillopt.testing.inprocess.InProcessExecutor`: the env's real agent and grader, no
sandbox), so what is left per step, after subtracting model and rollout time, is the
controller's own overhead. RSS is sampled after every step.
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
from skillopt.testing.inprocess import simulated_trainer  # noqa: E402
from skillopt.testing.simulation import simulation_server  # noqa: E402
from skillopt.trainer.callbacks import Callback, StageEvent, StepEndEvent  # noqa: E402


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Sampler(Callback):
    """Per step: wall time, time in rollout and optimizer stages, RSS."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, float, float, float]] = []
        self._lock = threading.Lock()
        self.t_prev = time.perf_counter()
        self.busy = 0.0  # seconds in rollouts and optimizer calls this step
        self._stage_t0 = 0.0

    def on_stage_start(self, event: StageEvent) -> None:
        self._stage_t0 = time.perf_counter()

    def on_stage_end(self, event: StageEvent) -> None:
        # Rollouts and optimizer calls (every stage but update, the controller's own edit
        # application) are the work the controller waits on.
        if event.stage in (
            "rollout",
            "reflect",
            "aggregate",
            "select",
            "evaluate",
            "slow_update",
            "meta_skill",
        ):
            self.busy += event.seconds or 0.0

    def on_step_end(self, event: StepEndEvent) -> None:
        now = time.perf_counter()
        wall = now - self.t_prev
        self.rows.append((event.step, wall, wall - self.busy, rss_mb()))
        self.t_prev, self.busy = now, 0.0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    epochs = max(1, args.steps // 2)  # 20 train items, batch 10: 2 steps per epoch
    cfg = load_config(
        "searchqa_demo",
        [
            f"train.num_epochs={epochs}",
            "train.batch_size=10",
            "evaluation.eval_test=false",
            "run.simulate=on",
            "run.progress=false",
            "run.plot=false",
        ],
    )
    out = Path(tempfile.mkdtemp(prefix="so-bench-ctl-")) / "run"
    sampler = Sampler()
    with simulation_server(max_records=50) as sim:  # its request log is not the controller's memory
        trainer, executor = simulated_trainer(cfg, out, base_url=sim.base_url, callbacks=[sampler])
        t0 = time.perf_counter()
        trainer.fit()
        total = time.perf_counter() - t0
    shutil.rmtree(out.parent, ignore_errors=True)
    rows = sampler.rows
    overhead_ms = [r[2] * 1000 for r in rows]
    print(f"steps                          {len(rows)}")
    print(f"rollouts                       {len(executor.requests)}")
    print(f"total wall s                   {total:.1f}")
    print(f"step wall p50 ms               {statistics.median(r[1] * 1000 for r in rows):.1f}")
    print(f"controller overhead p50 ms     {statistics.median(overhead_ms):.1f}")
    print(f"controller overhead p90 ms     {sorted(overhead_ms)[int(0.9 * len(overhead_ms))]:.1f}")
    first = rows[min(9, len(rows) - 1)][3]
    print(f"RSS after step 10 MB           {first:.1f}")
    print(f"RSS after step {len(rows):<4} MB          {rows[-1][3]:.1f}")
    print(f"RSS growth MB                  {rows[-1][3] - first:.1f}")
    print(f"pid {os.getpid()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
