"""Intervals (skillopt.gate.intervals) against hand-computed cases (Wilson's interval is scipy's own:
the cases check it is called as meant), and the bootstrap against scipy's."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sp

from skillopt.gate import (
    bootstrap_interval,
    mean_interval,
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


def test_scipy_is_imported_when_a_statistic_needs_it_not_with_the_gate():
    # scipy takes seconds to import: the CLI's commands that load the config (which reads
    # gate.modes) or format scores must not pay it, and neither do the interval and the sign
    # test every run computes; the sequential gate's boundaries load scipy.special, never
    # scipy.stats (1.3 s more of CPU in every train and eval process).
    code = (
        "import sys, skillopt.config, skillopt.gate; loaded = 'scipy' in sys.modules; "
        "skillopt.gate.mean_interval([1, 0]); skillopt.gate.sign_test(5, 1); x = 'scipy' in sys.modules; "
        "skillopt.gate.sequential_bounds(3, alpha=0.05); "
        "print(loaded, x, 'scipy.special' in sys.modules, 'scipy.stats' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False", "True", "False"]
