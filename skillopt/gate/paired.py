"""Paired tests: does a candidate beat the current skill over the same items?

Every gate decision compares two means on the same items. :func:`paired_test` is the
one-sided test the ``paired`` and ``repeat`` gates decide by (and every decision records): the
exact sign test (McNemar's exact test) on pass/fail pairs (:func:`sign_test`, the binomial
tail from :mod:`skillopt.gate.distributions`), a paired bootstrap on anything else (:func:`paired_bootstrap`). It
returns the p-value, the effect (the mean paired difference) and the effect's 95% interval.

Deterministic: the bootstrap draws from a seeded generator (``seed``), so the same scores
always give the same p-value and decision.

Usage::

    t = paired_test([1, 1, 1, 0, 1], [0, 0, 1, 0, 1])    # sign test, 2 wins and no loss
    t.name, t.p_value, t.effect                          # ('sign', 0.25, 0.4)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from skillopt.gate.distributions import fair_coin_tail
from skillopt.gate.intervals import EPS, Interval, is_binary, percentile_interval, resampled_means

__all__ = ["TEST_RESAMPLES", "PairedTest", "paired_bootstrap", "paired_test", "record_of", "sign_test"]

#: Resamples of a test's bootstrap: the smallest p-value it can give is 1 / 10001.
TEST_RESAMPLES = 10000


def sign_test(wins: int, losses: int) -> float:
    """One-sided exact sign test: the probability of at least ``wins`` wins among
    ``wins + losses`` fair coin flips (ties are left out before). On pass/fail pairs this is
    McNemar's exact test; 1.0 when there is no discordant pair."""
    n = wins + losses
    if n <= 0 or wins <= 0:
        return 1.0
    return min(1.0, fair_coin_tail(wins, n))


def paired_bootstrap(
    diffs: Sequence[float], *, n_resamples: int = TEST_RESAMPLES, seed: int = 0
) -> tuple[float, Interval]:
    """One-sided paired bootstrap on per-item differences (candidate minus current).

    Returns:
        ``(p, ci95)``: ``p = (k + 1) / (B + 1)`` where ``k`` of the ``B`` resampled mean
        differences are at or below zero (so ``p <= alpha`` exactly when the one-sided
        ``1 - alpha`` percentile bound is above zero, and never 0), and the percentile 95%
        interval of the mean difference.

    Raises:
        ValueError: no differences.
    """
    if not diffs:
        raise ValueError("paired_bootstrap: no differences")
    arr = np.asarray(diffs, dtype=float)
    if np.all(arr == arr[0]):
        k = n_resamples if arr[0] <= 0 else 0
        return (k + 1) / (n_resamples + 1), (float(arr[0]), float(arr[0]))
    means = resampled_means(arr, n_resamples, seed)
    k = int(np.count_nonzero(means <= EPS))
    return (k + 1) / (n_resamples + 1), percentile_interval(means, 0.95)


def record_of(test: Any, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """A test's fields as a JSON record, in their declared order (the interval as a list)."""
    return {
        f.name: list(value) if f.name == "ci95" else value
        for f in fields(test)
        if f.name not in skip
        for value in (getattr(test, f.name),)
    }


@dataclass(frozen=True, kw_only=True)
class PairedTest:
    """A one-sided paired comparison of a candidate with the current skill.

    Attributes:
        name: ``sign`` (exact sign / McNemar test on pass/fail pairs) or ``bootstrap``
            (paired bootstrap); ``none`` when no item was measured on both sides.
        p_value: Probability of an effect at least this large if the candidate were no better.
        effect: Mean paired difference (candidate minus current), in score units.
        ci95: 95% interval of ``effect``.
        n: Items measured on both sides.
        wins: Items where the candidate scored higher.
        losses: Items where the current skill scored higher.
    """

    name: str
    p_value: float
    effect: float
    ci95: Interval
    n: int
    wins: int
    losses: int

    def to_json(self) -> dict[str, Any]:
        return record_of(self)


def paired_test(
    candidate: Sequence[float],
    current: Sequence[float],
    *,
    shift: float = 0.0,
    seed: int = 0,
    n_resamples: int = TEST_RESAMPLES,
) -> PairedTest:
    """Test whether ``candidate`` beats ``current`` on the same items (equal length, same order).

    Pass/fail pairs (every value 0 or 1) with no ``shift`` get the exact sign test; anything
    else (soft or mixed scores, scores averaged over repeats, a semantic-density bonus as
    ``shift``, added to every difference) the paired bootstrap. The effect's interval is the
    paired bootstrap's either way.

    Raises:
        ValueError: the sequences differ in length.
    """
    if len(candidate) != len(current):
        raise ValueError(
            f"paired_test: {len(candidate)} candidate scores against {len(current)} current ones"
        )
    diffs = [float(c) - float(b) + shift for c, b in zip(candidate, current, strict=True)]
    wins = sum(d > EPS for d in diffs)
    losses = sum(d < -EPS for d in diffs)
    if not diffs:
        return PairedTest(name="none", p_value=1.0, effect=0.0, ci95=(0.0, 0.0), n=0, wins=0, losses=0)
    p_boot, ci = paired_bootstrap(diffs, n_resamples=n_resamples, seed=seed)
    effect = sum(diffs) / len(diffs)
    if abs(shift) < EPS and is_binary(candidate) and is_binary(current):
        return PairedTest(
            name="sign",
            p_value=sign_test(wins, losses),
            effect=effect,
            ci95=ci,
            n=len(diffs),
            wins=wins,
            losses=losses,
        )
    return PairedTest(
        name="bootstrap", p_value=p_boot, effect=effect, ci95=ci, n=len(diffs), wins=wins, losses=losses
    )
