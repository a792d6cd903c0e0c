"""The normal and binomial distributions the gate needs.

Every run writes Wilson intervals and records a sign test for every gate decision; those two
come from the standard library (``statistics.NormalDist`` for the normal quantile, exact
integer arithmetic for the fair-coin tail), so a default run never loads scipy. The rest
(the sequential gate's boundaries, the power of a sign test) are array computations over
``scipy.special``: the functions ``scipy.stats`` itself evaluates (``norm.sf`` is
``special.ndtr(-x)``, ``binom.sf`` is ``special.bdtrc``), called directly because importing
``scipy.stats`` costs about 1.3 s of CPU more than ``scipy.special`` (and ``scipy.special``
0.6 s more than nothing), paid by every ``skillopt train`` and ``eval`` process.
``scipy.stats`` stays the tests' oracle (``tests/skillopt/gate/test_gate_distributions.py``).

``scipy.special`` is imported inside the functions that need it, not at the module's top (see
the package docstring: the commands that only read the config should not load scipy at all).
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["binom_pmf", "binom_sf", "fair_coin_tail", "normal_isf", "normal_pdf", "normal_sf", "wilson"]


def normal_sf(x: ArrayLike, scale: float = 1.0) -> NDArray[np.float64]:
    """``P(N(0, scale²) > x)``."""
    from scipy import special

    return np.asarray(special.ndtr(-np.asarray(x, dtype=float) / scale), dtype=float)


def normal_isf(q: float) -> float:
    """The ``x`` with ``P(N(0, 1) > x) = q`` (the standard library's Wichura AS241, exact to
    double precision)."""
    return -NormalDist().inv_cdf(q)


def fair_coin_tail(wins: int, n: int) -> float:
    """``P(X >= wins)`` for ``X`` binomial(``n``, 1/2), exactly: the sum of binomial
    coefficients over ``2**n`` in integers, rounded once (1.0 from ``wins <= 0``, 0.0 past ``n``)."""
    if wins <= 0:
        return 1.0
    if wins > n:
        return 0.0
    term = total = math.comb(n, wins)
    for k in range(wins, n):  # C(n, k + 1) from C(n, k): one multiplication and division each
        term = term * (n - k) // (k + 1)
        total += term
    return total / (1 << n)


def normal_pdf(x: ArrayLike, scale: float = 1.0) -> NDArray[np.float64]:
    """The density of ``N(0, scale²)`` at ``x``."""
    z = np.asarray(x, dtype=float) / scale
    return np.exp(-0.5 * z * z) / (scale * math.sqrt(2.0 * math.pi))


def binom_sf(k: ArrayLike, n: ArrayLike, p: float) -> NDArray[np.float64]:
    """``P(X > k)`` for ``X`` binomial(``n``, ``p``): 1 below 0, 0 from ``n`` on."""
    from scipy import special

    k_arr, n_arr = np.broadcast_arrays(np.floor(np.asarray(k, dtype=float)), np.asarray(n, dtype=float))
    inside = (k_arr >= 0) & (k_arr < n_arr)
    out = np.where(k_arr < 0, 1.0, 0.0)
    safe_k, safe_n = np.where(inside, k_arr, 0).astype(np.int64), np.where(inside, n_arr, 1).astype(np.int64)
    return np.asarray(np.where(inside, special.bdtrc(safe_k, safe_n, p), out), dtype=float)


def binom_pmf(k: ArrayLike, n: ArrayLike, p: float) -> NDArray[np.float64]:
    """``P(X = k)`` for ``X`` binomial(``n``, ``p``), in log space (exact to ~1e-13 relative
    for the few thousand trials the gate ever sees); 0 outside ``[0, n]``."""
    from scipy import special

    k_arr, n_arr = np.broadcast_arrays(np.asarray(k, dtype=float), np.asarray(n, dtype=float))
    inside = (k_arr >= 0) & (k_arr <= n_arr)
    kk = np.where(inside, k_arr, 0.0)
    log_pmf = (
        special.gammaln(n_arr + 1)
        - special.gammaln(kk + 1)
        - special.gammaln(n_arr - kk + 1)
        + special.xlogy(kk, p)
        + special.xlog1py(n_arr - kk, -p)
    )
    return np.asarray(np.where(inside, np.exp(log_pmf), 0.0), dtype=float)


def wilson(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval for ``successes`` of ``n`` (``n > 0``), without continuity
    correction: ``scipy.stats.binomtest(...).proportion_ci(method="wilson")``."""
    z = normal_isf((1.0 - confidence) / 2.0)
    p = successes / n
    denom = 2.0 * (n + z * z)
    center = (2.0 * n * p + z * z) / denom
    half = z * math.sqrt(z * z + 4.0 * n * p * (1.0 - p)) / denom
    return (max(0.0, center - half), min(1.0, center + half))
