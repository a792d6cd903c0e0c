"""The gate modes on a stochastic target, against the truth (figures, not a test).

Run: ``python bench/bench_gate.py [--quick] [--runs N] [--sandbox]``.

Per gate mode (``strict``, ``paired``, ``repeat``), N seeded training runs on the noisy
simulation (``run.simulate: noisy``, docs/gate.md): SearchQA's vendored sample split 1:2:1
(train / selection / test), 2 epochs, rolled out in this process
(:class:`skillopt.testing.inprocess.InProcessExecutor`: the env's real agent and grader, the
scripted model server over HTTP). Every gate decision is compared with the simulation's exact
expected scores (``simulation_truth.json``):

* ``false_accept_rate``: of the candidates truly no better than the current skill, the share
  accepted (what ``evaluation.gate_alpha`` bounds); ``false_discovery_rate``: of the accepted
  candidates, the share truly no better;
* ``false_reject_rate``: of the candidates truly better by at least the minimum effect
  (``--min-effect``, default 0.05), the share rejected;
* ``true_final_mean`` / ``true_final_sd``: the true expected score, on the test items, of each
  run's final best skill (``true_final_selection_mean``: on the selection items);
* ``rollouts``, ``tokens``: spent per run (means), ``seconds`` per run.

``--sandbox`` also trains one run per mode through the real sandbox (``skillopt train
--simulate noisy``: the embedded gRPC host, Docker containers) with the first seed, and
reports whether its gate decisions are the in-process run's (they should be: the target's
draws are seeded per rollout, not per host) and how long it took.

Prints one JSON object keyed by mode.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from skillopt.config import load_config  # noqa: E402
from skillopt.logs import configure_logging  # noqa: E402
from skillopt.testing.inprocess import simulated_trainer  # noqa: E402
from skillopt.testing.simulation import simulation_server  # noqa: E402
from skillopt.testing.truth import gate_truths, read_truth  # noqa: E402
from skillopt.trainer.rundir import layout  # noqa: E402

MODES = ("strict", "paired", "repeat")
_EPS = 1e-9


def overrides(mode: str, seed: int) -> list[str]:
    return [
        "run.simulate=noisy",
        f"evaluation.gate_mode={mode}",
        f"train.seed={seed}",
        "env.split_mode=ratio",
        "env.split_ratio=1:2:1",
        "train.num_epochs=2",
        "evaluation.eval_test=false",
        "run.progress=false",
        "run.plot=false",
    ]


def one_run(mode: str, seed: int, base_url: str, root: Path, workers: int) -> dict:
    cfg = load_config("searchqa_demo", overrides(mode, seed))
    out = root / f"{mode}_{seed}"
    t0 = time.perf_counter()
    trainer, executor = simulated_trainer(cfg, out, base_url=base_url, workers=workers)
    result = trainer.fit()
    seconds = time.perf_counter() - t0
    truth = read_truth(out) or {}
    best = truth["skills"][truth["best"]]
    return {
        "gates": gate_truths(out),
        "true_final": best["test"],
        "true_final_selection": best["selection"],
        "rollouts": len(executor.requests),
        "tokens": result.token_summary["_total"]["total_tokens"],
        "seconds": seconds,
        "actions": [g.action for g in gate_truths(out)],
    }


def rates(runs: list[dict], min_effect: float) -> dict:
    gates = [g for r in runs for g in r["gates"]]
    not_better = [g for g in gates if g.true_effect <= _EPS]
    better = [g for g in gates if g.true_effect >= min_effect - _EPS]
    accepted = [g for g in gates if g.accepted]
    finals = [r["true_final"] for r in runs]

    def share(part: int, whole: int) -> float | None:
        return round(part / whole, 4) if whole else None

    return {
        "false_accept_rate": share(sum(g.accepted for g in not_better), len(not_better)),
        "false_discovery_rate": share(sum(g.true_effect <= _EPS for g in accepted), len(accepted)),
        "false_reject_rate": share(sum(not g.accepted for g in better), len(better)),
        "true_final_mean": round(statistics.fmean(finals), 4),
        "true_final_sd": round(statistics.stdev(finals), 4) if len(finals) > 1 else 0.0,
        "true_final_selection_mean": round(statistics.fmean(r["true_final_selection"] for r in runs), 4),
        "rollouts": round(statistics.fmean(r["rollouts"] for r in runs), 1),
        "tokens": round(statistics.fmean(r["tokens"] for r in runs)),
        "seconds": round(statistics.fmean(r["seconds"] for r in runs), 2),
        "decisions": len(gates),
        "truly_not_better": len(not_better),
        "truly_better": len(better),
        "runs": len(runs),
    }


def sandbox_run(mode: str, seed: int, root: Path) -> dict:
    """One run through ``skillopt train`` (the embedded sandbox host, Docker)."""
    out = root / f"sandbox_{mode}_{seed}"
    argv = [sys.executable, "-m", "controller.cli", "train", "--config", "searchqa_demo", "--out", str(out)]
    for item in overrides(mode, seed):
        argv += ["--set", item]
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"sandbox run of {mode} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    summary = json.loads((out / layout.SUMMARY).read_text())
    truth = read_truth(out) or {}
    return {
        "actions": [g.action for g in gate_truths(out)],
        "true_final": truth["skills"][truth["best"]]["test"],
        "tokens": summary["token_summary"]["_total"]["total_tokens"],
        "seconds": seconds,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--quick", action="store_true", help="12 runs per mode instead of 40")
    ap.add_argument("--runs", type=int, default=0, help="runs per mode (default 40, --quick 12)")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--min-effect", type=float, default=0.05, help="'truly better' for the false-reject rate")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--sandbox", action="store_true", help="also one run per mode through the real sandbox")
    args = ap.parse_args()
    n = args.runs or (12 if args.quick else 40)
    configure_logging(json=True, level="warning", stream=io.StringIO())
    modes = [m for m in args.modes.split(",") if m]
    report: dict = {}
    with simulation_server() as sim, tempfile.TemporaryDirectory(prefix="bench_gate_") as tmp:
        root = Path(tmp)
        per_mode = {
            m: [one_run(m, 1000 + i, sim.base_url, root, args.workers) for i in range(n)] for m in modes
        }
        for m, runs in per_mode.items():
            report[m] = rates(runs, args.min_effect)
        if "strict" in report:
            for m in modes:
                report[m]["rollouts_vs_strict"] = round(
                    report[m]["rollouts"] / report["strict"]["rollouts"], 3
                )
        if args.sandbox:
            env = {**os.environ, "SKILLOPT_LOG_LEVEL": "warning"}
            os.environ.update(env)
            for m in modes:
                s = sandbox_run(m, 1000, root)
                s["same_decisions_as_in_process"] = s["actions"] == per_mode[m][0]["actions"]
                s["slowdown_vs_in_process"] = round(s["seconds"] / per_mode[m][0]["seconds"], 2)
                report[m]["sandbox"] = {k: v for k, v in s.items() if k != "actions"}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
