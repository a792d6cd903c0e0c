"""Rows that ended on infrastructure (here: the model provider answering 503) are never
scored: masked out of every mean, kept on record, rerun by a resume, and a measurement that
lost too many of them is not evidence (the gate rejects; the baseline stops the run)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from skillopt.envs.registry import load_env_data
from skillopt.errors import SystemicFailure
from skillopt.testing.inprocess import simulated_trainer
from skillopt.testing.scripted import ScriptedRequest
from skillopt.testing.simulation import SIM_TARGET, simulation_server
from skillopt.trainer.callbacks import Callback, StageEvent
from skillopt.trainer.planning import RunPlan, plan_epoch
from skillopt.trainer.rundir import layout
from tests.skillopt.trainer.conftest import Crash, config, crash_at


class Faults:
    """The provider fails (HTTP 503) for the target's requests about the listed questions."""

    def __init__(self) -> None:
        self.questions: list[str] = []

    def __call__(self, req: ScriptedRequest) -> dict | None:
        if req.model == SIM_TARGET and any(q in req.text for q in self.questions):
            return {"error": {"status": 503, "type": "server_error", "message": "overloaded (test fault)"}}
        return None


@pytest.fixture(scope="module")
def faulty() -> Iterator[tuple[str, Faults]]:
    faults = Faults()
    with simulation_server(before=[faults]) as sim:
        yield sim.base_url, faults


def _plan() -> RunPlan:
    return RunPlan.of(config(), load_env_data("searchqa"))


def _questions(items) -> list[str]:
    return [it.task.instruction[:80] for it in items]


def _rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_infra_rows_are_masked_out_of_the_means_and_kept_on_record(faulty, tmp_path):
    url, faults = faulty
    plan = _plan()
    faults.questions = _questions(plan.train[:2])  # two train items fail wherever they run
    try:
        result = simulated_trainer(config(), tmp_path / "run", base_url=url)[0].fit()
    finally:
        faults.questions = []
    assert result.status == "complete"
    history = json.loads((tmp_path / "run" / layout.HISTORY).read_text())
    assert sum(r["rollout_n_infra"] for r in history) == 4  # each train item once per epoch
    for r in history:
        rows = _rows(tmp_path / "run" / layout.step_dir(r["step"]) / layout.Step.ROLLOUT / layout.RESULTS)
        scored = [x for x in rows if x["infra_error"] is None]
        assert r["rollout_n"] == len(scored) and r["rollout_n"] + r["rollout_n_infra"] == len(rows)
        assert r["rollout_hard"] == pytest.approx(sum(x["hard"] for x in scored) / len(scored))
        for x in rows:
            if x["infra_error"] is not None:
                assert x["infra_error"]["kind"].startswith("model") and x["hard"] == 0.0


def test_a_resumed_batch_reruns_its_infra_rows_with_new_rollout_ids(faulty, tmp_path):
    url, faults = faulty
    plan = _plan()
    batch = plan_epoch(plan.train, epoch=1, seed=config().train.seed, batch_size=10, n_batches=2)[0]
    faults.questions = _questions(batch.items[:3])
    out = tmp_path / "run"
    try:
        with pytest.raises(Crash):  # after step 1's rollouts, before its first commit
            simulated_trainer(config(), out, base_url=url, failpoint=crash_at(layout.STATE, 2))[0].fit()
    finally:
        faults.questions = []  # the provider recovers
    rollout = out / layout.step_dir(1) / layout.Step.ROLLOUT
    assert sum(r["infra_error"] is not None for r in _rows(rollout / layout.RESULTS)) == 3
    result = simulated_trainer(config(), out, base_url=url)[0].fit()
    assert result.status == "complete"
    rows = _rows(rollout / layout.RESULTS)
    assert all(r["infra_error"] is None for r in rows) and len(rows) == len(batch.items)
    attempts = _rows(rollout / layout.INFRA_ATTEMPTS)
    assert len(attempts) == 3 and {a["id"] for a in attempts} <= {r["id"] for r in rows}
    rerun = {r["id"]: r["rollout_id"] for r in rows}
    assert all(rerun[a["id"]].endswith("+r1") and a["rollout_id"] != rerun[a["id"]] for a in attempts)
    assert json.loads((out / layout.HISTORY).read_text())[0]["rollout_n_infra"] == 0


def test_a_baseline_that_lost_too_many_rows_stops_the_run_and_a_resume_measures_them_again(faulty, tmp_path):
    url, faults = faulty
    plan = _plan()
    faults.questions = _questions(plan.selection[:4])  # 4 of 15 > evaluation.max_infra_fraction 20%
    out = tmp_path / "run"
    try:
        with pytest.raises(SystemicFailure, match=r"evaluation\.max_infra_fraction"):
            simulated_trainer(config(), out, base_url=url)[0].fit()
    finally:
        faults.questions = []
    assert not (out / layout.STATE).exists()  # nothing committed: the baseline is not a measurement
    result = simulated_trainer(config(), out, base_url=url)[0].fit()
    assert result.status == "complete"
    assert len(_rows(out / layout.BASELINE_SELECTION / layout.INFRA_ATTEMPTS)) == 4


class FailDuring(Callback):
    """Turns the provider faults on for one stage of one step."""

    def __init__(self, faults: Faults, questions: list[str], step: int, stage: str) -> None:
        self.faults, self.questions, self.step, self.stage = faults, questions, step, stage

    def on_stage_start(self, event: StageEvent) -> None:
        if (event.step, event.stage) == (self.step, self.stage):
            self.faults.questions = self.questions

    def on_stage_end(self, event: StageEvent) -> None:
        self.faults.questions = []


def test_the_gate_rejects_a_candidate_whose_measurement_lost_too_many_rows(faulty, tmp_path):
    url, faults = faulty
    plan = _plan()
    out = tmp_path / "run"
    cb = FailDuring(faults, _questions(plan.selection[:4]), 1, "evaluate")
    result = simulated_trainer(config(), out, base_url=url, callbacks=[cb])[0].fit()
    first = json.loads((out / layout.HISTORY).read_text())[0]
    assert first["action"] == "reject" and first["selection_n_infra"] == 4
    assert first["gate_reason"] == "4 selection rollouts failed on infrastructure"
    state = json.loads((out / layout.STATE).read_text())
    cache = json.loads(state["gate_cache"]["json"])["entries"]
    assert first["candidate_hash"] not in cache  # not remembered: the same skill is measured anew
    assert result.status == "complete"
