"""Paired tests (skillopt.gate.paired) against hand-computed cases, with scipy as the oracle
where it has the same statistic."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sp

from skillopt.gate import (
    paired_bootstrap,
    paired_test,
    sign_test,
)


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
