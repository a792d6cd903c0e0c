"""The records of a staged proposal and of its adoption: what ``skillopt sleep run`` hands to
staging (:class:`Evidence`), what a staging folder holds (:class:`StagingManifest`), and what
``adopt`` and ``revert`` leave behind (:class:`Receipt`).

Every file is JSON read back through these models (``StagingManifest.model_validate_json``),
never by walking the JSON. Each carries a ``schema_version``; keys a newer writer added are
ignored on reading.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from skillopt.skill.checks import ScriptCheck

__all__ = [
    "MANIFEST_VERSION",
    "RECEIPT_VERSION",
    "Evidence",
    "GateRecord",
    "LiveSkill",
    "Receipt",
    "Score",
    "ScriptCheckRecord",
    "StagingManifest",
    "TaskResult",
]

#: The version of ``manifest.json`` (:class:`StagingManifest`).
MANIFEST_VERSION = 1
#: The version of a receipt (:class:`Receipt`).
RECEIPT_VERSION = 1


class _Record(BaseModel):
    """Frozen; keys this version does not know (a newer writer's) are ignored on reading."""

    model_config = ConfigDict(frozen=True, extra="ignore")


class Score(_Record):
    """A mean score over held-out tasks with its 95% interval (``low``, ``high``), over ``n``
    tasks (:func:`skillopt.gate.mean_interval` gives the interval)."""

    mean: float
    low: float
    high: float
    n: int = Field(ge=0)

    @classmethod
    def of(cls, values: Sequence[float]) -> Score:
        """The mean of per-task scores and its 95% interval (:func:`skillopt.gate.mean_interval`:
        Wilson's for 0/1 scores, a seeded bootstrap otherwise).

        Raises:
            ValueError: no values.
        """
        from skillopt.gate import mean_interval

        interval = mean_interval(values)
        if interval is None:
            raise ValueError("a score needs at least one task's value")
        return cls(mean=sum(values) / len(values), low=interval[0], high=interval[1], n=len(values))

    def text(self) -> str:
        """``0.625 [0.521, 0.719] (n=40)``."""
        from skillopt.gate import format_score  # numpy's import time, paid only when printing

        return f"{format_score(self.mean, (self.low, self.high))} (n={self.n})"


class GateRecord(_Record):
    """One decision of the gate on the proposal: ``action`` is a
    :class:`skillopt.gate.GateAction` value (``accept``, ``accept_new_best``, ``reject``,
    ``force_accept``), ``reason`` why, in its words."""

    action: str
    reason: str = ""
    step: int | None = None

    @property
    def accepted(self) -> bool:
        """Every action but ``reject`` made the proposal current."""
        return self.action != "reject"


class TaskResult(_Record):
    """One held-out task: the live skill's and the proposal's hard scores (``None``: not
    measured, e.g. an infrastructure failure), and whether it passed with the live skill and
    fails with the proposal (a regression)."""

    task_id: str
    live: float | None = None
    proposal: float | None = None
    regressed: bool = False


class ScriptCheckRecord(_Record):
    """The sandbox's verdict on one of the proposal's scripts
    (:class:`skillopt.skill.checks.ScriptCheck`)."""

    path: str
    ok: bool
    rule: str = ""
    message: str = ""

    @classmethod
    def of(cls, check: ScriptCheck) -> ScriptCheckRecord:
        """The record of a check made in the sandbox (``controller.fleet.script_checks``)."""
        return cls(path=check.path, ok=check.ok, rule=check.rule, message=check.message)


class Evidence(_Record):
    """Why the proposal should replace the live skill, as ``skillopt sleep run`` measured it.

    Attributes:
        live, proposal: their scores on the held-out tasks, with 95% intervals.
        gate: the gate's decisions, in order; the last one is the verdict.
        tasks: per held-out task, the no-regression results.
        max_regressions: regressions the gate allowed (0: none).
        script_checks: the sandbox's checks of the proposal's scripts (the ones training runs).
        session_ids: the harvested sessions the tasks were mined from.
        run_dir: the training run's folder.
    """

    live: Score
    proposal: Score
    gate: tuple[GateRecord, ...]
    tasks: tuple[TaskResult, ...] = ()
    max_regressions: int = 0
    script_checks: tuple[ScriptCheckRecord, ...] = ()
    session_ids: tuple[str, ...] = ()
    run_dir: str | None = None

    def refusal(self) -> str:
        """Why this evidence does not allow staging (``""``: it does): the gate's last decision
        rejected, more tasks regressed than allowed, or a script failed its check."""
        if not self.gate:
            return "it holds no gate decision"
        last = self.gate[-1]
        if not last.accepted:
            return f"the gate rejected the proposal ({last.reason or 'no reason given'})"
        regressed = [t.task_id for t in self.tasks if t.regressed]
        if len(regressed) > self.max_regressions:
            shown = ", ".join(regressed[:5]) + (" ..." if len(regressed) > 5 else "")
            return f"{len(regressed)} task(s) regressed, {self.max_regressions} allowed ({shown})"
        failed = [c for c in self.script_checks if not c.ok]
        if failed:
            return f"{failed[0].path} failed its check {failed[0].rule!r}: {failed[0].message}"
        return ""


class LiveSkill(_Record):
    """Where the live skill is installed: ``path`` is the ``<name>/`` folder a harness reads
    (it may not exist yet); ``tree_sha256`` the live package's tree hash at the time the record
    was made, ``None`` when nothing was installed there."""

    harness: str
    scope: Literal["project", "user"]
    path: str
    tree_sha256: str | None = None


class StagingManifest(_Record):
    """``manifest.json`` of a staging folder. The proposal package is ``proposal/<name>/``
    next to it; ``REPORT.md`` says the same for a person."""

    schema_version: int = MANIFEST_VERSION
    skill_name: str
    proposal_tree_sha256: str
    live: LiveSkill
    evidence: Evidence
    created_at: datetime


class Receipt(_Record):
    """What one ``adopt`` or ``revert`` did (``receipts/<time>-<skill>[-revert].json``).

    Attributes:
        kind: ``adopt`` or ``revert``.
        staging: the staging folder of the proposal.
        installed: where the skill was written (the harness's ``<name>/`` folder).
        backup: the copy of what was installed before (``None``: nothing was).
        before_sha256, after_sha256: the installed tree hash before and after (``None``:
            nothing installed).
        reverts: for a revert, the adoption receipt it undid.
    """

    schema_version: int = RECEIPT_VERSION
    kind: Literal["adopt", "revert"]
    skill_name: str
    staging: str
    harness: str
    scope: Literal["project", "user"]
    installed: str
    backup: str | None
    before_sha256: str | None
    after_sha256: str | None
    reverts: str | None = None
    created_at: datetime
