"""How a run scores: rows (means over a batch, paired tests, the infrastructure guard) and
skills on the selection split (the gate's metric per item and per skill, the measurement
protocol, the selection cache's lookups and the 95% intervals).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from skillopt.config.schema import EvaluationConfig
from skillopt.gate import GateCache, GateCacheEntry, gate_key, gate_score
from skillopt.stats import Interval, PairedTest, mean_interval, paired_test
from skillopt.types import RolloutResult, skill_hash

__all__ = [
    "BatchScore",
    "SelectionScoring",
    "paired_rows",
    "score_rows",
    "too_many_infra",
]


@dataclass(frozen=True)
class BatchScore:
    hard: float
    soft: float
    n: int
    n_infra: int
    n_failed: int


def too_many_infra(n_infra: int, n_rows: int, max_fraction: float) -> bool:
    """More rows lost to infrastructure than ``max_fraction`` (``evaluation.max_infra_fraction``)
    allows: a mean over the rest is over a different subset than another skill's, not a
    measurement."""
    return n_infra > max_fraction * max(1, n_rows)


def score_rows(rows: Sequence[RolloutResult]) -> BatchScore:
    """Means of hard/soft over rows without infrastructure errors (those are masked)."""
    scored = [r for r in rows if r.infra_error is None]
    n = len(scored)
    return BatchScore(
        hard=sum(r.hard for r in scored) / n if n else 0.0,
        soft=sum(r.soft for r in scored) / n if n else 0.0,
        n=n,
        n_infra=len(rows) - n,
        n_failed=sum(1 for r in scored if r.hard < 1e-9),
    )


def paired_rows(
    rows: Sequence[RolloutResult],
    against: Sequence[RolloutResult],
    value: Callable[[RolloutResult], float] = lambda r: r.hard,
) -> PairedTest | None:
    """The paired test of ``rows`` against ``against`` over the items both scored (by
    ``value``, the hard score unless told); ``None`` when no item was scored on both sides."""
    other = {r.id: r for r in against if r.infra_error is None}
    pairs = [(r, other[r.id]) for r in rows if r.infra_error is None and r.id in other]
    if not pairs:
        return None
    return paired_test([value(a) for a, _ in pairs], [value(b) for _, b in pairs])


class SelectionScoring:
    """The gate's view of skills on the selection split, over the run's selection cache.

    Args:
        evaluation: the ``evaluation`` section (metric, semantic density, gate mode).
        cache: the selection cache (measurements by :func:`~skillopt.gate.gate_key`).
    """

    def __init__(self, evaluation: EvaluationConfig, cache: GateCache) -> None:
        self.e = evaluation
        self.cache = cache

    def score(self, hard: float, soft: float, skill: str) -> float:
        """A skill's selection score: its selection means on ``evaluation.gate_metric``."""
        e = self.e
        return gate_score(
            hard,
            soft,
            metric=e.gate_metric,
            mixed_weight=e.gate_mixed_weight,
            skill_content=skill if e.use_semantic_density else None,
            semantic_density_weight=e.semantic_density_weight if e.use_semantic_density else 0.0,
            leading_words=e.leading_words,
        )

    def item_scores(
        self, hard: Mapping[str, float], soft: Mapping[str, float], skill: str
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
        return self.e.gate_repeats if self.e.gate_mode == "repeat" else 1

    def key(self, skill: str) -> str:
        """The selection cache's key of ``skill`` measured with this run's protocol."""
        return gate_key(skill_hash(skill), self.repeats)

    def measured(self, skill: str) -> GateCacheEntry | None:
        """The selection measurement of ``skill`` with this run's protocol, if taken."""
        return self.cache.get(self.key(skill))

    def interval(self, skill: str) -> Interval | None:
        """95% interval of ``skill``'s selection score (``None``: not measured)."""
        hit = self.measured(skill)
        if hit is None or not hit.items:
            return None
        return mean_interval(list(self.item_scores(hit.items, hit.soft_items, skill).values()))

    def skill_score(self, skill: str) -> float | None:
        """The selection score of ``skill`` from its measurement (``None``: not measured)."""
        hit = self.measured(skill)
        return None if hit is None else self.score(hit.hard, hit.soft, skill)
