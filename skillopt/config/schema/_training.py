"""The sections of the training loop: ``train`` (epochs, batches, budgets), ``gradient`` (the
analysts that reflect on trajectories) and ``optimizer`` (how reflections become a new skill:
the edit budget, the update mode, the epoch's slow update and meta skill)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, ClassVar, Literal, TypeAlias

from skillopt.config._fields import FieldError
from skillopt.config.schema._section import _Section
from skillopt.validation import Bounds, Canonical, Int

__all__ = [
    "AppendixSource",
    "GradientConfig",
    "LrControlMode",
    "LrScheduler",
    "OptimizerConfig",
    "PairPolicy",
    "SkillUpdateMode",
    "TrainConfig",
]

LrScheduler = Literal["constant", "linear", "cosine", "autonomous"]
LrControlMode = Literal["fixed", "autonomous", "none"]
SkillUpdateMode = Literal["patch", "rewrite_from_suggestions", "full_rewrite_minibatch"]
PairPolicy = Literal["mixed", "changed", "unchanged"]
AppendixSource = Literal["both", "failure_only"]

#: Enum field → {alternative spelling: canonical value}, resolved when the section is built.
_OPTIMIZER_ALIASES: Mapping[str, Mapping[str, str]] = MappingProxyType(
    {
        "lr_control_mode": {
            "manual": "fixed",
            "scheduler": "fixed",
            "scheduled": "fixed",
            "auto": "autonomous",
            "optimizer": "autonomous",
            "off": "none",
            "no_lr": "none",
        },
        "skill_update_mode": {
            "edits": "patch",
            "rewrite": "rewrite_from_suggestions",
            "suggestions": "rewrite_from_suggestions",
            "rewrite_suggestions": "rewrite_from_suggestions",
            "full_rewrite": "full_rewrite_minibatch",
            "minibatch_full_rewrite": "full_rewrite_minibatch",
            "skill_rewrite_minibatch": "full_rewrite_minibatch",
        },
        "longitudinal_pair_policy": {
            "default": "mixed",
            "random": "mixed",
            "all": "mixed",
            "change": "changed",
            "delta": "changed",
            "10_01": "changed",
            "01_10": "changed",
            "stable": "unchanged",
            "same": "unchanged",
            "00_11": "unchanged",
        },
    }
)

LrSchedulerField: TypeAlias = Annotated[LrScheduler, Canonical()]
LrControlModeField: TypeAlias = Annotated[LrControlMode, Canonical(_OPTIMIZER_ALIASES["lr_control_mode"])]
SkillUpdateModeField: TypeAlias = Annotated[
    SkillUpdateMode, Canonical(_OPTIMIZER_ALIASES["skill_update_mode"])
]
PairPolicyField: TypeAlias = Annotated[PairPolicy, Canonical(_OPTIMIZER_ALIASES["longitudinal_pair_policy"])]
AppendixSourceField: TypeAlias = Annotated[AppendixSource, Canonical()]


class TrainConfig(_Section):
    """The training loop: epochs and batches."""

    SECTION: ClassVar[str] = "train"

    num_epochs: Annotated[int, Bounds(ge=1)] = 4
    """Passes over the training split."""
    train_size: Annotated[int, Bounds(ge=0, note=" (0 = derive from the data)")] = 0
    """Training items used per epoch; 0 = all items of the train split."""
    batch_size: Annotated[int, Bounds(ge=1)] = 40
    """Items rolled out per batch (one optimizer step per ``accumulation`` batches)."""
    accumulation: Annotated[int, Bounds(ge=1)] = 1
    """Batches whose reflections are pooled into one optimizer step."""
    seed: Int = 42
    """Seed of batch sampling and minibatch composition."""
    max_tokens: Annotated[int, Bounds(ge=0, note=" (0 = no limit)")] = 0
    """Run budget: total model tokens (optimizer and target) after which the run stops at the
    next step boundary; 0 = no limit. ``--resume`` with a larger budget continues."""
    max_cost_usd: Annotated[float, Bounds(ge=0.0, note=" (0 = no limit)")] = 0.0
    """Run budget in USD (from ``model.prices``); 0 = no limit. Stops like ``max_tokens``."""

    @property
    def effective_batch_size(self) -> int:
        """Items per optimizer step (``batch_size * accumulation``)."""
        return self.batch_size * self.accumulation

    def steps_per_epoch(self, n_train: int) -> int:
        """Optimizer steps per epoch for ``n_train`` training items: ``ceil(n / effective batch)``."""
        return max(1, math.ceil(n_train / self.effective_batch_size)) if n_train > 0 else 0


_NEVER_SHRINKS = (
    ": merging groups of one patch never shrinks the pool (the reference looped forever, issue #194)"
)


class GradientConfig(_Section):
    """Reflection ("gradient"): analysts over minibatches of trajectories, then merges."""

    SECTION: ClassVar[str] = "gradient"

    minibatch_size: Annotated[int, Bounds(ge=1)] = 8
    """Trajectories per analyst call (M)."""
    merge_batch_size: Annotated[int, Bounds(ge=2, note=_NEVER_SHRINKS)] = 8
    """Patches merged per merge call, hierarchically until one remains (>= 2)."""
    analyst_workers: Annotated[int, Bounds(ge=1)] = 16
    """Concurrent analyst/merge calls to the optimizer."""
    failure_only: bool = False
    """Reflect on failed trajectories only (skip success minibatches)."""
    deep_reflect: bool = False
    """Probe selected trajectories with extra target calls before reflecting."""
    probe_failures: Annotated[int, Bounds(ge=0)] = 2
    """Failed trajectories probed per step when ``deep_reflect`` is on."""
    probe_successes: Annotated[int, Bounds(ge=0)] = 1
    """Successful trajectories probed per step when ``deep_reflect`` is on."""


class OptimizerConfig(_Section):
    """How reflections become a new skill: edit budget ("learning rate"), update mode, epochs' stages."""

    SECTION: ClassVar[str] = "optimizer"
    ALIASES: ClassVar[Mapping[str, Mapping[str, str]]] = _OPTIMIZER_ALIASES

    learning_rate: Annotated[int, Bounds(ge=1)] = 4
    """Edit budget: the most edits applied per step (also each analyst's cap)."""
    min_learning_rate: Annotated[int, Bounds(ge=1)] = 2
    """Floor of the scheduled edit budget."""
    lr_scheduler: LrSchedulerField = "cosine"
    """Schedule of the edit budget over the run's steps; ``autonomous`` = no clipping."""
    lr_control_mode: LrControlModeField = "fixed"
    """Who picks each step's budget: the scheduler (``fixed``), the optimizer model
    (``autonomous``) or nobody (``none``: no budget, every edit is applied)."""
    skill_update_mode: SkillUpdateModeField = "patch"
    """``patch`` applies ranked edits; ``rewrite_from_suggestions`` rewrites the skill from ranked
    suggestions; ``full_rewrite_minibatch`` takes the merged whole-skill candidate."""
    use_slow_update: bool = True
    """Run the end-of-epoch slow update (compare previous and current skill)."""
    slow_update_samples: Annotated[int, Bounds(ge=1)] = 20
    """Training items rolled out with both skills for the slow update and the meta skill."""
    slow_update_gate_with_selection: bool = True
    """Gate the slow-update candidate with the run's gate (``evaluation.gate_mode``) like a
    step's candidate. On by default so that nothing becomes current or best that the run's
    gate did not accept (a ``paired`` run gets no untested skill). ``false`` is the
    reference's default, for parity runs: the candidate is forced into the current skill (its
    score re-measured) and never made the best skill on its own."""
    longitudinal_pair_policy: PairPolicyField = "mixed"
    """Which previous/current pairs the slow update sees: all, outcome-changed or unchanged."""
    use_meta_skill: bool = True
    """Maintain the optimizer-facing meta skill across epochs."""
    use_skill_aware_reflection: bool = False
    """Let analysts write to the skill-aware appendix."""
    skill_aware_appendix_source: AppendixSourceField = "both"
    """Trajectories that feed the appendix: ``both`` or ``failure_only``."""
    skill_aware_consolidate_threshold: Annotated[int, Bounds(ge=0, note=" (0 = never)")] = 0
    """Appendix notes that trigger a consolidation call; 0 = never consolidate."""
    whitespace_tolerant_edits: bool = False
    """Match edit targets ignoring whitespace differences (reference: exact substring only)."""
    script_self_test_timeout_s: Annotated[float, Bounds(gt=0)] = 10.0
    """Time limit of a script's own self-test (``--self-test``) when a script the optimizer
    created or changed is checked in a sandbox container before its candidate is evaluated."""

    def _validate(self) -> None:
        if self.min_learning_rate > self.learning_rate:
            raise FieldError(
                self._key("min_learning_rate"),
                f"must be <= optimizer.learning_rate ({self.learning_rate}), got {self.min_learning_rate}",
            )
