"""The sign test's power (skillopt.gate.power) against simulation and its own definitions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from skillopt.gate import (
    detectable_effect,
    items_for_power,
    sign_test,
    sign_test_min_p,
    sign_test_power,
)


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
