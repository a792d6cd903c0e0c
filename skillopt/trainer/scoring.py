"""How a run scores rollout rows: means over a batch, paired tests of two skills' rows, the
infrastructure guard. Skills on the selection split are the gate's
(:class:`skillopt.gate.SelectionScoring`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from skillopt.gate import PairedTest, paired_test
from skillopt.types import RolloutResult

__all__ = [
    "BatchScore",
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
