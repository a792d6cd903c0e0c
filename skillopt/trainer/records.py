"""Typed, frozen records of a run's steps (:class:`StepRecord` and its parts); the epoch and
fit records are in :mod:`skillopt.trainer.summary`.

Their JSON forms are the run directory's contract (``steps/*/step_record.json``, the list in
``history.json``, ``summary.json``): the WebUI, ``skillopt runs`` and other teams' tools read
them, so ``to_json`` keeps the flat shape and key order they have always had, and adds a
``schema_version``. Parts that only some steps have (a step without patches has no proposal,
one without a candidate no selection) are sub-records that are ``None`` when absent, so "absent"
and "null" stay distinct (``edit_budget`` is ``null`` in full-rewrite mode, but present).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from skillopt.gate import Interval, ci_json, ci_of
from skillopt.trainer.versions import upgrade

__all__ = [
    "SCHEMA_VERSION",
    "BatchStats",
    "ProposalStats",
    "RolloutStats",
    "SelectionStats",
    "StepRecord",
    "pick_fields",
]

#: Version of the JSON forms below and of ``summary.json`` (records without one are version 0:
#: the same keys as 1). 2: every score ``X`` has its 95% interval ``X_ci95`` beside it, and the
#: gate's ``gate_mode`` and ``gate_test`` are recorded (an older record reads with the
#: intervals ``None``, ``gate_mode`` ``strict`` and no test).
SCHEMA_VERSION = 2


def pick_fields(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    return {f.name: data[f.name] for f in fields(cls) if f.name in data}


@dataclass(frozen=True, kw_only=True)
class BatchStats:
    """One accumulation batch of a step (``accumulation_batches[i]``)."""

    batch_idx: int
    batch_seed: int
    n_envs: int
    hard: float
    soft: float
    n_infra: int
    n_failure_patches: int
    n_success_patches: int

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, kw_only=True)
class RolloutStats:
    """The step's training rollouts (infra rows masked out of the means) and its patches."""

    hard: float
    soft: float
    n: int
    n_infra: int
    batches: tuple[BatchStats, ...]
    n_failure_patches: int
    n_success_patches: int
    hard_ci95: Interval | None = None
    soft_ci95: Interval | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "rollout_hard": self.hard,
            "rollout_hard_ci95": ci_json(self.hard_ci95),
            "rollout_soft": self.soft,
            "rollout_soft_ci95": ci_json(self.soft_ci95),
            "rollout_n": self.n,
            "rollout_n_infra": self.n_infra,
            "accumulation_batches": [b.to_json() for b in self.batches],
            "n_patches": self.n_failure_patches + self.n_success_patches,
            "n_failure_patches": self.n_failure_patches,
            "n_success_patches": self.n_success_patches,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> RolloutStats:
        return cls(
            hard=d["rollout_hard"],
            soft=d["rollout_soft"],
            n=d["rollout_n"],
            n_infra=d["rollout_n_infra"],
            batches=tuple(
                BatchStats(**pick_fields(BatchStats, b)) for b in d.get("accumulation_batches") or ()
            ),
            n_failure_patches=d.get("n_failure_patches", 0),
            n_success_patches=d.get("n_success_patches", 0),
            hard_ci95=ci_of(d.get("rollout_hard_ci95")),
            soft_ci95=ci_of(d.get("rollout_soft_ci95")),
        )


