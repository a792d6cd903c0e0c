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
from skillopt.gate import ci_json
from skillopt.skill.diff import package_diff
from skillopt.skill.package import load_skill
from skillopt.trainer.rundir import layout
from skillopt.types import SkillVersion

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
    """The run's selection scores (the score where one was recorded, else its hard accuracy:
    the same without the semantic-density bonus) and its test score, with their intervals."""
    s = run.summary()
    tests = s.tests if s is not None else None
    return {
        "baseline_selection": _first(s.baseline_selection_score, s.baseline_selection_hard) if s else None,
        "baseline_selection_ci95": _first(s.baseline_selection_score_ci95, s.baseline_selection_hard_ci95)
        if s
        else None,
        "best_selection": _first(s.best_selection_score, s.best_selection_hard) if s else None,
        "best_selection_ci95": _first(s.best_selection_score_ci95, s.best_selection_hard_ci95) if s else None,
        "final_selection": _first(s.final_selection_score, s.final_selection_hard) if s else None,
        "final_selection_ci95": _first(s.final_selection_score_ci95, s.final_selection_hard_ci95)
        if s
        else None,
        "test": tests.best_hard if tests is not None else None,
        "test_ci95": tests.ci95.get("best_hard") if tests is not None else None,
        "baseline_test": tests.baseline_hard if tests is not None else None,
    }


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _best_package(run: RunDir) -> SkillVersion | None:
    """The run's best package (``best_skill/<name>/``), or None (a run from before packages)."""
    rel = run.skill_package(layout.BEST_SKILL)
    path = run.resolve(rel) if rel != layout.BEST_SKILL else None
    if path is None or not path.is_dir():
        return None
    try:
        return load_skill(path)
    except SkillError:
        return None


def _config_json(run: RunDir) -> dict[str, Any]:
    """The run's config as ``config.json`` holds it (redacted), without what it derived."""
    config = run.config()
    return config.config.to_dict(redacted=True) if config is not None else {}


def compare_runs(runs: list[RunDir]) -> dict[str, Any]:
    """Everything the compare page shows (JSON-ready)."""
    infos = [r.info() for r in runs]
    configs = [flatten(_config_json(r)) for r in runs]
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
                    {
                        "step": h.step,
                        "epoch": h.epoch,
                        "current_score": h.current_score,
                        "current_score_ci95": ci_json(h.current_score_ci95),
                        "action": h.action,
                    }
                    for h in r.history()
                ],
            }
            for r, info in zip(runs, infos, strict=True)
        ],
        "config_rows": rows,
        "differing": sum(r["differs"] for r in rows),
        "skill_diffs": skill_diffs,
    }
