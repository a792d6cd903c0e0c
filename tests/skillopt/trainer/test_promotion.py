"""Promotion: the one rule that makes a skill current and best, and the gate's variants that
use it (the gate on, off, the forced slow update, the final skill's check)."""

from __future__ import annotations

import json

from skillopt.trainer.rundir import layout
from skillopt.trainer.segments import promote
from skillopt.trainer.state import TrainerState
from skillopt.types import SkillVersion


def v(text: str) -> SkillVersion:
    return SkillVersion(content=text)


def _state() -> TrainerState:
    return TrainerState(
        current_skill=v("cur"),
        current_score=0.5,
        best_skill=v("best"),
        best_score=0.6,
        best_step=2,
        best_origin="step_0002",
    )


def test_promote_makes_current_and_best_only_when_strictly_higher():
    st = _state()
    assert (
        promote(st, v("cand"), 0.6, step=3, origin="step_0003") is False
    )  # ties: the earlier skill stays best
    assert (st.current_skill, st.current_score, st.current_origin) == (v("cand"), 0.6, "step_0003")
    assert (st.best_skill, st.best_step) == (v("best"), 2)
    assert promote(st, v("cand2"), 0.7, step=4, origin="step_0004") is True
    assert (st.best_skill, st.best_score, st.best_step, st.best_origin) == (v("cand2"), 0.7, 4, "step_0004")


def test_promote_can_leave_the_current_skill_alone():
    st = _state()
    assert promote(st, v("final"), 0.9, step=5, origin="step_0004", make_current=False) is True
    assert st.current_skill == v("cur") and st.best_skill == v("final") and st.best_origin == "step_0004"
    assert promote(st, v("worse"), 0.1, step=6, origin="x", make_current=False) is False
    assert st.current_skill == v("cur") and st.best_skill == v("final")


def test_with_the_gate_off_every_candidate_is_forced_in_and_best_stays_the_highest(fit, tmp_path):
    out = tmp_path / "run"
    result, _ = fit(out, "evaluation.use_gate=false")
    history = json.loads((out / layout.HISTORY).read_text())
    assert [r["action"] for r in history] == ["force_accept"] * 4
    assert all(r["gate_reason"] == "gate disabled" for r in history)
    for r in history:
        assert (
            r["current_score"] == r["candidate_gate_score"] and r["current_origin"] == f"step_{r['step']:04d}"
        )
    best = max(r["candidate_gate_score"] for r in history)
    assert result.best_selection_score >= best
    assert result.best_step == min(r["step"] for r in history if r["candidate_gate_score"] == best)


def test_a_forced_slow_update_is_current_with_a_measured_score(fit, tmp_path):
    out = tmp_path / "run"
    fit(out, "optimizer.slow_update_gate_with_selection=false")
    slow = json.loads((out / "slow_update/epoch_02" / layout.Epoch.SLOW_RESULT).read_text())
    assert slow["action"] == "force_accept" and slow["candidate_gate_score"] is not None
    state = json.loads((out / layout.STATE).read_text())
    assert state["current_origin"] == "slow_update_epoch_02"
    assert state["current_score"] == slow["candidate_gate_score"]  # re-measured, not stale (§14.6)
    assert state["current_skill"] == (out / "slow_update/epoch_02" / layout.Epoch.CANDIDATE).read_text()


def test_the_final_skill_becomes_best_only_when_it_scores_higher(reference):
    summary = json.loads((reference / layout.SUMMARY).read_text())
    state = json.loads((reference / layout.STATE).read_text())
    if state["current_skill"] != state["best_skill"]:
        assert summary["final_selection_score"] <= summary["best_selection_score"]
    assert summary["best_selection_score"] >= summary["baseline_selection_score"]
    assert (reference / layout.BEST_SKILL).read_text() == state["best_skill"]


def test_promote_never_makes_an_ungated_skill_best():
    st = _state()
    assert (
        promote(st, v("forced"), 0.9, step=4, origin="slow_update_epoch_02", may_become_best=False) is False
    )
    assert (st.current_skill, st.current_score) == (v("forced"), 0.9)
    assert (st.best_skill, st.best_score, st.best_origin) == (v("best"), 0.6, "step_0002")


NOISY_PAIRED = ("run.simulate=noisy", "train.seed=7", "evaluation.gate_mode=paired")


def test_the_slow_update_goes_through_the_runs_gate_by_default(fit, tmp_path):
    out = tmp_path / "run"
    fit(out, *NOISY_PAIRED)
    slow = json.loads((out / "slow_update/epoch_02" / layout.Epoch.SLOW_RESULT).read_text())
    test = slow["gate_test"]
    assert test["mode"] == "paired" and slow["action"] != "force_accept"
    significant = test["p_value"] <= test["alpha"] and test["effect"] > 0
    assert ("accept" in slow["action"]) == significant, slow
    state = json.loads((out / layout.STATE).read_text())
    assert (state["current_origin"] == "slow_update_epoch_02") == ("accept" in slow["action"])


def test_a_forced_slow_update_under_a_paired_gate_is_not_made_best_by_its_mean(fit, tmp_path):
    # The hole found from outside: forced in with a mean above the best one's, the slow update
    # became the best skill with no test behind it. It stays current; the finish stage's paired
    # test of final against best decides, and records why.
    out = tmp_path / "run"
    result, _ = fit(out, *NOISY_PAIRED, "optimizer.slow_update_gate_with_selection=false")
    slow = json.loads((out / "slow_update/epoch_02" / layout.Epoch.SLOW_RESULT).read_text())
    state = json.loads((out / layout.STATE).read_text())
    summary = json.loads((out / layout.SUMMARY).read_text())
    assert slow["action"] == "force_accept" and state["current_origin"] == "slow_update_epoch_02"
    assert slow["candidate_gate_score"] > summary["best_selection_score"]  # the raw mean would have won
    final = summary["final_gate"]
    assert final["gate_test"]["mode"] == "paired" and final["gate_test"]["p_value"] > 0.05
    assert (final["action"], final["reason"]) == ("reject", "not_significant")
    assert state["best_origin"] != "slow_update_epoch_02" and result.best_origin == state["best_origin"]
    assert (out / layout.BEST_SKILL).read_text() == state["best_skill"] != state["current_skill"]


def test_the_strict_finish_decides_on_the_means_and_says_so(reference):
    summary = json.loads((reference / layout.SUMMARY).read_text())
    state = json.loads((reference / layout.STATE).read_text())
    final = summary["final_gate"]
    # The short run's final skill differs from the best one (at least by the slow-update block).
    assert final is not None
    assert final["gate_test"] is None  # strict: the means decide
    if final["action"] == "accept_new_best":
        assert final["reason"] == "new_best" and state["best_origin"] == state["current_origin"]
    else:
        assert final["reason"] == "not_above_best"
        assert summary["final_selection_score"] <= summary["best_selection_score"]
