"""The gate's decision (skillopt.gate.decision, .modes): its modes and actions, the strict and
paired rules, the no-regression option, the final check."""

from __future__ import annotations

import dataclasses
import json

import pytest
import yaml

from skillopt.config.schema import EvaluationConfig
from skillopt.errors import ConfigError
from skillopt.gate import (
    GateAction,
    GateDecision,
    GateMode,
    PairedTest,
    decide,
    decide_final,
    paired_test,
    regressions,
)

# ── modes and actions ─────────────────────────────────────────────────────────────────────


def test_the_config_parses_the_mode_strings_into_the_enum_and_writes_them_back() -> None:
    assert [m.value for m in GateMode] == ["strict", "paired", "repeat", "sequential"]
    e = EvaluationConfig(gate_mode=" Sequential ")  # type: ignore[arg-type]
    assert e.gate_mode is GateMode.SEQUENTIAL and EvaluationConfig().gate_mode is GateMode.STRICT
    # Written as the plain string users write (JSON and YAML alike).
    plain = e.to_dict()["gate_mode"]
    assert type(plain) is str and plain == "sequential"
    assert yaml.safe_dump({"gate_mode": plain}) == "gate_mode: sequential\n"
    with pytest.raises(ConfigError) as info:
        EvaluationConfig(gate_mode="sequentail")  # type: ignore[arg-type]
    assert str(info.value) == (
        "evaluation.gate_mode: unknown value 'sequentail'; allowed: strict, paired, repeat, sequential"
    )


def test_what_each_mode_measures_and_what_each_action_means() -> None:
    assert [m.tests for m in GateMode] == [False, True, True, True]
    assert [m.rollouts_per_item(3) for m in GateMode] == [1, 1, 3, 1]
    assert [a.accepted for a in GateAction] == [True, True, False, True]
    # A record holds the plain string; one read back compares equal to the member.
    assert json.dumps({"action": GateAction.FORCE_ACCEPT}) == '{"action": "force_accept"}'
    assert json.loads('"accept_new_best"') == GateAction.ACCEPT_NEW_BEST


# ── decide ────────────────────────────────────────────────────────────────────────────────


def test_strictly_greater_accepts_new_best() -> None:
    d = decide(0.7, 0.6, 0.6, global_step=5, best_step=2)
    assert d == GateDecision("accept_new_best", 0.7, 0.7, 5, "new_best")
    assert d.accepted


def test_tie_with_current_rejects_and_keeps_state() -> None:
    d = decide(0.6, 0.6, 0.8, global_step=5, best_step=2)
    assert (d.action, d.current_score, d.best_score, d.best_step, d.reason) == (
        "reject",
        0.6,
        0.8,
        2,
        "not_above_current",
    )
    assert not d.accepted
    assert decide(0.5, 0.6, 0.6, global_step=5, best_step=2).action == "reject"


def test_equal_to_best_but_above_current_accepts_without_new_best() -> None:
    d = decide(0.8, 0.6, 0.8, global_step=5, best_step=2)
    assert (d.action, d.current_score, d.best_score, d.best_step, d.reason) == (
        "accept",
        0.8,
        0.8,
        2,
        "above_current",
    )


def test_above_current_below_best_accepts() -> None:
    assert decide(0.7, 0.6, 0.9, global_step=5, best_step=2).action == "accept"


def test_nan_never_accepts() -> None:
    assert decide(float("nan"), 0.1, 0.1, global_step=1, best_step=0).action == "reject"


