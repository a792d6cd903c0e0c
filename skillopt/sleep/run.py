"""``skillopt sleep run``'s decisions: the checks before training, and whether the trained skill
is staged (docs/sleep.md, Run). The command itself (harvest, mine, train, stage) is
``controller/commands/sleep_run.py``; everything here reads files or data and decides.

::

    .skillopt/sleep/runs/<UTC time>/        one run (run_folder)
      harvest/                              this run's harvest (its --since / --project only)
      mined/                                mine's output: mined.json, data/{train,val,test}.json
      train/                                the training run (summary.json, history.json,
                                            test_eval_baseline/, test_eval/, best_skill/<name>/)

**Before training, fail closed** (:func:`check_held_out`): the selection split (the gate's) and
the test split (the final comparison's) each need at least a minimum of tasks, and no session
may give tasks to train and to a held-out split.

**After training, stage only when** (:func:`decide`): the trainer accepted a candidate (the best
skill is not the live one); the best skill's held-out test score is above the live skill's;
no more held-out test tasks regressed (passed with the live skill, failed with the proposal)
than allowed; and no line the proposal adds pipes a download into a shell
(:func:`unsafe_lines`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from skillopt.errors import ConfigError
from skillopt.sleep.proposal import Evidence, GateRecord, Score, TaskResult
from skillopt.sleep.staging import sleep_dir, time_stamp

__all__ = [
    "DEFAULT_MAX_REGRESSIONS",
    "DEFAULT_MIN_HELD_OUT",
    "RUNS",
    "HeldOutRefused",
    "RunDecision",
    "check_held_out",
    "decide",
    "evidence",
    "gate_records",
    "read_history",
    "read_test_rows",
    "run_folder",
    "unsafe_lines",
]

#: ``.skillopt/sleep/runs/``: one folder per run.
RUNS = "runs"
#: The fewest tasks the selection and the test split must each hold (``--min-held-out``).
DEFAULT_MIN_HELD_OUT = 3
#: Held-out test tasks that may regress (``--max-regressions``).
DEFAULT_MAX_REGRESSIONS = 0

# A download piped into a shell: `curl ... | sh`, `wget -O- ... | bash`.
_PIPE_TO_SHELL = re.compile(r"\b(curl|wget|fetch|iwr|irm)\b[^\n|]*\|\s*(sudo\s+)?(ba|z|da|k)?sh\b", re.I)


class HeldOutRefused(ConfigError):
    """The mined splits cannot support a held-out decision (too small, or a session in train
    and in a held-out split). Nothing is trained or staged; the message says what was found."""


def run_folder(root: Path, now: datetime) -> Path:
    """``<root>/.skillopt/sleep/runs/<UTC time>/``."""
    return sleep_dir(root) / RUNS / time_stamp(now)


def check_held_out(sessions: Mapping[str, Sequence[str]], *, min_held_out: int) -> None:
    """Refuse splits a held-out decision cannot rest on.

    Args:
        sessions: per split (``train``, ``selection``, ``test``), the session of each task.
        min_held_out: the fewest tasks ``selection`` and ``test`` must each hold.

    Raises:
        HeldOutRefused: a held-out split is below the minimum, or a session gives tasks to
            train and to a held-out split (the message names the sessions).
    """
    short = [
        f"{name} has {len(sessions.get(name, ()))}"
        for name in ("selection", "test")
        if len(sessions.get(name, ())) < min_held_out
    ]
    if short:
        raise HeldOutRefused(
            f"too few held-out tasks: {', '.join(short)}, at least {min_held_out} each needed "
            "(--min-held-out). Nothing was trained or staged: harvest more sessions (a wider --since), "
            "or lower --min-held-out knowing the gate then decides on less"
        )
    train = set(sessions.get("train", ()))
    for name in ("selection", "test"):
        both = sorted(train & set(sessions.get(name, ())))
        if both:
            raise HeldOutRefused(
                f"session(s) {', '.join(both[:5])} gave tasks to train and to {name}: a held-out score "
                "would measure tasks the skill was trained on. Nothing was trained or staged; mine again "
                "(skillopt sleep mine splits by session) instead of editing the split files"
            )


def read_test_rows(train_dir: Path, sub: str) -> dict[str, float | None]:
    """The hard score of each task in the rollout folder ``train_dir/sub`` (``results.jsonl``);
    ``None`` for a row that ended on infrastructure (not measured)."""
    from skillopt.trainer.rundir.results import read_rows

    return {r.id: (None if r.infra_error is not None else r.hard) for r in read_rows(train_dir / sub)}


def gate_records(history: Iterable[Mapping[str, Any]], best_step: int) -> tuple[GateRecord, ...]:
    """The gate's decisions up to the step that made the best skill (``history.json`` rows):
    the last one is the verdict on the proposal. Steps after it judged other candidates."""
    return tuple(
        GateRecord(action=str(r["action"]), reason=str(r.get("gate_reason", "")), step=int(r["step"]))
        for r in history
        if int(r.get("step", 0)) <= best_step and "candidate_gate_score" in r
    )


def unsafe_lines(live: str, proposal: str) -> list[str]:
    """Lines the proposal adds (not in the live skill) that pipe a download into a shell."""
    known = set(live.splitlines())
    return [
        line.strip() for line in proposal.splitlines() if line not in known and _PIPE_TO_SHELL.search(line)
    ]


@dataclass(frozen=True, kw_only=True)
class RunDecision:
    """Whether to stage, and the figures it rests on.

    Attributes:
        reason: why nothing is staged (``""``: stage).
        live, proposal: the held-out test scores over the tasks both skills were measured on.
        tasks: per held-out test task, the two hard scores and whether it regressed.
        gate: the gate's decisions on the proposal.
    """

    reason: str
    live: Score | None
    proposal: Score | None
    tasks: tuple[TaskResult, ...]
    gate: tuple[GateRecord, ...]

    @property
    def stage(self) -> bool:
        return not self.reason


def _passed(hard: float | None) -> bool:
    return hard is not None and hard >= 1.0


def _fmt(score: Score | None) -> str:
    return score.text() if score is not None else "not measured"


def decide(
    *,
    changed: bool,
    gate: Sequence[GateRecord],
    live_rows: Mapping[str, float | None],
    best_rows: Mapping[str, float | None],
    max_regressions: int = DEFAULT_MAX_REGRESSIONS,
    unsafe: Sequence[str] = (),
) -> RunDecision:
    """Decide whether the run's best skill is staged (the module docstring's rule).

    Args:
        changed: the best skill differs from the live one (the trainer accepted a candidate).
        gate: the gate's decisions on the best skill (:func:`gate_records`).
        live_rows, best_rows: per held-out test task, the live and the best skill's hard score
            (``None``: not measured); a task measured for only one is left out of the scores.
        max_regressions: held-out test tasks allowed to pass live and fail with the proposal.
        unsafe: lines of the proposal that pipe a download into a shell (:func:`unsafe_lines`).
    """
    ids = sorted(set(live_rows) | set(best_rows))
    tasks = tuple(
        TaskResult(
            task_id=t,
            live=live_rows.get(t),
            proposal=best_rows.get(t),
            regressed=_passed(live_rows.get(t))
            and best_rows.get(t) is not None
            and not _passed(best_rows[t]),
        )
        for t in ids
    )
    both = [t for t in tasks if t.live is not None and t.proposal is not None]
    live = Score.of([t.live for t in both if t.live is not None]) if both else None
    proposal = Score.of([t.proposal for t in both if t.proposal is not None]) if both else None
    regressed = [t.task_id for t in tasks if t.regressed]
    if not changed or not any(g.accepted for g in gate):
        reason = f"the trainer accepted no candidate ({len(gate)} gate decision(s), none an accept): the best skill is the live one"
    elif live is None or proposal is None:
        reason = "no held-out test task was measured for both skills (see the run's test_eval folders)"
    elif proposal.mean <= live.mean:
        reason = (
            f"the proposal's held-out test score {_fmt(proposal)} is not above the live skill's {_fmt(live)}"
        )
    elif len(regressed) > max_regressions:
        reason = (
            f"{len(regressed)} held-out test task(s) passed with the live skill and fail with the proposal "
            f"({', '.join(regressed[:5])}); {max_regressions} allowed (--max-regressions)"
        )
    elif unsafe:
        reason = f"the proposal adds a line that pipes a download into a shell ({unsafe[0][:120]!r}); a person must write such a line, never a run"
    else:
        reason = ""
    return RunDecision(reason=reason, live=live, proposal=proposal, tasks=tasks, gate=tuple(gate))


def evidence(
    decision: RunDecision, *, session_ids: Iterable[str], run_dir: Path, max_regressions: int
) -> Evidence:
    """The evidence staging records for a decision to stage.

    Raises:
        ValueError: the decision is not to stage (it has no scores to record).
    """
    if not decision.stage or decision.live is None or decision.proposal is None:
        raise ValueError(f"nothing to stage: {decision.reason}")
    return Evidence(
        live=decision.live,
        proposal=decision.proposal,
        gate=decision.gate,
        tasks=decision.tasks,
        max_regressions=max_regressions,
        session_ids=tuple(sorted(set(session_ids))),
        run_dir=str(run_dir.resolve()),
    )


def read_history(train_dir: Path) -> list[dict[str, Any]]:
    """``history.json`` of the training run (``[]`` when it has none)."""
    path = train_dir / "history.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else []
