"""The gate's view of skill versions on the selection split, over the run's selection cache:
:class:`SelectionScoring` (a version's gate score, per item and overall, the measurement
protocol's cache key, the score's 95% interval), configured by the ``evaluation`` section.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from skillopt.gate.cache import GateCache, GateCacheEntry, gate_key
from skillopt.gate.intervals import Interval, mean_interval
from skillopt.gate.score import gate_score
from skillopt.types import SkillVersion

if TYPE_CHECKING:
    from skillopt.config.schema import EvaluationConfig

__all__ = ["SelectionScoring"]


class SelectionScoring:
    """The gate's view of skills on the selection split, over the run's selection cache.

    Args:
        evaluation: the ``evaluation`` section (metric, semantic density, gate mode).
        cache: the selection cache (measurements by :func:`~skillopt.gate.gate_key` of a
            version's tree hash).
        text: a version's packed text (the run's frame): its semantic density is the text's.
    """

    def __init__(
        self, evaluation: EvaluationConfig, cache: GateCache, *, text: Callable[[SkillVersion], str]
    ) -> None:
        self.e = evaluation
        self.cache = cache
        self.text = text

    def score(self, hard: float, soft: float, skill: SkillVersion) -> float:
        """A skill's selection score: its selection means on ``evaluation.gate_metric``."""
        e = self.e
        return gate_score(
            hard,
            soft,
            metric=e.gate_metric,
            mixed_weight=e.gate_mixed_weight,
            skill_content=self.text(skill) if e.use_semantic_density else None,
            semantic_density_weight=e.semantic_density_weight if e.use_semantic_density else 0.0,
            leading_words=e.leading_words,
        )

    def item_scores(
        self, hard: Mapping[str, float], soft: Mapping[str, float], skill: SkillVersion
    ) -> dict[str, float]:
        """Per item, the gate's score (the same projection as :meth:`score`: the mean of these
        is the skill's score); an item without a soft score counts its hard score."""
        bonus = self.score(0.0, 0.0, skill)  # the semantic-density bonus (0 when off)
        e = self.e
        return {
            i: gate_score(h, soft.get(i, h), metric=e.gate_metric, mixed_weight=e.gate_mixed_weight) + bonus
            for i, h in hard.items()
        }

    @property
    def repeats(self) -> int:
        """Rollouts per selection item and skill: ``evaluation.gate_repeats`` in the ``repeat``
        gate, else 1."""
        return self.e.gate_mode.rollouts_per_item(self.e.gate_repeats)

    def key(self, skill: SkillVersion) -> str:
        """The selection cache's key of ``skill`` measured with this run's protocol."""
        return gate_key(skill.tree_sha256, self.repeats)

    def measured(self, skill: SkillVersion) -> GateCacheEntry | None:
        """The selection measurement of ``skill`` with this run's protocol, if taken."""
        return self.cache.get(self.key(skill))

    def interval(self, skill: SkillVersion) -> Interval | None:
        """95% interval of ``skill``'s selection score (``None``: not measured)."""
        hit = self.measured(skill)
        if hit is None or not hit.items:
            return None
        return mean_interval(list(self.item_scores(hit.items, hit.soft_items, skill).values()))

    def skill_score(self, skill: SkillVersion) -> float | None:
        """The selection score of ``skill`` from its measurement (``None``: not measured)."""
        hit = self.measured(skill)
        return None if hit is None else self.score(hit.hard, hit.soft, skill)
