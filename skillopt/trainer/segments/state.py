"""What flows through the segments of a step and of the fit: frozen inputs, then each
segment's output.

A step's segment takes a :class:`StepState` and returns a new one with its output filled in;
nothing else changes until the step commits (its last segment's commit). The fit's segments
(the baseline before the epochs, the final check and the finish after them) do the same over a
:class:`FitState`; an epoch end's are in :mod:`.epoch_end`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from skillopt.gate import GateAction, mean_interval
from skillopt.reflection import RawPatch
from skillopt.trainer.planning import Batch
from skillopt.trainer.records import BatchStats, ProposalStats, RolloutStats, SelectionStats
from skillopt.trainer.scoring import score_rows
from skillopt.trainer.segments.selection import SelectionEval
from skillopt.trainer.summary import FitResult, TestScores
from skillopt.types import RolloutResult, SkillVersion, Usage

__all__ = ["FinalCheck", "FitState", "GateOutcome", "Proposal", "Reflection", "StepInputs", "StepState"]


@dataclass(frozen=True, kw_only=True)
class StepInputs:
    """What a step starts from (the committed state at its start)."""

    step: int
    epoch: int
    step_in_epoch: int
    #: The current version, and its packed text (what the optimizer model reads).
    skill: SkillVersion
    text: str
    batches: tuple[Batch, ...]
    #: The step buffer and the meta skill as the optimizer's prompts show them.
    buffer_text: str
    meta_text: str
    #: When the step started (``time.monotonic()``) and the optimizer's usage then: its
    #: commit records the step's wall time and what it spent.
    started_at: float
    usage_before: Mapping[str, Usage]


@dataclass(frozen=True, kw_only=True)
class Reflection:
    """The rollout + reflect segment's output, over every accumulation batch."""

    rows: tuple[RolloutResult, ...]
    failure_patches: tuple[RawPatch, ...]
    success_patches: tuple[RawPatch, ...]
    failure_summaries: tuple[Mapping[str, Any], ...]
    batches: tuple[BatchStats, ...]

    @property
    def has_patches(self) -> bool:
        return bool(self.failure_patches or self.success_patches)

    def stats(self) -> RolloutStats:
        """The step record's rollout part (infra rows masked out of the means)."""
        s = score_rows(self.rows)
        scored = [r for r in self.rows if r.infra_error is None]
        return RolloutStats(
            hard_ci95=mean_interval([r.hard for r in scored]),
            soft_ci95=mean_interval([r.soft for r in scored]),
            hard=s.hard,
            soft=s.soft,
            n=s.n,
            n_infra=s.n_infra,
            batches=self.batches,
            n_failure_patches=len(self.failure_patches),
            n_success_patches=len(self.success_patches),
        )


@dataclass(frozen=True, kw_only=True)
class Proposal:
    """The propose segment's output: the candidate skill (``None``: the update produced none)."""

    stats: ProposalStats
    candidate: SkillVersion | None
    #: The selected edits or suggestions (the step buffer keeps them when the gate rejects).
    selected_items: tuple[Any, ...]
    #: The edit-budget schedule gave the budget: it advances when the step commits.
    used_schedule: bool


@dataclass(frozen=True, kw_only=True)
class GateOutcome:
    """What the gate decided on a candidate, and the scores after it."""

    origin: str
    action: GateAction
    reason: str
    candidate: SkillVersion
    evaluation: SelectionEval
    current_score_after: float
    best_score_after: float
    #: The current skill's measurement when the gate had to take it (the commit keeps it).
    current_evaluation: SelectionEval | None = None
    #: The step record's ``gate_test`` (None: the current skill had no measurement).
    gate_test: Mapping[str, Any] | None = None

    @property
    def accepted(self) -> bool:
        return self.action.accepted


@dataclass(frozen=True, kw_only=True)
class StepState:
    inputs: StepInputs
    reflection: Reflection | None = None
    proposal: Proposal | None = None
    selection: SelectionStats | None = None
    gate: GateOutcome | None = None
    #: Seconds per stage (``rollout_s``, ``reflect_s``, ``aggregate_s`` ...).
    timing: Mapping[str, float] = field(default_factory=dict)

    @property
    def action(self) -> str:
        """The step's action once its segments ran."""
        if self.gate is not None:
            return self.gate.action
        if self.reflection is None or not self.reflection.has_patches:
            return "skip_no_patches"
        return "skip_no_rewrite"


@dataclass(frozen=True, kw_only=True)
class FinalCheck:
    """The final skill's selection measurement and the run's gate's verdict on making it the
    best skill (``summary.json``'s ``final_gate``)."""

    evaluation: SelectionEval
    #: ``action`` (``accept_new_best`` or ``reject``), ``reason``, ``gate_test`` (or None).
    verdict: Mapping[str, Any]
    #: The best skill's measurement when the gate had to take it (the commit keeps it).
    best_evaluation: SelectionEval | None = None


@dataclass(frozen=True, kw_only=True)
class FitState:
    """What flows through the fit's segments (baseline; after the epochs, final check and
    finish)."""

    #: The baseline's measurement (its segment's output).
    baseline: SelectionEval | None = None
    #: Set when the epochs end: whether the run went through, why it stopped, and the wall
    #: time so far (``summary.json``'s ``total_wall_time_s``).
    complete: bool = False
    stop_reason: str = ""
    wall_s: float = 0.0
    #: The final check (None: the final skill was the best one, or the run stopped early).
    final: FinalCheck | None = None
    #: The final skill's selection score as the summary reports it.
    final_score: float | None = None
    tests: TestScores | None = None
    result: FitResult | None = None
