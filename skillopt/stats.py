"""Intervals and paired tests for scores measured over a set of items (pure functions, numpy).

Every score skillopt shows is a mean over items, and every gate decision compares two such
means on the same items. With stochastic targets both are noisy; this module says how much.

* :func:`mean_interval` — a 95% interval of a mean score: Wilson's score interval when every
  value is 0 or 1 (hard scores), a percentile bootstrap otherwise (soft, mixed, or hard scores
  averaged over repeats).
* :func:`paired_test` — a one-sided test that a candidate beats the current skill over the
  same items: the exact sign test (McNemar's exact test) on pass/fail pairs, a paired
  bootstrap on anything else. It returns the p-value, the effect (mean paired difference) and
  the effect's 95% interval.
* :func:`items_for_power` — how many items a sign test needs to detect an effect (the docs'
  power table); :func:`sign_test_min_p` and :func:`detectable_effect` — what a sign test over
  a given number of items can show at all (the start-of-run notice of the ``paired`` gate).

Every function is deterministic: bootstraps draw from a seeded generator (``seed``), so the
same scores always give the same interval, p-value and gate decision.

Usage::

    mean_interval([1, 0, 1, 1])                          # Wilson: (0.30..., 0.95...)
    t = paired_test([1, 1, 1, 0, 1], [0, 0, 1, 0, 1])    # sign test, 2 wins and no loss
    t.name, t.p_value, t.effect                          # ('sign', 0.25, 0.4)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "Interval",
    "PairedTest",
    "bootstrap_interval",
    "ci_json",
    "ci_of",
    "detectable_effect",
    "format_score",
    "is_binary",
    "items_for_power",
    "mean_interval",
    "paired_bootstrap",
    "paired_test",
    "sign_test",
    "sign_test_min_p",
    "sign_test_power",
    "wilson_interval",
]

Interval = tuple[float, float]

#: The standard normal quantile of 0.975.
Z95 = 1.959963984540054
#: Resamples of an interval's bootstrap (the interval's bounds move by < 0.01 between seeds).
INTERVAL_RESAMPLES = 2000
#: Resamples of a test's bootstrap: the smallest p-value it can give is 1 / 10001.
TEST_RESAMPLES = 10000
_EPS = 1e-9
_CHUNK = 2000  # resamples drawn at once: bounded memory on large item sets


def is_binary(values: Sequence[float]) -> bool:
    """Every value is 0 or 1 (within 1e-9): pass/fail scores."""
    return all(abs(v) < _EPS or abs(v - 1.0) < _EPS for v in values)


def wilson_interval(successes: float, n: int, *, z: float = Z95) -> Interval:
    """Wilson's score interval of a proportion (``successes`` of ``n``); ``(0, 1)`` when
    ``n`` is 0. Unlike the normal approximation it stays inside [0, 1] and is not empty at
    0 or n successes.

    Raises:
        ValueError: ``successes`` outside ``[0, n]``.
    """
    if n <= 0:
        return (0.0, 1.0)
    if not -_EPS <= successes <= n + _EPS:
        raise ValueError(f"wilson_interval: {successes} successes of {n}")
    p = min(1.0, max(0.0, successes / n))
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def _resampled_means(values: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """Means of ``n_resamples`` resamples (with replacement) of ``values``, the same whatever
    their order (sorted first: a measurement read back from disk lists its items in another
    order than when it was taken)."""
    values = np.sort(values)
    rng = np.random.default_rng(seed)
    n = len(values)
    out = np.empty(n_resamples)
    for start in range(0, n_resamples, _CHUNK):
        size = min(_CHUNK, n_resamples - start)
        out[start : start + size] = values[rng.integers(0, n, size=(size, n))].mean(axis=1)
    return out


def _percentiles(means: np.ndarray, level: float) -> Interval:
    tail = (1.0 - level) / 2 * 100
    lo, hi = np.percentile(means, [tail, 100 - tail])
    return (float(lo), float(hi))


def bootstrap_interval(
    values: Sequence[float], *, level: float = 0.95, n_resamples: int = INTERVAL_RESAMPLES, seed: int = 0
) -> Interval:
    """Percentile bootstrap interval of the mean of ``values`` (at least one value).

    Raises:
        ValueError: no values.
    """
    if not values:
        raise ValueError("bootstrap_interval: no values")
    arr = np.asarray(values, dtype=float)
    if np.all(arr == arr[0]):
        return (float(arr[0]), float(arr[0]))
    return _percentiles(_resampled_means(arr, n_resamples, seed), level)


def mean_interval(values: Sequence[float], *, seed: int = 0) -> Interval | None:
    """A 95% interval of the mean of ``values``: Wilson when every value is 0 or 1, else a
    percentile bootstrap. ``None`` for no values (nothing was measured)."""
    if not values:
        return None
    if is_binary(values):
        return wilson_interval(round(sum(values)), len(values))
    return bootstrap_interval(values, seed=seed)


def ci_json(interval: Interval | None) -> list[float] | None:
    """An interval's JSON form (``[lo, hi]``, or null when nothing was measured)."""
    return [interval[0], interval[1]] if interval is not None else None


def ci_of(value: object) -> Interval | None:
    """Parse :func:`ci_json` (records written before intervals have none)."""
    if isinstance(value, list | tuple) and len(value) == 2:
        return (float(value[0]), float(value[1]))
    return None


