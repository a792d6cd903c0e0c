"""Stopping: a stop asked for at any stage boundary (a callback, the WebUI's stop request, a
run budget) ends the run cleanly with a ``stopped`` summary; ``--resume`` then reaches exactly
the decisions of a run that never stopped. Inside a step, the step is left uncommitted and
reruns from its committed segments and caches."""

from __future__ import annotations

import json

import pytest

from skillopt.trainer.callbacks import Callback, FitStartEvent, StageEvent
from skillopt.trainer.rundir import layout
from tests.skillopt.trainer.conftest import assert_no_duplicate_rows, decisions, files, target_spend


class StopAfter(Callback):
    """Asks the run to stop once ``stage`` of ``step`` has ended."""

    def __init__(self, step: int, stage: str) -> None:
        self.step, self.stage = step, stage
        self.control = None

    def on_fit_start(self, event: FitStartEvent) -> None:
        self.control = event.control

    def on_stage_end(self, event: StageEvent) -> None:
        if (event.step, event.stage) == (self.step, self.stage):
            self.control.request_stop("stop requested (test)")


# (step, stage it stops after, the stage it stops before inside the step, or None: between)
STOPS = [
    (0, "baseline", None),
    (1, "rollout", "reflect"),
    (1, "reflect", "aggregate"),
    (3, "aggregate", "select"),
    (3, "select", "update"),
    (3, "update", "evaluate"),
    (3, "evaluate", None),
    (2, "slow_update", None),
    (4, "meta_skill", None),
]


@pytest.mark.parametrize(("step", "stage", "before"), STOPS)
def test_a_stop_at_any_stage_resumes_to_the_decisions_of_an_uninterrupted_run(
    reference, fit, tmp_path, step, stage, before
):
    out = tmp_path / "run"
    result, _ = fit(out, callbacks=[StopAfter(step, stage)])
    assert result.status == "stopped" and result.stop_reason.startswith("stop requested (test)")
    assert result.tests is None and not (out / layout.TEST_BEST).exists()
    state = json.loads((out / layout.STATE).read_text())
    if before is not None:
        assert f"stopped before the {before} stage of step {step}" in result.stop_reason
        assert state["last_completed_step"] == step - 1
        assert not (out / layout.step_dir(step) / layout.Step.RECORD).exists()
    assert state["stop_reason"] == result.stop_reason
    resumed, _ = fit(out)
    assert resumed.status == "complete" and resumed.stop_reason == ""
    assert decisions(out) == decisions(reference)
    assert files(out) == files(reference)
    assert target_spend(out) == target_spend(reference)
    assert_no_duplicate_rows(out)


def test_a_stop_inside_a_step_rolls_back_the_schedule_and_leaks_no_measurement(fit, tmp_path):
    out = tmp_path / "run"
    fit(out, callbacks=[StopAfter(1, "update")])
    state = json.loads((out / layout.STATE).read_text())
    assert state["last_completed_step"] == 0 and state["scheduler"].get("current_step", 0) == 0
    assert state["step_stages"] == ["rollout_reflect", "propose"]
    assert (out / layout.step_dir(1) / layout.Step.CANDIDATE).exists()  # the stages' outputs are kept
    fit(out)
    first = json.loads((out / layout.HISTORY).read_text())[0]
    assert first["selection_cached"] is False  # the candidate was measured by the rerun, not leaked


def test_a_token_budget_stops_the_run_and_a_larger_one_resumes_it(reference, fit, tmp_path):
    out = tmp_path / "run"
    result, _ = fit(out, "train.max_tokens=40000")
    assert result.status == "stopped" and "train.max_tokens=40000" in result.stop_reason
    assert "token budget reached" in result.stop_reason and 0 < result.total_steps < 4
    assert result.tests is None
    resumed, _ = fit(out, "train.max_tokens=100000000")
    assert resumed.status == "complete" and resumed.total_steps == 4
    assert decisions(out) == decisions(reference)


def test_a_cost_budget_stops_the_run_at_a_step_boundary(fit, tmp_path):
    out = tmp_path / "run"
    prices = '{"*": {"input": 10.0, "output": 10.0}}'
    result, _ = fit(out, f"model.prices={prices}", "train.max_cost_usd=0.5")
    assert result.status == "stopped" and "train.max_cost_usd=0.5" in result.stop_reason
    assert result.cost_usd >= 0.5
    state = json.loads((out / layout.STATE).read_text())
    assert state["step_stages"] == [] and state["last_completed_step"] == result.total_steps
