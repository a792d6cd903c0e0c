"""95% intervals of a mean score over items, and how a score with its interval is written.

Every score skillopt shows is a mean over items; with a stochastic target it is noisy, and
its interval says how much.

* :func:`mean_interval`: Wilson's score interval when every value is 0 or 1 (hard scores), a
  percentile bootstrap otherwise (soft, mixed, or hard scores averaged over repeats).
* :func:`ci_json`, :func:`ci_of`: an interval in a record and back; :func:`format_score`: a
  score with its interval as the console and the WebUI print it.

Every function is deterministic: a bootstrap draws from a seeded generator (``seed``), so the
same scores always give the same interval. Wilson's interval is the one
``scipy.stats.binomtest`` gives (:func:`skillopt.gate.distributions.wilson`); the bootstrap is ours, not ``scipy.stats.bootstrap``, because it
sorts the values first: a measurement read back from disk lists its items in another order
than when it was taken, and must give the same interval (and the same gate decision).

Usage::

    mean_interval([1, 0, 1, 1])     # Wilson: (0.30..., 0.95...)
    format_score(0.625, (0.521, 0.719))  # '0.625 [0.521, 0.719]'
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from skillopt.gate.distributions import wilson

__all__ = [
    "EPS",
    "INTERVAL_RESAMPLES",
    "Interval",
    "bootstrap_interval",
    "ci_json",
    "ci_of",
    "format_score",
    "is_binary",
    "mean_interval",
    "percentile_interval",
    "resampled_means",
    "wilson_interval",
]

Interval = tuple[float, float]

#: Resamples of an interval's bootstrap (the interval's bounds move by < 0.01 between seeds).
INTERVAL_RESAMPLES = 2000
#: Two scores closer than this are equal (a pass is a hard score of 1 within it).
EPS = 1e-9
_CHUNK = 2000  # resamples drawn at once: bounded memory on large item sets


def is_binary(values: Sequence[float]) -> bool:
    """Every value is 0 or 1 (within 1e-9): pass/fail scores."""
    return all(abs(v) < EPS or abs(v - 1.0) < EPS for v in values)


def wilson_interval(successes: int, n: int) -> Interval:
    """Wilson's 95% score interval of a proportion (``successes`` of ``n``); ``(0, 1)`` when
    ``n`` is 0. Unlike the normal approximation it stays inside [0, 1] and is not empty at
    0 or n successes.

    Raises:
        ValueError: ``successes`` outside ``[0, n]``.
    """
    if n <= 0:
        return (0.0, 1.0)
    if not 0 <= successes <= n:
        raise ValueError(f"wilson_interval: {successes} successes of {n}")
    return wilson(int(successes), n)


def resampled_means(values: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
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


def percentile_interval(means: np.ndarray, level: float) -> Interval:
    """The central ``level`` share of ``means`` (a percentile bootstrap's interval)."""
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
    return percentile_interval(resampled_means(arr, n_resamples, seed), level)


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
