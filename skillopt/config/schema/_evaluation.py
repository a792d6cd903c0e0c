"""The ``evaluation`` section: how the gate decides whether a candidate skill replaces the
current one (``gate_mode`` and its settings: docs/gate.md), and what the final evaluation
measures."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal, TypeAlias

from skillopt.config._fields import FieldError
from skillopt.config.schema._section import _Section
from skillopt.gate.modes import GateMode
from skillopt.validation import Bounds, Canonical, Words

__all__ = ["DEFAULT_LEADING_WORDS", "EvaluationConfig", "GateMetric"]

GateMetric = Literal["hard", "soft", "mixed"]
GateSpending = Literal["pocock", "obrien_fleming"]
GateFutility = Literal["binding", "non_binding"]
GateRoundItems = Literal["discordant", "fixed"]

GateMetricField: TypeAlias = Annotated[GateMetric, Canonical()]
GateModeField: TypeAlias = Annotated[GateMode, Canonical()]
GateSpendingField: TypeAlias = Annotated[GateSpending, Canonical()]
GateFutilityField: TypeAlias = Annotated[GateFutility, Canonical()]
GateRoundItemsField: TypeAlias = Annotated[GateRoundItems, Canonical()]

DEFAULT_LEADING_WORDS = (
    "MUST",
    "ALWAYS",
    "NEVER",
    "ONLY",
    "CRITICAL",
    "IMPORTANT",
    "RESOLVE",
    "PREFER",
    "ENSURE",
    "STRICT",
    "VERIFY",
)


class EvaluationConfig(_Section):
    """The validation gate and the final evaluation."""

    SECTION: ClassVar[str] = "evaluation"

    use_gate: bool = True
    """Accept a candidate only if it beats the current skill on the selection split."""
    gate_metric: GateMetricField = "hard"
    """Score the gate compares: hard accuracy, soft score, or a weighted mix."""
    gate_mode: GateModeField = GateMode.STRICT
    """How the gate decides: ``strict`` = the candidate's mean is strictly above the current
    skill's (the reference's rule); ``paired`` = a one-sided paired test over the selection
    items is significant at ``gate_alpha`` (exact sign/McNemar test on pass/fail scores, paired
    bootstrap otherwise); ``repeat`` = every selection item is rolled out ``gate_repeats``
    times per skill, the scores averaged, then ``paired``; ``sequential`` = both skills are
    measured on the selection items in rounds and a group-sequential paired test (alpha spent
    by ``gate_spending`` over ``gate_max_rounds`` looks) accepts, rejects, or asks for another
    round, keeping the false accepts at ``gate_alpha`` over all the looks. See docs/gate.md."""
    gate_alpha: Annotated[float, Bounds(gt=0, lt=1)] = 0.05
    """Significance level of the ``paired``, ``repeat`` and ``sequential`` gates (the
    false-accept rate they allow when a candidate is no better)."""
    gate_min_effect: Annotated[float, Bounds(ge=0.0)] = 0.0
    """``paired``/``repeat``/``sequential``: also require the mean improvement over the selection items to be
    at least this (in gate-metric units, e.g. 0.05 = five points)."""
    gate_repeats: Annotated[int, Bounds(ge=1)] = 3
    """Rollouts per selection item and skill in the ``repeat`` gate (at least 2)."""
    gate_max_rounds: Annotated[int, Bounds(ge=1, le=20)] = 7
    """``sequential``: the round budget, the most rounds (looks) a decision may take; a
    candidate that crosses no boundary by the last round is rejected (reason
    ``round_budget``)."""
    gate_spending: GateSpendingField = "pocock"
    """``sequential``: how ``gate_alpha`` is spent over the rounds (Lan-DeMets): ``pocock``
    spends evenly (clear candidates stop at the first round: fewer rollouts), ``obrien_fleming``
    keeps it for the last round (the most power when every round is usually run)."""
    gate_futility: GateFutilityField = "binding"
    """``sequential``: ``binding`` = the futility stop (no observed improvement) always stops,
    so the acceptance bounds are computed with it (exactly, on pass/fail pairs: the sign
    walk's thresholds) and are lower for the same ``gate_alpha``; ``non_binding`` = the bounds
    ignore it (the normal approximation of the first release)."""
    gate_round_fraction: Annotated[float, Bounds(gt=0, le=1)] = 0.33
    """``sequential``: each round after the first measures this share of the selection items
    (at least one; 1 = all of them); which ones: ``gate_round_items``."""
    gate_round_items: GateRoundItemsField = "discordant"
    """``sequential``: which items a later round measures. ``discordant`` = the items where the
    two skills have disagreed most often so far in this decision (pass on one side, fail on the
    other: the only pairs the sign test counts), then items not yet measured, then the rest;
    chosen from where the skills disagreed, never from who won, so the test stays exact.
    ``fixed`` = the same items for every decision (the split's unused items first, then the
    selection items over and over, in an order fixed by ``train.seed``)."""
    gate_mixed_weight: Annotated[float, Bounds(ge=0, le=1)] = 0.5
    """``w`` of the ``mixed`` gate metric, ``(1 - w) * hard + w * soft`` (in [0, 1]): the weight of
    the soft score."""
    use_semantic_density: bool = False
    """Add a bonus for leading directive words to the gate score."""
    semantic_density_weight: Annotated[float, Bounds(ge=0.0)] = 0.05
    """Weight of the semantic-density bonus."""
    leading_words: Words = DEFAULT_LEADING_WORDS
    """Directive words counted by semantic density (YAML list or comma-separated string)."""
    sel_env_num: Annotated[int, Bounds(ge=0, note=" (0 = whole split)")] = 0
    """Selection items per gate evaluation; 0 = the whole selection split."""
    test_env_num: Annotated[int, Bounds(ge=0, note=" (0 = whole split)")] = 0
    """Test items in the final evaluation; 0 = the whole test split."""
    eval_test: bool = True
    """After training, evaluate the initial, best and final skills on the test split."""
    max_regressions: Annotated[int, Bounds(ge=0, note=" (null = off)")] | None = None
    """Per-item no-regression gate: reject a candidate that turns more than this many
    selection items from pass to fail; null = off (aggregate gate only)."""
    max_infra_fraction: Annotated[float, Bounds(ge=0, le=1)] = 0.2
    """Largest fraction of an evaluation's rows that may fail on infrastructure (never scored):
    above it the gate rejects the candidate, the baseline stops the run (resume reruns those
    rows) and ``skillopt eval`` exits 1."""

    def _validate(self) -> None:
        for i, word in enumerate(self.leading_words):
            if not word:
                raise FieldError(f"{self._key('leading_words')}[{i}]", "must not be empty")
        if self.gate_mode is GateMode.REPEAT and self.gate_repeats < 2:
            raise FieldError(
                self._key("gate_repeats"),
                f"must be >= 2 with gate_mode: repeat, got {self.gate_repeats} (one rollout per item is "
                "gate_mode: paired)",
            )