@dataclass(frozen=True, kw_only=True)
class ProposalStats:
    """Aggregate, select and update (present when the step had patches)."""

    n_edits_merged: int
    lr_decision: Mapping[str, Any] | None = None  # autonomous edit budget only
    edit_budget: int | None = None
    lr_control_mode: str = ""
    n_edits_ranked: int = 0
    support_counts: tuple[Any, ...] = ()
    edit_apply_summary: Mapping[str, Any] | None = None  # patch mode
    rewrite_change_summary: tuple[str, ...] | None = None  # rewrite mode
    candidate_hash: str | None = None  # the update produced a candidate
    candidate_skill_len: int | None = None
    #: The candidate's change per package file (``FileChange.summary()``: path, status, sizes,
    #: lines added/removed); empty for no candidate.
    file_changes: tuple[Mapping[str, Any], ...] = ()
    #: Scripts the update created or changed, checked in a sandbox (``ScriptCheck.to_dict()``);
    #: a failed one's edits were dropped before the gate.
    script_checks: tuple[Mapping[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"n_edits_merged": self.n_edits_merged}
        if self.lr_decision is not None:
            out["lr_decision"] = dict(self.lr_decision)
        out.update(
            edit_budget=self.edit_budget,
            lr_control_mode=self.lr_control_mode,
            n_edits_ranked=self.n_edits_ranked,
            support_counts=list(self.support_counts),
        )
        if self.edit_apply_summary is not None:
            out["edit_apply_summary"] = dict(self.edit_apply_summary)
        if self.rewrite_change_summary is not None:
            out["rewrite_change_summary"] = list(self.rewrite_change_summary)
        if self.candidate_hash is not None:
            out.update(candidate_hash=self.candidate_hash, candidate_skill_len=self.candidate_skill_len)
        if self.file_changes:
            out["file_changes"] = [dict(c) for c in self.file_changes]
        if self.script_checks:
            out["script_checks"] = [dict(c) for c in self.script_checks]
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ProposalStats:
        summary = d.get("rewrite_change_summary")
        return cls(
            n_edits_merged=d["n_edits_merged"],
            lr_decision=d.get("lr_decision"),
            edit_budget=d.get("edit_budget"),
            lr_control_mode=d.get("lr_control_mode", ""),
            n_edits_ranked=d.get("n_edits_ranked", 0),
            support_counts=tuple(d.get("support_counts") or ()),
            edit_apply_summary=d.get("edit_apply_summary"),
            rewrite_change_summary=None if summary is None else tuple(summary),
            candidate_hash=d.get("candidate_hash"),
            candidate_skill_len=d.get("candidate_skill_len"),
            file_changes=tuple(d.get("file_changes") or ()),
            script_checks=tuple(d.get("script_checks") or ()),
        )


@dataclass(frozen=True, kw_only=True)
class SelectionStats:
    """The candidate's selection evaluation and the gate's decision on it."""

    hard: float
    soft: float
    cached: bool
    n_infra: int
    gate_metric: str
    candidate_score: float
    current_score_before: float | None
    gate_reason: str
    hard_ci95: Interval | None = None
    soft_ci95: Interval | None = None
    candidate_score_ci95: Interval | None = None
    current_score_before_ci95: Interval | None = None
    gate_mode: str = "strict"
    #: The paired test of candidate against current (``skillopt.trainer.segments.gate``).
    gate_test: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "selection_hard": self.hard,
            "selection_hard_ci95": ci_json(self.hard_ci95),
            "selection_soft": self.soft,
            "selection_soft_ci95": ci_json(self.soft_ci95),
            "selection_cached": self.cached,
            "selection_n_infra": self.n_infra,
            "gate_metric": self.gate_metric,
            "candidate_gate_score": self.candidate_score,
            "candidate_gate_score_ci95": ci_json(self.candidate_score_ci95),
            "current_score_before": self.current_score_before,
            "current_score_before_ci95": ci_json(self.current_score_before_ci95),
            "gate_reason": self.gate_reason,
            "gate_mode": self.gate_mode,
            "gate_test": dict(self.gate_test) if self.gate_test is not None else None,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SelectionStats:
        return cls(
            hard=d["selection_hard"],
            soft=d["selection_soft"],
            cached=d.get("selection_cached", False),
            n_infra=d.get("selection_n_infra", 0),
            gate_metric=d.get("gate_metric", "hard"),
            candidate_score=d["candidate_gate_score"],
            current_score_before=d.get("current_score_before"),
            gate_reason=d.get("gate_reason", ""),
            hard_ci95=ci_of(d.get("selection_hard_ci95")),
            soft_ci95=ci_of(d.get("selection_soft_ci95")),
            candidate_score_ci95=ci_of(d.get("candidate_gate_score_ci95")),
            current_score_before_ci95=ci_of(d.get("current_score_before_ci95")),
            gate_mode=d.get("gate_mode", "strict"),
            gate_test=d.get("gate_test"),
        )


@dataclass(frozen=True, kw_only=True)
class StepRecord:
    """One committed step (``steps/step_NNNN/step_record.json`` and ``history.json``)."""

    step: int
    epoch: int
    step_in_epoch: int
    timing: Mapping[str, float]
    rollout: RolloutStats
    proposal: ProposalStats | None
    selection: SelectionStats | None
    action: str
    current_score: float | None
    best_score: float | None
    best_step: int
    current_origin: str
    best_origin: str
    skill_len: int
    tokens: Mapping[str, Any]
    wall_time_s: float
    current_score_ci95: Interval | None = None
    best_score_ci95: Interval | None = None

    @property
    def accepted(self) -> bool:
        return "accept" in self.action

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "step": self.step,
            "epoch": self.epoch,
            "step_in_epoch": self.step_in_epoch,
            "timing": dict(self.timing),
            **self.rollout.to_json(),
        }
        if self.proposal is not None:
            out.update(self.proposal.to_json())
        if self.selection is not None:
            out.update(self.selection.to_json())
        out.update(
            action=self.action,
            current_score=self.current_score,
            current_score_ci95=ci_json(self.current_score_ci95),
            best_score=self.best_score,
            best_score_ci95=ci_json(self.best_score_ci95),
            best_step=self.best_step,
            current_origin=self.current_origin,
            best_origin=self.best_origin,
            skill_len=self.skill_len,
            tokens=dict(self.tokens),
            wall_time_s=self.wall_time_s,
            schema_version=SCHEMA_VERSION,
        )
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> StepRecord:
        """Parse a record of any schema version.

        Raises:
            RecordError: written by a newer skillopt, or not a JSON object.
            KeyError, TypeError, ValueError: not a step record.
        """
        d = upgrade(d, key="schema_version", current=SCHEMA_VERSION)
        return cls(
            step=int(d["step"]),
            epoch=int(d["epoch"]),
            step_in_epoch=int(d.get("step_in_epoch", 0)),
            timing=dict(d.get("timing") or {}),
            rollout=RolloutStats.from_json(d),
            proposal=ProposalStats.from_json(d) if "n_edits_merged" in d else None,
            selection=SelectionStats.from_json(d) if "candidate_gate_score" in d else None,
            action=str(d["action"]),
            current_score=d.get("current_score"),
            best_score=d.get("best_score"),
            best_step=int(d.get("best_step", 0)),
            current_origin=str(d.get("current_origin", "")),
            best_origin=str(d.get("best_origin", "")),
            skill_len=int(d.get("skill_len", 0)),
            tokens=dict(d.get("tokens") or {}),
            wall_time_s=float(d.get("wall_time_s", 0.0)),
            current_score_ci95=ci_of(d.get("current_score_ci95")),
            best_score_ci95=ci_of(d.get("best_score_ci95")),
        )
