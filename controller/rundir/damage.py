"""Is a run directory damaged, and what does it still prove?

A run directory is damaged when a file the trainer wrote is there but is not the record the
run directory's schema (:mod:`skillopt.trainer.rundir`) says it holds: a truncated
``history.json``, ``runtime_state.json``, ``summary.json``, ``config.json``, a committed step's
``step_record.json``, an eval's ``eval_summary.json`` (a full disk, a crash of the machine, a
hand edit), or one written by a newer skillopt. Every consumer (the WebUI, ``skillopt runs``) asks :func:`inspect`
and says the same thing: which file, what is wrong with it, the last step the directory still
proves committed, and what ``skillopt train --resume`` repairs.

Usage::

    report = inspect(Path("runs/demo"))
    if report:                                  # damaged
        print(report.headline())                # "history.json: not valid JSON (...)"
        for d in report.problems: print(d.file, d.problem, d.repair)
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from skillopt.trainer.rundir import RecordError, RunDirectory, layout

T = TypeVar("T")

__all__ = ["Damage", "DamageReport", "inspect"]


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


def _check(store: RunDirectory, rel: str, read: Callable[[], T], repair: str, out: list[Damage]) -> T | None:
    """``read()``'s record of ``rel`` (``None`` when the file is missing); a file that is there
    but is not its record is added to ``out`` (the problem as the schema says it)."""
    try:
        return read()
    except RecordError as exc:
        out.append(Damage(rel, str(exc), repair))
        return None


_REPAIR = {
    layout.STATE: "not repairable: it is the run's commit point; `--resume` refuses the run",
    layout.HISTORY: "`skillopt train --resume` rebuilds it from the steps' own records",
    layout.SUMMARY: "`skillopt train --resume` writes it again (committed steps are not rerun)",
    layout.CONFIG: "not repairable by `--resume`; the run's settings are also in train.log",
    layout.EVAL_SUMMARY: "`skillopt eval --resume DIR` writes it again (finished rows are kept)",
    layout.EVAL_CONFIG: "not repairable: `skillopt eval --resume` refuses the eval; start it again with a new --out",
}


def inspect(path: Path, *, deep: bool = False) -> DamageReport:
    """The damage of the run (or eval) directory ``path``: every file the schema
    (:mod:`skillopt.trainer.rundir`) has a record for, read as a reader reads it.

    ``deep`` also reads every committed step's record (the run page); otherwise only the last
    committed one (the runs list, which must stay fast with hundreds of runs).
    """
    problems: list[Damage] = []
    store = RunDirectory(path, failpoint=None)
    state = _check(store, layout.STATE, store.state, _REPAIR[layout.STATE], problems)
    history = _check(store, layout.HISTORY, store.history_records, _REPAIR[layout.HISTORY], problems)
    _check(store, layout.SUMMARY, store.summary, _REPAIR[layout.SUMMARY], problems)
    _check(store, layout.CONFIG, store.config, _REPAIR[layout.CONFIG], problems)
    _check(store, layout.EVAL_SUMMARY, store.eval_summary, _REPAIR[layout.EVAL_SUMMARY], problems)
    _check(store, layout.EVAL_CONFIG, store.eval_config, _REPAIR[layout.EVAL_CONFIG], problems)
    last: int | None = None
    if state is not None:
        last = state.last_completed_step
    elif history is not None:
        last = max((r.step for r in history), default=0)
    resumable = not any(d.file in (layout.STATE, layout.CONFIG) for d in problems)
    if last:
        history_ok = history is not None
        for step in range(1, last + 1) if deep else (last,):
            rel = f"{layout.step_dir(step)}/{layout.Step.RECORD}"
            repair = (
                "`skillopt train --resume` writes it again from history.json"
                if history_ok
                else "not repairable, and history.json cannot be rebuilt without it"
            )
            before = len(problems)
            _check(store, rel, functools.partial(store.step_record, step), repair, problems)
            if len(problems) > before and not history_ok:
                resumable = False
    return DamageReport(tuple(problems), last_committed_step=last or None, resumable=resumable)
