"""Is a run directory damaged, and what does it still prove?

A run directory is damaged when a file the trainer wrote is there but cannot be read: a
truncated ``history.json``, ``runtime_state.json``, ``summary.json``, ``config.json``, a
committed step's ``step_record.json``, an eval's ``eval_summary.json`` (a full disk, a crash of
the machine, a hand edit). Every consumer (the WebUI, ``skillopt runs``) asks :func:`inspect`
and says the same thing: which file, what is wrong with it, the last step the directory still
proves committed, and what ``skillopt train --resume`` repairs.

Usage::

    report = inspect(Path("runs/demo"))
    if report:                                  # damaged
        print(report.headline())                # "history.json: not valid JSON (...)"
        for d in report.problems: print(d.file, d.problem, d.repair)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillopt.trainer.rundir import layout

__all__ = ["Damage", "DamageReport", "inspect"]

_NOT_FOUND = object()


@dataclass(frozen=True)
class Damage:
    """One unreadable file: ``file`` relative to the run directory, ``problem`` what is wrong,
    ``repair`` what to do about it."""

    file: str
    problem: str
    repair: str

    def to_dict(self) -> dict[str, str]:
        return {"file": self.file, "problem": self.problem, "repair": self.repair}


@dataclass(frozen=True)
class DamageReport:
    """What :func:`inspect` found (falsy when nothing is damaged)."""

    problems: tuple[Damage, ...] = ()
    #: The last step the readable files prove committed (None: nothing proves one).
    last_committed_step: int | None = None
    #: Whether ``skillopt train --resume`` can repair every problem.
    resumable: bool = True

    def __bool__(self) -> bool:
        return bool(self.problems)

    def headline(self) -> str:
        """One line: the first problem (and how many more)."""
        if not self.problems:
            return ""
        first = self.problems[0]
        more = f" (+{len(self.problems) - 1} more)" if len(self.problems) > 1 else ""
        return f"{first.file}: {first.problem}{more}"

    def advice(self) -> str:
        """What to do, in one sentence."""
        if not self.problems:
            return ""
        proven = (
            f"the directory still proves steps 1-{self.last_committed_step} committed"
            if self.last_committed_step
            else "no committed step can be proven from it"
        )
        if self.resumable:
            return f"{proven}; `skillopt train --resume` repairs what is listed"
        return f"{proven}; the run cannot be resumed: start a new run (the readable files stay as they are)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "problems": [d.to_dict() for d in self.problems],
            "last_committed_step": self.last_committed_step,
            "resumable": self.resumable,
            "headline": self.headline(),
            "advice": self.advice(),
        }


def _read(path: Path) -> tuple[Any, str]:
    """``(value, problem)``: the parsed JSON, or ``_NOT_FOUND``/``None`` and what is wrong."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return _NOT_FOUND, ""
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror or exc})"
    if not raw.strip():
        return None, f"is empty ({len(raw)} bytes)"
    try:
        return json.loads(raw.decode("utf-8")), ""
    except UnicodeDecodeError:
        return None, "is not UTF-8 text"
    except json.JSONDecodeError as exc:
        # Every file the trainer writes is one object or array: one that does not end like
        # one was cut off (a full disk, a crash mid-write outside the atomic writes).
        cut = "; cut off: it ends mid-value" if not raw.rstrip().endswith((b"}", b"]")) else ""
        return None, f"is not valid JSON ({exc.msg}, byte {exc.pos} of {len(raw)}{cut})"


def _check(path: Path, rel: str, kind: type, repair: str, out: list[Damage]) -> Any:
    value, problem = _read(path / rel)
    if value is _NOT_FOUND:
        return _NOT_FOUND
    if not problem and not isinstance(value, kind):
        problem = f"holds a JSON {type(value).__name__}, not a JSON {kind.__name__}"
    if problem:
        out.append(Damage(rel, problem, repair))
        return None
    return value


_REPAIR = {
    layout.STATE: "not repairable: it is the run's commit point; `--resume` refuses the run",
    layout.HISTORY: "`skillopt train --resume` rebuilds it from the steps' own records",
    layout.SUMMARY: "`skillopt train --resume` writes it again (committed steps are not rerun)",
    layout.CONFIG: "not repairable by `--resume`; the run's settings are also in train.log",
    layout.EVAL_SUMMARY: "`skillopt eval --resume DIR` writes it again (finished rows are kept)",
    layout.EVAL_CONFIG: "not repairable: `skillopt eval --resume` refuses the eval; start it again with a new --out",
}


def inspect(path: Path, *, deep: bool = False) -> DamageReport:
    """The damage of the run (or eval) directory ``path``.

    ``deep`` also reads every committed step's record (the run page); otherwise only the last
    committed one (the runs list, which must stay fast with hundreds of runs).
    """
    problems: list[Damage] = []
    state = _check(path, layout.STATE, dict, _REPAIR[layout.STATE], problems)
    history = _check(path, layout.HISTORY, list, _REPAIR[layout.HISTORY], problems)
    _check(path, layout.SUMMARY, dict, _REPAIR[layout.SUMMARY], problems)
    _check(path, layout.CONFIG, dict, _REPAIR[layout.CONFIG], problems)
    _check(path, layout.EVAL_SUMMARY, dict, _REPAIR[layout.EVAL_SUMMARY], problems)
    _check(path, layout.EVAL_CONFIG, dict, _REPAIR[layout.EVAL_CONFIG], problems)
    last: int | None = None
    if isinstance(state, dict) and isinstance(state.get("last_completed_step"), int):
        last = state["last_completed_step"]
    elif isinstance(history, list):
        steps = [r["step"] for r in history if isinstance(r, dict) and isinstance(r.get("step"), int)]
        last = max(steps, default=0)
    resumable = not any(d.file in (layout.STATE, layout.CONFIG) for d in problems)
    if last:
        history_ok = isinstance(history, list)
        for step in range(1, last + 1) if deep else (last,):
            rel = f"{layout.step_dir(step)}/{layout.Step.RECORD}"
            repair = (
                "`skillopt train --resume` writes it again from history.json"
                if history_ok
                else "not repairable, and history.json cannot be rebuilt without it"
            )
            before = len(problems)
            _check(path, rel, dict, repair, problems)
            if len(problems) > before and not history_ok:
                resumable = False
    return DamageReport(tuple(problems), last_committed_step=last or None, resumable=resumable)
