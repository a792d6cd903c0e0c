"""The gate modes on a stochastic target, against the truth (figures, not a test).

Run: ``python bench/bench_gate.py [--quick] [--runs N] [--profiles P,...] [--modes M,...]
[--set key=value ...] [--sandbox]`` (``--set``: a config override for every run, e.g. a
``sequential`` variant).

Per profile and gate mode (``strict``, ``paired``, ``repeat``, ``sequential``), N seeded
training runs (the same seeds for every mode), 2 epochs, rolled out in this process
(:class:`skillopt.testing.inprocess.InProcessExecutor`: the env's real agent and grader, the
scripted model server over HTTP). The profiles:

* ``noisy`` (the default): the noisy simulation (``run.simulate: noisy``, docs/gate.md),
  SearchQA's vendored sample split 1:2:1 (train / selection / test): 25 selection items;
* ``noisy_100``: the noisy simulation with 100 selection items (copies of the 30 vendored
  val/test tasks, ``<id>~copy<k>``: each plays its task with its own draws);
* ``deterministic``: the deterministic simulation (``run.simulate: on``) on the ``noisy``
  profile's split: no mode should decide differently from ``strict`` nor spend more.

Every gate decision of a noisy profile is compared with the simulation's exact expected
scores (``simulation_truth.json``):

* ``false_accept_rate``: of the candidates truly no better than the current skill, the share
  accepted (what ``evaluation.gate_alpha`` bounds); ``false_discovery_rate``: of the accepted
  candidates, the share truly no better;
* ``false_reject_rate``: of the candidates truly better by at least the minimum effect
  (``--min-effect``, default 0.05), the share rejected;
* ``true_final_mean`` / ``true_final_sd``: the true expected score, on the test items, of each
  run's final best skill (``true_final_selection_mean``: on the selection items);
* ``rollouts``, ``tokens``: spent per run (means), ``seconds`` per run; ``rollouts_vs_strict``;
* ``same_decisions_as_strict``: the share of runs whose every gate decision is ``strict``'s
  with the same seed (reported on every profile; the deterministic profile's target is 1.0).

``--sandbox`` also trains one run per mode through the real sandbox (``skillopt train
--simulate noisy``: the embedded gRPC host, Docker containers) with the first seed, and
reports whether its gate decisions are the in-process run's (they should be: the target's
draws are seeded per rollout, not per host) and how long it took.

Prints one JSON object keyed by profile, then mode.
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
from skillopt.gate import GateMode  # noqa: E402
from skillopt.logs import configure_logging  # noqa: E402
from skillopt.testing.inprocess import simulated_trainer  # noqa: E402
from skillopt.testing.simulation import COPY_MARK, simulation_server  # noqa: E402
from skillopt.testing.truth import gate_truths, read_truth  # noqa: E402
from skillopt.trainer.rundir import layout  # noqa: E402

MODES = tuple(m.value for m in GateMode)
_EPS = 1e-9


PROFILES = ("noisy", "noisy_100", "deterministic")


#: Extra ``key=value`` overrides for every run (``--set``).
EXTRA: list[str] = []


def overrides(mode: str, seed: int, profile: str = "noisy", data_root: Path | None = None) -> list[str]:
    split = (
        [f"env.data_root={data_root}", "env.split_mode=split_file", "evaluation.sel_env_num=100"]
        if profile == "noisy_100"
        else ["env.split_mode=ratio", "env.split_ratio=1:2:1"]
    )
    return [
        f"run.simulate={'on' if profile == 'deterministic' else 'noisy'}",
        f"evaluation.gate_mode={mode}",
        f"train.seed={seed}",
        *split,
        "train.num_epochs=2",
        "evaluation.eval_test=false",
        "run.progress=false",
        "run.plot=false",
        *EXTRA,
    ]


def copies_root(root: Path, copies: int = 8) -> Path:
    """A SearchQA data root whose ``val.json`` holds ``copies`` copies of the 30 vendored
    val/test tasks (carved into selection and test halves; ``sel_env_num`` takes 100)."""
    sample = ROOT / "skillopt" / "envs" / "searchqa" / "data" / "sample"
    out = root / "searchqa_copies"
    out.mkdir(parents=True, exist_ok=True)
    (out / "train.json").write_text((sample / "train.json").read_text())
    tasks = [*json.loads((sample / "val.json").read_text()), *json.loads((sample / "test.json").read_text())]
    val = [
        {**t, "id": t["id"] if k == 0 else f"{t['id']}{COPY_MARK}{k}"} for k in range(copies) for t in tasks
    ]
    (out / "val.json").write_text(json.dumps(val))
    return out


def one_run(
    mode: str,
    seed: int,
    base_url: str,
    root: Path,
    workers: int,
    profile: str = "noisy",
    data_root: Path | None = None,
) -> dict:
    cfg = load_config("searchqa_demo", overrides(mode, seed, profile, data_root))
    out = root / f"{profile}_{mode}_{seed}"
    t0 = time.perf_counter()
    trainer, executor = simulated_trainer(cfg, out, base_url=base_url, workers=workers)
    result = trainer.fit()
    seconds = time.perf_counter() - t0
    truth = read_truth(out) or {}
    best = truth["skills"][truth["best"]] if truth else {"test": None, "selection": None}
    history = json.loads((out / layout.HISTORY).read_text())
    return {
        "gates": gate_truths(out),
        "true_final": best["test"],
        "true_final_selection": best["selection"],
        "rollouts": len(executor.requests),
        "tokens": result.token_summary["_total"]["total_tokens"],
        "seconds": seconds,
        "actions": [r["action"] for r in history],
        "looks": [r["gate_test"]["looks"] for r in history if (r.get("gate_test") or {}).get("looks")],
    }


def rates(runs: list[dict], min_effect: float) -> dict:
    gates = [g for r in runs for g in r["gates"]]
    not_better = [g for g in gates if g.true_effect <= _EPS]
    better = [g for g in gates if g.true_effect >= min_effect - _EPS]
    accepted = [g for g in gates if g.accepted]
    finals = [r["true_final"] for r in runs if r["true_final"] is not None]
    looks = [k for r in runs for k in r["looks"]]

    def share(part: int, whole: int) -> float | None:
        return round(part / whole, 4) if whole else None

    return {
        "false_accept_rate": share(sum(g.accepted for g in not_better), len(not_better)),
        "false_discovery_rate": share(sum(g.true_effect <= _EPS for g in accepted), len(accepted)),
        "false_reject_rate": share(sum(not g.accepted for g in better), len(better)),
        "true_final_mean": round(statistics.fmean(finals), 4) if finals else None,
        "true_final_sd": round(statistics.stdev(finals), 4) if len(finals) > 1 else None,
        "true_final_selection_mean": round(statistics.fmean(r["true_final_selection"] for r in runs), 4)
        if finals
        else None,
        "rollouts": round(statistics.fmean(r["rollouts"] for r in runs), 1),
        "tokens": round(statistics.fmean(r["tokens"] for r in runs)),
        "seconds": round(statistics.fmean(r["seconds"] for r in runs), 2),
        "mean_looks": round(statistics.fmean(looks), 2) if looks else None,
        "decisions": sum(len(r["actions"]) for r in runs),
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
    ap.add_argument("--profiles", default="noisy", help=f"comma-separated, of {', '.join(PROFILES)}")
    ap.add_argument("--min-effect", type=float, default=0.05, help="'truly better' for the false-reject rate")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--sandbox", action="store_true", help="also one run per mode through the real sandbox")
    ap.add_argument("--set", action="append", default=[], help="extra config override for every run")
    args = ap.parse_args()
    EXTRA.extend(args.set)
    n = args.runs or (12 if args.quick else 40)
    configure_logging(json=True, level="warning", stream=io.StringIO())
    modes = [m for m in args.modes.split(",") if m]
    report: dict = {}
    with simulation_server() as sim, tempfile.TemporaryDirectory(prefix="bench_gate_") as tmp:
        root = Path(tmp)
        data_root = copies_root(root)
        first: dict = {}
        for profile in [p for p in args.profiles.split(",") if p]:
            per_mode = {
                m: [
                    one_run(m, 1000 + i, sim.base_url, root, args.workers, profile, data_root)
                    for i in range(n)
                ]
                for m in modes
            }
            first[profile] = per_mode
            section = report[profile] = {m: rates(runs, args.min_effect) for m, runs in per_mode.items()}
            if "strict" in section:
                for m in modes:
                    section[m]["rollouts_vs_strict"] = round(
                        section[m]["rollouts"] / section["strict"]["rollouts"], 3
                    )
                    same = [
                        a["actions"] == s["actions"]
                        for a, s in zip(per_mode[m], per_mode["strict"], strict=True)
                    ]
                    section[m]["same_decisions_as_strict"] = round(sum(same) / len(same), 3)
        if args.sandbox and "noisy" in first:
            env = {**os.environ, "SKILLOPT_LOG_LEVEL": "warning"}
            os.environ.update(env)
            for m in modes:
                s = sandbox_run(m, 1000, root)
                runs = first["noisy"][m]
                s["same_decisions_as_in_process"] = s["actions"] == [g.action for g in runs[0]["gates"]]
                s["slowdown_vs_in_process"] = round(s["seconds"] / runs[0]["seconds"], 2)
                report["noisy"][m]["sandbox"] = {k: v for k, v in s.items() if k != "actions"}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
