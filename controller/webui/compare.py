"""Comparing runs (``/compare?runs=A,B,C``): one view of two or more run directories, from the
one reader (:mod:`controller.rundir.reader`).

* their selection curves (the current skill's score per step), overlaid on the same axes;
* their effective configs side by side (every dotted key; the keys whose values differ first
  and marked), so what was changed between runs is visible at a glance;
* their scores with intervals (baseline, best and final selection, test), tokens and cost;
* the diff of each run's best skill against the first run's.

The URL holds the selection, so a comparison can be shared.
"""

from __future__ import annotations

import json
from typing import Any

from controller.rundir.reader import RunDir, diff_lines
from skillopt.errors import SkillError
from skillopt.skill.diff import package_diff
from skillopt.skill.package import load_skill
from skillopt.trainer.rundir import layout
from skillopt.types import SkillSpec

__all__ = ["MAX_RUNS", "compare_runs", "flatten"]

#: Runs one comparison may hold (a legend and a table stay readable).
MAX_RUNS = 8
_MISSING = "—"


def flatten(value: Any, prefix: str = "") -> dict[str, str]:
    """Dotted key → the value as JSON text (nested mappings flattened, lists kept whole)."""
    if isinstance(value, dict) and value:
        out: dict[str, str] = {}
        for k in sorted(value):
            out.update(flatten(value[k], f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: json.dumps(value, sort_keys=True, default=str)} if prefix else {}


def _scores(run: RunDir) -> dict[str, Any]:
    summary = run.summary() or {}
    out: dict[str, Any] = {}
    for key in ("baseline_selection", "best_selection", "final_selection"):
        out[key] = summary.get(f"{key}_score", summary.get(f"{key}_hard"))
        out[f"{key}_ci95"] = summary.get(f"{key}_score_ci95", summary.get(f"{key}_hard_ci95"))
    out["test"] = summary.get("test_hard")
    out["test_ci95"] = summary.get("test_hard_ci95")
    out["baseline_test"] = summary.get("baseline_test_hard")
    return out


def _best_package(run: RunDir) -> SkillSpec | None:
    """The run's best package (``best_skill/<name>/``), or None (a run from before packages)."""
    rel = run.skill_package(layout.BEST_SKILL)
    path = run.resolve(rel) if rel != layout.BEST_SKILL else None
    if path is None or not path.is_dir():
        return None
    try:
        return load_skill(path)
    except SkillError:
        return None


def compare_runs(runs: list[RunDir]) -> dict[str, Any]:
    """Everything the compare page shows (JSON-ready)."""
    infos = [r.info() for r in runs]
    configs = [flatten({k: v for k, v in r.config().items() if k != "derived"}) for r in runs]
    keys = sorted(set().union(*configs))
    rows = []
    for key in keys:
        values = [c.get(key, _MISSING) for c in configs]
        rows.append({"key": key, "values": values, "differs": len(set(values)) > 1})
    rows.sort(key=lambda r: (not r["differs"], r["key"]))
    first_skill = runs[0].text("best_skill.md") or ""
    first_package = _best_package(runs[0])
    skill_diffs = []
    for r in runs[1:]:
        package = _best_package(r)
        files = (
            [c.summary() for c in package_diff(first_package, package)]
            if first_package is not None and package is not None and (first_package.files or package.files)
            else []
        )
        skill_diffs.append(
            {
                "name": r.name,
                "diff": diff_lines(first_skill, r.text("best_skill.md") or "", context=3),
                "files": files,
            }
        )
    return {
        "runs": [
            {
                "name": r.name,
                "info": info.to_dict(),
                "scores": _scores(r),
                "baseline": r.baseline_score(),
                "history": [
                    {k: h.get(k) for k in ("step", "epoch", "current_score", "current_score_ci95", "action")}
                    for h in r.history()
                ],
            }
            for r, info in zip(runs, infos, strict=True)
        ],
        "config_rows": rows,
        "differing": sum(r["differs"] for r in rows),
        "skill_diffs": skill_diffs,
    }
