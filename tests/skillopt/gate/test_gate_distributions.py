"""The gate's distributions (skillopt.gate.distributions, from scipy.special) against
scipy.stats, the oracle, over the ranges the gate uses and their edges."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from skillopt.gate import distributions as dist


@pytest.mark.parametrize("n", [1, 2, 5, 17, 60, 400, 2000])
@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 0.93, 1.0])
def test_binomial_tail_and_mass_equal_scipy_stats(n, p):
    k = np.arange(-3, n + 4)
    assert np.allclose(dist.binom_sf(k, n, p), stats.binom.sf(k, n, p), rtol=1e-10, atol=1e-15)
    assert np.allclose(dist.binom_pmf(k, n, p), stats.binom.pmf(k, n, p), rtol=1e-9, atol=1e-15)


def test_binomial_broadcasts_over_trials_as_scipy_does():
    d = np.arange(1, 40)
    needed = d // 2 + 1
    assert np.allclose(dist.binom_sf(needed - 1, d, 0.7), stats.binom.sf(needed - 1, d, 0.7), rtol=1e-10)


def test_normal_functions_equal_scipy_stats():
    x = np.linspace(-12, 12, 241)
    assert np.allclose(dist.normal_sf(x), stats.norm.sf(x), rtol=1e-12, atol=0)
    assert np.allclose(dist.normal_sf(x, scale=2.5), stats.norm.sf(x, scale=2.5), rtol=1e-12, atol=0)
    assert np.allclose(dist.normal_pdf(x, scale=0.3), stats.norm.pdf(x, scale=0.3), rtol=1e-12, atol=1e-300)
    for q in (1e-9, 0.0125, 0.025, 0.05, 0.5, 0.9):
        assert dist.normal_isf(q) == pytest.approx(stats.norm.isf(q), rel=1e-12)


@pytest.mark.parametrize("n", [1, 2, 3, 10, 15, 50, 333])
def test_wilson_equals_scipys_binomtest_interval(n):
    for k in range(n + 1):
        ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
        lo, hi = dist.wilson(k, n)
        assert lo == pytest.approx(ci.low, abs=1e-12) and hi == pytest.approx(ci.high, abs=1e-12)


@pytest.mark.parametrize("n", [1, 2, 7, 30, 200, 1500])
def test_the_exact_fair_coin_tail_equals_scipy_stats(n):
    for wins in sorted({-1, 0, 1, n // 3, n // 2, n // 2 + 1, 2 * n // 3, n - 1, n, n + 1}):
        assert dist.fair_coin_tail(wins, n) == pytest.approx(
            stats.binom.sf(wins - 1, n, 0.5), rel=1e-12, abs=1e-300
        )