def format_score(value: float | None, ci95: Sequence[float] | None = None, *, digits: int = 3) -> str:
    """``0.625 [0.521, 0.719]`` (``-`` for no value; the interval only when known)."""
    if value is None:
        return "-"
    text = f"{value:.{digits}f}"
    if ci95 is not None and len(ci95) == 2:
        text += f" [{ci95[0]:.{digits}f}, {ci95[1]:.{digits}f}]"
    return text


def sign_test(wins: int, losses: int) -> float:
    """One-sided exact sign test: the probability of at least ``wins`` wins among
    ``wins + losses`` fair coin flips (ties are left out before). On pass/fail pairs this is
    McNemar's exact test; 1.0 when there is no discordant pair."""
    n = wins + losses
    if n <= 0:
        return 1.0
    if wins <= 0:
        return 1.0
    # Exact in integers, then one division: no underflow for any n we meet.
    tail = sum(math.comb(n, k) for k in range(wins, n + 1))
    return min(1.0, tail / 2**n)


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
    means = _resampled_means(arr, n_resamples, seed)
    k = int(np.count_nonzero(means <= _EPS))
    return (k + 1) / (n_resamples + 1), _percentiles(means, 0.95)


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
        return {
            "name": self.name,
            "p_value": self.p_value,
            "effect": self.effect,
            "ci95": list(self.ci95),
            "n": self.n,
            "wins": self.wins,
            "losses": self.losses,
        }


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
    wins = sum(d > _EPS for d in diffs)
    losses = sum(d < -_EPS for d in diffs)
    if not diffs:
        return PairedTest(name="none", p_value=1.0, effect=0.0, ci95=(0.0, 0.0), n=0, wins=0, losses=0)
    p_boot, ci = paired_bootstrap(diffs, n_resamples=n_resamples, seed=seed)
    effect = sum(diffs) / len(diffs)
    if abs(shift) < _EPS and is_binary(candidate) and is_binary(current):
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


# ── power ───────────────────────────────────────────────────────────────────────────────────


def _log_factorials(n: int) -> np.ndarray:
    return np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n + 1)))])


def _binom_pmfs(n: int, p: float, logf: np.ndarray) -> np.ndarray:
    """``P(X = k)`` for ``k = 0..n``, ``X ~ Binomial(n, p)`` (``logf``: log k! up to n)."""
    k = np.arange(n + 1)
    if p <= 0.0 or p >= 1.0:
        return (k == (0 if p <= 0.0 else n)).astype(float)
    log = logf[n] - logf[k] - logf[n - k] + k * math.log(p) + (n - k) * math.log1p(-p)
    return np.exp(log)


def sign_test_power(base: float, effect: float, n: int, *, alpha: float = 0.05) -> float:
    """Power of the one-sided sign test at ``alpha`` over ``n`` items when the current skill
    passes each with probability ``base`` and the candidate with ``base + effect``,
    independently (a stochastic target run twice)."""
    p0, p1 = base, min(1.0, base + effect)
    a, b = p1 * (1 - p0), p0 * (1 - p1)  # P(candidate wins), P(current wins) on an item
    if a + b <= 0 or n <= 0:
        return 0.0
    logf = _log_factorials(n)
    p_discordant = _binom_pmfs(n, a + b, logf)
    power = 0.0
    for d in range(1, n + 1):
        if p_discordant[d] < 1e-15:
            continue
        # Wins needed among d discordant pairs: the smallest c with P(W >= c | fair) <= alpha.
        null_tail = np.cumsum(_binom_pmfs(d, 0.5, logf)[::-1])[::-1]
        significant = np.nonzero(null_tail <= alpha * (1 + 1e-12))[0]
        if len(significant) == 0:
            continue
        c = int(significant[0])
        power += p_discordant[d] * float(_binom_pmfs(d, a / (a + b), logf)[c:].sum())
    return power


def items_for_power(
    effect: float, *, base: float = 0.5, alpha: float = 0.05, power: float = 0.8, max_n: int = 2000
) -> int | None:
    """Fewest items for which :func:`sign_test_power` reaches ``power`` (``None`` up to
    ``max_n``). The exact test's power is not monotone in ``n`` (it is discrete); this is
    the first ``n`` that reaches it."""
    for n in range(1, max_n + 1):
        if sign_test_power(base, effect, n, alpha=alpha) >= power:
            return n
    return None


def sign_test_min_p(n: int) -> float:
    """The smallest p-value the one-sided exact sign test can give over ``n`` items: every item
    a win (``0.5 ** n``; 1.0 for no items)."""
    return 0.5 ** max(0, n)


def detectable_effect(n: int, *, base: float = 0.5, alpha: float = 0.05, power: float = 0.8) -> float | None:
    """The smallest improvement (in points of pass rate, 0.01 steps) that the one-sided sign
    test at ``alpha`` over ``n`` items detects with probability ``power``
    (:func:`sign_test_power`; the current skill passing each item with probability ``base``);
    ``None`` when no improvement up to a pass rate of 1 reaches it."""
    steps = round((1.0 - base) * 100)
    if steps <= 0 or sign_test_power(base, steps / 100, n, alpha=alpha) < power:
        return None
    lo, hi = 0, steps  # power(lo) < power <= power(hi); power grows with the effect
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if sign_test_power(base, mid / 100, n, alpha=alpha) >= power:
            hi = mid
        else:
            lo = mid
    return hi / 100
