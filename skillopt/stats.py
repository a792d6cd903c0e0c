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
* :func:`sequential_test` — the ``sequential`` gate's group-sequential paired test over rounds
  (:func:`sequential_bounds`: Lan-DeMets alpha spending, boundaries by numerical integration).

Every function is deterministic: bootstraps draw from a seeded generator (``seed``), so the
same scores always give the same interval, p-value and gate decision.

Usage::

    mean_interval([1, 0, 1, 1])                          # Wilson: (0.30..., 0.95...)
    t = paired_test([1, 1, 1, 0, 1], [0, 0, 1, 0, 1])    # sign test, 2 wins and no loss
    t.name, t.p_value, t.effect                          # ('sign', 0.25, 0.4)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

__all__ = [
    "FUTILITY_RULES",
    "SPENDING_FUNCTIONS",
    "Interval",
    "PairedTest",
    "SequentialTest",
    "alpha_spent",
    "bootstrap_interval",
    "ci_json",
    "ci_of",
    "detectable_effect",
    "format_score",
    "is_binary",
    "items_for_power",
    "look_information",
    "mean_interval",
    "paired_bootstrap",
    "paired_test",
    "sequential_bounds",
    "sequential_test",
    "sign_test",
    "sign_test_min_p",
    "sign_test_power",
    "sign_walk_bounds",
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


def _record(test: Any, skip: tuple[str, ...] = ()) -> dict[str, Any]:
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
        return _record(self)


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


# ── sequential (group-sequential) paired test ──────────────────────────────────────────────

#: Alpha-spending functions (Lan & DeMets): the share of ``alpha`` spent by information
#: fraction ``t`` (``t = look / max_looks``). ``pocock``: ``alpha * ln(1 + (e - 1) t)`` spends
#: early (a clear candidate stops at the first look); ``obrien_fleming``:
#: ``2 - 2 Phi(z_{alpha/2} / sqrt(t))`` spends almost nothing early and keeps the last look
#: near the fixed-sample level.
SPENDING_FUNCTIONS: tuple[str, ...] = ("pocock", "obrien_fleming")


def _phi(x: np.ndarray | float) -> np.ndarray:
    return np.exp(-0.5 * np.square(x)) / math.sqrt(2 * math.pi)


def _norm_sf(x: float) -> float:
    return 0.5 * math.erfc(x / math.sqrt(2))


def _norm_isf(p: float) -> float:
    """``z`` with ``P(Z >= z) = p`` (bisection on :func:`_norm_sf`: exact to 1e-10)."""
    lo, hi = -40.0, 40.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if _norm_sf(mid) > p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def alpha_spent(t: float, alpha: float, spending: str) -> float:
    """Alpha spent by information fraction ``t`` in ``[0, 1]`` (:data:`SPENDING_FUNCTIONS`).

    Raises:
        ValueError: unknown spending function.
    """
    t = min(1.0, max(0.0, t))
    if spending == "pocock":
        return alpha * math.log1p((math.e - 1) * t)
    if spending == "obrien_fleming":
        if t <= 0:
            return 0.0
        return min(alpha, 2 * _norm_sf(_norm_isf(alpha / 2) / math.sqrt(t)))
    raise ValueError(f"unknown spending function {spending!r}; expected one of {SPENDING_FUNCTIONS}")


_GRID = 0.02  # step of the numerical integration over the score statistic (in sd units)


#: How the futility stop (no observed improvement) enters the boundaries: ``binding`` (the
#: gate always stops there, so the acceptance bounds are computed with it and spend the whole
#: ``alpha`` on the paths that continue: lower bounds, more power) or ``non_binding`` (the
#: bounds ignore it: valid even if a look that shows no improvement went on).
FUTILITY_RULES: tuple[str, ...] = ("binding", "non_binding")


def sequential_bounds(
    max_looks: int,
    *,
    alpha: float = 0.05,
    spending: str = "pocock",
    futility: str = "non_binding",
    round_fraction: float = 1.0,
) -> tuple[float, ...]:
    """Upper z boundaries of a one-sided group-sequential test with ``max_looks`` equally
    spaced looks and Lan-DeMets spending: look ``k`` accepts when ``z_k >= bounds[k - 1]``,
    and the probability under the null of crossing at any look is ``alpha``.

    The joint law of the looks' z statistics (independent normal increments) is integrated
    numerically (Armitage, McPherson & Rowe's recursion, Jennison & Turnbull ch. 19): the
    density of the partial sum on the continuation region is carried from look to look, and
    each bound is solved so that the probability of first crossing there is the alpha spent
    between the looks. ``futility``: ``non_binding`` leaves the futility stop out (it can only
    lower the false-accept rate); ``binding`` cuts the continuation region at ``z <= 0`` at
    every look but the last (the gate's futility stop on soft scores), so the bounds are lower
    for the same ``alpha``. ``round_fraction``: each look after the first adds that share of
    the first look's pairs (:func:`look_information`; 1: equally spaced). Deterministic;
    memoised.

    Raises:
        ValueError: ``max_looks < 1``, ``alpha`` outside (0, 1), ``round_fraction`` outside
            (0, 1], unknown spending or futility.
    """
    if max_looks < 1 or not 0 < alpha < 1 or not 0 < round_fraction <= 1:
        raise ValueError(
            f"sequential_bounds: max_looks {max_looks}, alpha {alpha}, round_fraction {round_fraction}"
        )
    if futility not in FUTILITY_RULES:
        raise ValueError(f"unknown futility rule {futility!r}; expected one of {FUTILITY_RULES}")
    return _bounds(int(max_looks), float(alpha), spending, futility == "binding", float(round_fraction))


_BOUNDS_CACHE: dict[tuple[tuple[float, ...], float, str, bool], tuple[float, ...]] = {}


_ERFC = np.vectorize(math.erfc)


def look_information(max_looks: int, round_fraction: float = 1.0) -> tuple[float, ...]:
    """The looks' cumulative information, in units of the first round: round 1 measures every
    selection item, each later round ``round_fraction`` of that many (``1, 1 + f, 1 + 2f``...).
    The spending functions' information fraction at look ``k`` is ``info[k - 1] / info[-1]``."""
    return tuple(1.0 + (k - 1) * round_fraction for k in range(1, max_looks + 1))


def _exit_prob(bound: float, info: float, var: float, density: np.ndarray, grid: np.ndarray) -> float:
    """The probability of continuing through the previous look (``density``: the partial
    sum's density on its continuation region; ``None`` before look 1) and then crossing
    ``bound`` at a look with cumulative information ``info``, the sum having grown by a
    normal increment of variance ``var``: ``int f(u) P(u + N(0, var) >= bound sqrt(info)) du``."""
    if not density.any():
        return _norm_sf(bound)
    tail = 0.5 * _ERFC((bound * math.sqrt(info) - grid) / math.sqrt(2 * var))
    return float(np.sum(density * tail) * _GRID)


def _bounds(
    max_looks: int, alpha: float, spending: str, binding: bool, fraction: float = 1.0
) -> tuple[float, ...]:
    info = look_information(max_looks, fraction)
    key = (info, alpha, spending, binding)
    if key in _BOUNDS_CACHE:
        return _BOUNDS_CACHE[key]
    bounds: list[float] = []
    # The partial sum s (sd units of round 1); its sd at the last look is sqrt(info[-1]).
    half = round((8.0 * math.sqrt(info[-1]) + 4.0) / _GRID)
    grid = np.arange(-half, half + 1) * _GRID
    density = np.zeros_like(grid)  # density of s on the continuation region after look k - 1
    prev_spent, prev_info = 0.0, 0.0
    for k in range(1, max_looks + 1):
        var = info[k - 1] - prev_info
        step = alpha_spent(info[k - 1] / info[-1], alpha, spending) - prev_spent
        if step <= 1e-15:
            b = 40.0
        else:
            lo, hi = -10.0, 40.0
            for _ in range(45):  # to 1.5e-12
                mid = (lo + hi) / 2
                if _exit_prob(mid, info[k - 1], var, density, grid) > step:
                    lo = mid
                else:
                    hi = mid
            b = hi
        bounds.append(b)
        prev_spent += _exit_prob(b, info[k - 1], var, density, grid) if step > 1e-15 else 0.0
        cut = (grid < b * math.sqrt(info[k - 1])) & ((grid > 0) if binding else True)
        sd = math.sqrt(var)
        if k == 1:
            density = np.where(cut, _phi(grid / sd) / sd, 0.0)
        else:
            # f_k(s) = int f_{k-1}(u) phi((s - u) / sd) / sd du on the continuation region
            kernel = _phi(np.arange(-8.0 * sd, 8.0 * sd + _GRID / 2, _GRID) / sd) / sd
            density = np.where(cut, np.convolve(density, kernel, mode="same") * _GRID, 0.0)
        prev_info = info[k - 1]
    out = tuple(bounds)
    _BOUNDS_CACHE[key] = out
    return out


def sign_walk_bounds(
    steps: Sequence[int],
    *,
    max_looks: int,
    alpha: float = 0.05,
    spending: str = "pocock",
    futility: str = "binding",
    round_fraction: float = 1.0,
) -> tuple[int, ...]:
    """Exact acceptance thresholds of the group-sequential sign test on pass/fail pairs.

    Look ``k`` adds ``steps[k - 1]`` discordant pairs; under the null each is a win or a loss
    with probability 1/2 (the candidate and the current skill equally likely to pass each
    item), so ``S = wins - losses`` is a simple random walk, and its law conditional on the
    discordant counts is computed exactly on the integer lattice (Armitage, McPherson & Rowe's
    recursion, with binomial increments instead of normal ones). Look ``k`` accepts when
    ``S_k >= thresholds[k - 1]``: the smallest integer whose probability of a first crossing
    there is at most the alpha spent between the looks (Lan-DeMets, at the planned information
    fraction of look ``k``, :func:`look_information` with ``round_fraction``); what
    discreteness leaves unspent carries to the next look.
    ``futility``: ``binding``: the walk stops at ``S_k <= 0`` (no observed improvement) at
    every look but the last, and the thresholds spend ``alpha`` on the paths that continue.
    Conditional on any discordant counts the probability of accepting is at most ``alpha``,
    so it is unconditionally too. A threshold above every reachable ``S`` (nothing to spend)
    is ``sum(steps) + 1``.

    Raises:
        ValueError: more looks than ``max_looks``, negative steps, unknown futility.
    """
    if len(steps) > max_looks or any(m < 0 for m in steps):
        raise ValueError(f"sign_walk_bounds: steps {list(steps)} for {max_looks} looks")
    if futility not in FUTILITY_RULES:
        raise ValueError(f"unknown futility rule {futility!r}; expected one of {FUTILITY_RULES}")
    return _walk_bounds(
        tuple(int(m) for m in steps), int(max_looks), float(alpha), spending, futility, float(round_fraction)
    )


@functools.lru_cache(maxsize=4096)
def _walk_bounds(
    steps: tuple[int, ...], max_looks: int, alpha: float, spending: str, futility: str, round_fraction: float
) -> tuple[int, ...]:
    info = look_information(max_looks, round_fraction)
    total = int(sum(steps))
    # dist[i]: P(S = i - total, still running); index = S + total.
    dist = np.zeros(2 * total + 1)
    dist[total] = 1.0
    spent, out = 0.0, []
    for k, m in enumerate(steps, start=1):
        if m:
            inc = np.zeros(2 * m + 1)
            inc[::2] = [math.comb(m, j) / 2**m for j in range(m + 1)]
            dist = np.convolve(dist, inc)[m : m + 2 * total + 1]
        allowed = alpha_spent(info[k - 1] / info[-1], alpha, spending) - spent
        tail = np.cumsum(dist[::-1])[::-1]  # tail[i] = P(S >= i - total, running)
        ok = np.nonzero((tail <= allowed + 1e-12) & (np.arange(len(dist)) > total))[0]
        i = int(ok[0]) if len(ok) else len(dist)
        spent += float(tail[i]) if i < len(dist) else 0.0
        out.append(i - total)
        dist[i:] = 0.0
        if futility == "binding" and k < max_looks:
            dist[: total + 1] = 0.0
    return tuple(out)


@dataclass(frozen=True, kw_only=True)
class SequentialTest(PairedTest):
    """A group-sequential one-sided paired comparison after some looks (one per round).

    The paired part (``effect``, ``ci95``, ``n``, ``wins``, ``losses``) is over every pair of
    the rounds looked at. ``p_value`` is the last look's nominal one-sided p-value of ``z``;
    the look accepts when it is at most ``nominal_alpha`` (``1 - Phi(bound)``), which the
    spending function makes smaller than ``alpha`` so the looks together keep ``alpha``.

    Attributes:
        z: The last look's standardised statistic.
        bound: The last look's acceptance boundary on ``z``.
        nominal_alpha: The last look's nominal level (``1 - Phi(bound)``).
        looks: Looks taken (the stopping one included).
        max_looks: The round budget.
        boundary: ``accept`` (``z >= bound``), ``futility`` (no observed improvement above
            ``min_effect``), ``budget`` (look ``max_looks`` crossed neither), or ``""``
            (another round is due); the gate sets ``reproduced`` when a second round repeated
            the first exactly (a deterministic target: the means decide).
        spending: The alpha-spending function.
        alpha: The overall false-accept level.
        futility: How the futility stop entered the bounds (:data:`FUTILITY_RULES`); with
            ``binding`` on pass/fail pairs the bounds are the exact sign-walk thresholds
            (:func:`sign_walk_bounds`), shown on ``z``'s scale.
    """

    z: float
    bound: float
    nominal_alpha: float
    looks: int
    max_looks: int
    boundary: str
    spending: str
    alpha: float
    futility: str = "non_binding"

    @property
    def decided(self) -> bool:
        return bool(self.boundary)

    def to_json(self) -> dict[str, Any]:
        return _record(self, skip=("alpha",))  # the gate records alpha beside it


def _z(diffs: Sequence[float], min_effect: float, binary: bool) -> float:
    """Self-normalised paired statistic ``(sum (d - m) - c) / sqrt(sum (d - m)^2)``: on
    pass/fail pairs the sign test's normal approximation with its continuity correction
    (``c = 1``); under the null it is conservative when items' effects differ."""
    x = np.asarray(diffs, dtype=float) - min_effect
    v = float(np.sum(x * x))
    if v <= _EPS:
        return 0.0
    s = float(np.sum(x)) - (1.0 if binary else 0.0)
    return s / math.sqrt(v)


def sequential_test(
    rounds: Sequence[Sequence[float]],
    *,
    alpha: float = 0.05,
    min_effect: float = 0.0,
    max_looks: int = 4,
    spending: str = "pocock",
    futility: str = "non_binding",
    round_fraction: float = 1.0,
    binary: bool | None = None,
    seed: int = 0,
    with_interval: bool = True,
) -> SequentialTest:
    """The group-sequential paired test of a candidate against the current skill.

    ``rounds[r]`` holds round ``r + 1``'s paired differences (candidate minus current, one per
    item both sides scored in that round). After each round (a look) it computes ``z`` over
    every pair so far (:func:`_z`) and stops at the first boundary: ``accept`` when ``z`` is at
    or above the look's bound (:func:`sequential_bounds`), ``futility`` when the mean
    difference so far is at most ``min_effect`` (no observed improvement: the strict gate's
    reject), ``budget`` at look ``max_looks``. Later rounds are ignored, so the same data
    always stop at the same look with the same decision.

    ``futility``: ``non_binding`` (bounds from :func:`sequential_bounds` without the futility
    stop, ``z`` its normal approximation); ``binding``: the bounds count on the futility stop
    and so are lower for the same ``alpha``: on pass/fail pairs the exact thresholds of the
    sign walk ``wins - losses`` given each look's discordant pairs (:func:`sign_walk_bounds`,
    no normal approximation), on soft scores or with ``min_effect`` the normal recursion cut
    at ``z <= 0`` (which is where the futility stop is when there is no continuity correction).
    ``round_fraction``: the rounds after the first measure that share of the first round's
    items (the spending functions' information fractions follow, :func:`look_information`).

    Args:
        binary: The differences come from pass/fail pairs (the sign test's continuity
            correction applies); ``None``: decided from the values.
        with_interval: Compute ``ci95`` (a paired bootstrap); off, it is ``(effect, effect)``
            (simulations that only need the decision).

    Raises:
        ValueError: no rounds, or more rounds than ``max_looks`` looked at without a stop.
    """
    if not rounds:
        raise ValueError("sequential_test: no rounds")
    seen: list[float] = []
    if binary is None:
        binary = all(is_binary([abs(d) for d in r]) for r in rounds) and abs(min_effect) < _EPS
    exact = binary and futility == "binding"
    if not exact:
        bounds = sequential_bounds(
            max_looks, alpha=alpha, spending=spending, futility=futility, round_fraction=round_fraction
        )
    z, bound, boundary, looks, discordant = 0.0, 0.0, "", 0, []
    for looks, diffs in enumerate(rounds[:max_looks], start=1):
        seen.extend(float(d) for d in diffs)
        z = _z(seen, min_effect, binary)
        mean = sum(seen) / len(seen) if seen else 0.0
        if exact:
            discordant.append(sum(abs(d) > _EPS for d in diffs))
            c = sign_walk_bounds(
                discordant, max_looks=max_looks, alpha=alpha, spending=spending, round_fraction=round_fraction
            )[-1]
            # S >= c  <=>  z = (S - 1) / sqrt(n_discordant) >= (c - 1) / sqrt(n_discordant)
            bound = (c - 1) / math.sqrt(sum(discordant)) if sum(discordant) else 40.0
        else:
            bound = bounds[looks - 1]
        if z >= bound - _EPS if exact else z >= bound:
            boundary = "accept"
        elif mean <= min_effect + _EPS:
            boundary = "futility"
        elif looks >= max_looks:
            boundary = "budget"
        if boundary:
            break
    wins = sum(d > _EPS for d in seen)
    losses = sum(d < -_EPS for d in seen)
    effect = sum(seen) / len(seen) if seen else 0.0
    ci = (
        paired_bootstrap(seen, seed=seed, n_resamples=INTERVAL_RESAMPLES)[1]
        if seen and with_interval
        else (effect, effect)
    )
    return SequentialTest(
        name="group_sequential",
        p_value=_norm_sf(z),
        effect=effect,
        ci95=ci,
        n=len(seen),
        wins=wins,
        losses=losses,
        z=z,
        bound=bound,
        nominal_alpha=_norm_sf(bound),
        looks=looks,
        max_looks=max_looks,
        boundary=boundary,
        spending=spending,
        alpha=alpha,
        futility=futility,
    )
