"""Intervals and paired tests (skillopt.stats) against hand-computed cases, with scipy as the
oracle where it has the same statistic."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sp

from skillopt.stats import (
    bootstrap_interval,
    detectable_effect,
    items_for_power,
    mean_interval,
    paired_bootstrap,
    paired_test,
    sign_test,
    sign_test_min_p,
    sign_test_power,
    wilson_interval,
)


def test_wilson_by_hand():
    # 3 of 10, z = 1.96: centre (0.3 + 1.9208/10) / 1.38416 = 0.35551, half 0.24773.
    lo, hi = wilson_interval(3, 10)
    assert lo == pytest.approx(0.10779, abs=1e-5) and hi == pytest.approx(0.60322, abs=1e-5)
    # All passes: the interval reaches 1 and is not empty.
    lo, hi = wilson_interval(20, 20)
    assert hi == 1.0 and lo == pytest.approx(0.83887, abs=1e-5)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson_interval(11, 10)


@given(n=st.integers(1, 400), data=st.data())
@settings(max_examples=60, deadline=None)
def test_wilson_matches_scipy(n, data):
    k = data.draw(st.integers(0, n))
    ci = sp.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    lo, hi = wilson_interval(k, n)
    assert lo == pytest.approx(ci.low, abs=1e-9) and hi == pytest.approx(ci.high, abs=1e-9)


def test_sign_test_by_hand():
    # 7 wins, 2 losses: P(X >= 7 | 9, 1/2) = (36 + 9 + 1) / 512.
    assert sign_test(7, 2) == pytest.approx(46 / 512)
    assert sign_test(0, 5) == 1.0 and sign_test(0, 0) == 1.0
    assert sign_test(5, 0) == pytest.approx(1 / 32)


@given(wins=st.integers(0, 300), losses=st.integers(0, 300))
@settings(max_examples=80, deadline=None)
def test_sign_test_matches_scipy(wins, losses):
    expected = (
        1.0 if wins + losses == 0 else sp.binomtest(wins, wins + losses, 0.5, alternative="greater").pvalue
    )
    assert sign_test(wins, losses) == pytest.approx(expected, rel=1e-9, abs=1e-300)


def test_paired_test_on_pass_fail_is_the_exact_sign_test():
    cand = [1, 1, 1, 0, 1, 1, 0, 1, 1, 1]
    curr = [0, 0, 1, 0, 1, 0, 1, 0, 0, 1]
    t = paired_test(cand, curr)
    # Discordant pairs: 5 the candidate's, 1 the current skill's.
    assert (t.name, t.wins, t.losses, t.n) == ("sign", 5, 1, 10)
    assert t.p_value == pytest.approx(sp.binomtest(5, 6, 0.5, alternative="greater").pvalue)
    assert t.effect == pytest.approx(0.4)
    assert t.ci95[0] <= t.effect <= t.ci95[1]


def test_paired_test_on_soft_scores_is_a_bootstrap():
    cand = [0.9, 0.8, 0.7, 0.95, 0.6, 0.85]
    curr = [0.5, 0.8, 0.6, 0.9, 0.65, 0.7]
    t = paired_test(cand, curr)
    assert t.name == "bootstrap" and t.effect == pytest.approx(np.mean(np.subtract(cand, curr)))
    assert 0 < t.p_value < 0.1 and t.ci95[0] < t.effect < t.ci95[1]
    # Deterministic: the same scores give the same decision.
    assert paired_test(cand, curr) == t


def test_paired_bootstrap_by_hand():
    # Every difference positive: no resample mean is <= 0, so p = 1 / (B + 1).
    p, ci = paired_bootstrap([0.1, 0.2, 0.3], n_resamples=999)
    assert p == pytest.approx(1 / 1000) and 0.1 <= ci[0] < ci[1] <= 0.3
    # All zero: no evidence at all.
    p, ci = paired_bootstrap([0.0, 0.0], n_resamples=999)
    assert p == 1.0 and ci == (0.0, 0.0)
    # All negative: p = 1.
    assert paired_bootstrap([-0.5, -0.1])[0] == 1.0


def test_bootstrap_interval_agrees_with_scipy():
    rng = np.random.default_rng(7)
    values = list(rng.uniform(0, 1, size=60))
    lo, hi = bootstrap_interval(values, n_resamples=20000)
    ref = sp.bootstrap(
        (values,), np.mean, n_resamples=20000, method="percentile", random_state=3
    ).confidence_interval
    # Two bootstraps of the same statistic agree to Monte Carlo error.
    assert lo == pytest.approx(ref.low, abs=0.01) and hi == pytest.approx(ref.high, abs=0.01)


def test_mean_interval_picks_wilson_for_pass_fail_and_bootstrap_otherwise():
    assert mean_interval([]) is None
    assert mean_interval([1, 0, 1, 1]) == wilson_interval(3, 4)
    lo, hi = mean_interval([0.5, 0.75, 1.0, 0.25])
    assert 0.25 <= lo < 0.625 < hi <= 1.0
    assert mean_interval([0.5, 0.5]) == (0.5, 0.5)


def test_power_against_simulation():
    # The exact power, checked by simulating the sign test on independent pass/fail pairs.
    n, base, effect = 60, 0.5, 0.2
    exact = sign_test_power(base, effect, n)
    rng = np.random.default_rng(0)
    trials = 4000
    hits = 0
    for _ in range(trials):
        cand = rng.random(n) < base + effect
        curr = rng.random(n) < base
        hits += sign_test(int(np.sum(cand & ~curr)), int(np.sum(~cand & curr))) <= 0.05
    assert exact == pytest.approx(hits / trials, abs=3 * math.sqrt(exact * (1 - exact) / trials) + 0.005)


def test_items_for_power_is_the_first_n_that_reaches_it():
    n = items_for_power(0.3)
    assert n is not None and sign_test_power(0.5, 0.3, n) >= 0.8 > sign_test_power(0.5, 0.3, n - 1)
    assert items_for_power(0.0, max_n=50) is None


def test_the_sign_tests_floor_is_every_item_won():
    for n in (1, 4, 5, 12):
        assert sign_test_min_p(n) == pytest.approx(sign_test(n, 0))
    assert sign_test_min_p(4) > 0.05 > sign_test_min_p(5)


def test_detectable_effect_is_the_smallest_effect_with_the_power():
    for n in (25, 100, 326):
        e = detectable_effect(n)
        assert e is not None
        assert sign_test_power(0.5, e, n) >= 0.8 > sign_test_power(0.5, round(e - 0.01, 2), n)
    assert detectable_effect(326) == 0.1  # the docs' power table: +10 points needs 326 items
    assert detectable_effect(5) is None  # 5 wins out of 5 is p = 0.031: rarely all of them