def test_decision_is_frozen() -> None:
    d = decide(0.7, 0.6, 0.6, global_step=5, best_step=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.action = "reject"  # type: ignore[misc]


# ── no-regression option ──────────────────────────────────────────────────────────────────


def test_regressions_counts_only_pass_to_fail() -> None:
    prev = {"a": 1.0, "b": 1.0, "c": 0.0, "d": 1.0, "e": 1.0, "f": 0.5, "g": 1.0}
    cand = {"a": 0.0, "b": 1.0, "c": 1.0, "d": 0.5, "f": 0.0, "e": None}
    assert regressions(prev, cand) == ["a", "d"]  # e masked, f never passed, g unknown
    assert regressions({}, cand) == []


def test_max_regressions_turns_accept_into_reject() -> None:
    regressed = regressions({"a": 1, "b": 1}, {"a": 0, "b": 0})
    d = decide(0.9, 0.6, 0.6, global_step=3, best_step=1, regressed=regressed, max_regressions=1)
    assert (d.action, d.reason, d.regressed, d.current_score, d.best_step) == (
        "reject",
        "regressed_items",
        ("a", "b"),
        0.6,
        1,
    )
    ok = decide(0.9, 0.6, 0.6, global_step=3, best_step=1, regressed=regressed, max_regressions=2)
    assert ok.action == "accept_new_best" and ok.regressed == ("a", "b")


def test_no_regression_check_is_off_by_default() -> None:
    d = decide(0.9, 0.6, 0.6, global_step=3, best_step=1, regressed=["a", "b", "c"])
    assert d.action == "accept_new_best" and d.regressed == ()


def test_no_regression_check_never_rescues_a_reject() -> None:
    d = decide(0.5, 0.6, 0.6, global_step=3, best_step=1, regressed=["a"], max_regressions=0)
    assert (d.action, d.reason) == ("reject", "not_above_current")


def test_negative_max_regressions_raises() -> None:
    with pytest.raises(ConfigError):
        decide(0.9, 0.6, 0.6, global_step=3, best_step=1, max_regressions=-1)


# ── paired decisions (gate_mode paired / repeat) ─────────────────────────────────────────


def _test(p: float, effect: float) -> PairedTest:
    return PairedTest(
        name="sign", p_value=p, effect=effect, ci95=(effect - 0.1, effect + 0.1), n=20, wins=5, losses=1
    )


def test_a_significant_test_accepts_and_the_mean_decides_new_best() -> None:
    d = decide(0.7, 0.6, 0.65, global_step=4, best_step=2, test=_test(0.01, 0.1))
    assert (d.action, d.reason, d.best_step) == ("accept_new_best", "significant", 4)
    d = decide(0.62, 0.6, 0.65, global_step=4, best_step=2, test=_test(0.01, 0.02))
    assert (d.action, d.reason, d.best_score) == ("accept", "significant", 0.65)


def test_a_higher_mean_without_significance_rejects() -> None:
    # Strictly above the current score: strict accepts, paired does not.
    assert decide(0.7, 0.6, 0.6, global_step=2, best_step=1).accepted
    d = decide(0.7, 0.6, 0.6, global_step=2, best_step=1, test=_test(0.2, 0.1))
    assert (d.action, d.reason, d.current_score) == ("reject", "not_significant", 0.6)
    # p exactly alpha is significant (p <= alpha).
    assert decide(0.7, 0.6, 0.6, global_step=2, best_step=1, test=_test(0.05, 0.1), alpha=0.05).accepted


def test_the_minimum_effect_rejects_a_significant_but_small_improvement() -> None:
    d = decide(0.63, 0.6, 0.6, global_step=2, best_step=1, test=_test(0.001, 0.03), min_effect=0.05)
    assert (d.action, d.reason) == ("reject", "below_min_effect")
    assert decide(
        0.66, 0.6, 0.6, global_step=2, best_step=1, test=_test(0.001, 0.06), min_effect=0.05
    ).accepted


def test_the_no_regression_check_composes_with_the_paired_test() -> None:
    d = decide(
        0.8,
        0.6,
        0.6,
        global_step=2,
        best_step=1,
        test=_test(0.001, 0.2),
        regressed=["a", "b"],
        max_regressions=1,
    )
    assert (d.action, d.reason, d.regressed) == ("reject", "regressed_items", ("a", "b"))
    d = decide(
        0.8, 0.6, 0.6, global_step=2, best_step=1, test=_test(0.3, 0.2), regressed=[], max_regressions=0
    )
    assert d.reason == "not_significant"  # the check never rescues a reject


def test_a_candidate_no_better_is_never_accepted_whatever_the_p_value() -> None:
    # A negative effect cannot be significant evidence of improvement.
    assert not decide(0.5, 0.6, 0.6, global_step=2, best_step=1, test=_test(0.0, -0.1)).accepted


def test_paired_gate_on_real_item_scores() -> None:
    # 12 items better, 2 worse, 6 ties: sign test p = P(X >= 12 | 14) ~ 0.0065.
    cand = [1] * 12 + [0] * 2 + [1] * 3 + [0] * 3
    curr = [0] * 12 + [1] * 2 + [1] * 3 + [0] * 3
    t = paired_test(cand, curr)
    assert t.p_value == pytest.approx(106 / 16384)
    assert decide(sum(cand) / 20, sum(curr) / 20, 0.5, global_step=2, best_step=1, test=t).accepted


# ── the final check ───────────────────────────────────────────────────────────────────────


def test_without_a_test_the_final_skill_replaces_the_best_only_strictly_above_it() -> None:
    d = decide_final(0.8, 0.7, global_step=9, best_step=4)
    assert (d.action, d.reason, d.best_score, d.best_step) == ("accept_new_best", "new_best", 0.8, 9)
    d = decide_final(0.7, 0.7, global_step=9, best_step=4)  # earlier skills win ties
    assert (d.action, d.reason, d.best_score, d.best_step) == ("reject", "not_above_best", 0.7, 4)


def test_with_a_test_the_final_skill_needs_it_and_a_higher_score() -> None:
    d = decide_final(0.8, 0.7, global_step=9, best_step=4, test=_test(0.01, 0.1))
    assert (d.action, d.reason) == ("accept_new_best", "significant")
    d = decide_final(0.8, 0.7, global_step=9, best_step=4, test=_test(0.3, 0.1))
    assert (d.action, d.reason) == ("reject", "not_significant")
    # The test accepts, but the score is not above the best one: the best skill stays.
    d = decide_final(0.7, 0.7, global_step=9, best_step=4, test=_test(0.01, 0.1))
    assert (d.action, d.reason, d.best_step) == ("reject", "not_above_best", 4)
    d = decide_final(
        0.8, 0.7, global_step=9, best_step=4, test=_test(0.01, 0.1), regressed=["a"], max_regressions=0
    )
    assert (d.action, d.reason, d.regressed) == ("reject", "regressed_items", ("a",))
