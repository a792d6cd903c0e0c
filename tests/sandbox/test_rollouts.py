"""The controller's rollout path against a real service: results appended as they arrive,
resume skipping finished ids, timeout rows, the systemic-failure abort."""

from __future__ import annotations

import dataclasses
import json
import threading

import pytest

from controller.client.sandbox_client import ChannelConfig
from controller.fleet.executor import FleetExecutor
from skillopt.envs.base import TaskItem
from skillopt.errors import SystemicFailure
from skillopt.testing.fixtures.spreadsheetbench import solution_code
from skillopt.trainer.rollouts import Rollouts, RolloutSpec
from skillopt.trainer.rundir import load_rows
from skillopt.types import Limits, ModelSpec, SkillVersion
from tests.sandbox.conftest import fenced

IDS = ["32255", "42354", "32902", "66-24"]


def items(sample, ids):
    out = []
    for tid in ids:
        task, grading = sample.build_task(tid)
        out.append(TaskItem(task=task, grading=grading, task_type=sample.task(tid).task_type))
    return out


_EXECUTORS: list[FleetExecutor] = []


@pytest.fixture(autouse=True)
def _close_executors():
    yield
    while _EXECUTORS:
        _EXECUTORS.pop().close()


def rollouts_for(service, *, provider="scripted", wall=60.0, workers=4) -> Rollouts:
    executor = FleetExecutor(
        [ChannelConfig(address=service.running.address, token=service.token)], workers=workers, rpc_slack_s=30
    )
    _EXECUTORS.append(executor)
    spec = RolloutSpec(
        run_id="rollouts-test",
        env="spreadsheetbench",
        agent="codegen_single",
        model=ModelSpec(provider=provider, model="m"),
        limits=Limits(wall_time_s=wall, exec_timeout_s=min(wall, 60)),
    )
    return Rollouts(executor, spec)


def test_rows_are_appended_and_a_resume_skips_finished_ids(service, scripts, sample, tmp_path):
    for tid in IDS:
        scripts.scripts[sample.task(tid).instruction[:120]] = [fenced(solution_code(tid))]
    rollouts = rollouts_for(service)
    seen = []
    rollouts.on_row = lambda row, progress: seen.append(row.id)
    rows = rollouts.run(items(sample, IDS[:2]), SkillVersion(), tmp_path / "r", label="t")
    assert [r.id for r in rows] == IDS[:2] and all(r.hard == 1.0 for r in rows)
    assert sorted(seen) == sorted(IDS[:2])
    before = len(service.model.api_requests("chat"))
    rows = rollouts.run(items(sample, IDS), SkillVersion(), tmp_path / "r", label="t")
    assert [r.id for r in rows] == IDS
    # Only the two new ids went to the sandbox (one model call each).
    assert len(service.model.api_requests("chat")) - before == 2
    lines = (tmp_path / "r" / "results.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["id"] for line in lines) == sorted(IDS)
    # Rows reload with their traces (the analysts need them after a resume).
    reloaded = load_rows(tmp_path / "r")
    assert reloaded["32255"].trace.code and reloaded["32255"].trace.messages


def test_a_torn_last_line_is_dropped_on_resume(service, scripts, sample, tmp_path):
    scripts.scripts[sample.task("32255").instruction[:120]] = [fenced(solution_code("32255"))]
    rollouts = rollouts_for(service)
    rollouts.run(items(sample, ["32255"]), SkillVersion(), tmp_path / "r", label="t")
    with open(tmp_path / "r" / "results.jsonl", "a") as fh:
        fh.write('{"id": "42354", "hard": 1.0, "so')  # a crash in the middle of a write
    assert set(load_rows(tmp_path / "r")) == {"32255"}
    assert (tmp_path / "r" / "results.jsonl").read_text().count("\n") == 1


def test_a_rollout_over_its_wall_time_is_a_timeout_row(service, scripts, sample, tmp_path):
    scripts.scripts[sample.task("82-30").instruction[:120]] = [fenced("while True:\n    pass\n")]
    rollouts = rollouts_for(service, wall=4.0)
    (row,) = rollouts.run(items(sample, ["82-30"]), SkillVersion(), tmp_path / "r", label="t")
    assert row.infra_error is not None and row.infra_error.kind.value == "timeout"
    assert row.hard == 0.0
    assert service.client.describe().running == 0  # really cancelled, not abandoned


def test_every_row_failing_before_any_model_reply_stops_the_run(docker_client, scripted, sample, tmp_path):
    from tests.sandbox.conftest import start_service

    # A provider whose endpoint refuses connections: no rollout ever gets a model reply.
    for svc in start_service(scripted, capacity=2, pool_size=1):
        svc.running.service.providers["dead"] = type(svc.running.service.providers["scripted"])(
            name="dead", kind="openai_compatible", base_url="http://127.0.0.1:9/v1", max_retries=0
        )
        rollouts = rollouts_for(svc, provider="dead", workers=2)
        with pytest.raises(SystemicFailure, match="before any model reply") as info:
            rollouts.run(items(sample, IDS), SkillVersion(), tmp_path / "r", label="t")
        assert "cannot connect" in str(info.value) or "model" in str(info.value)
        # The rows ended on infrastructure, so a rerun runs them again (and aborts again).
        with pytest.raises(SystemicFailure):
            rollouts.run(items(sample, IDS), SkillVersion(), tmp_path / "r", label="t")
        assert len((tmp_path / "r" / "infra_attempts.jsonl").read_text().splitlines()) == len(IDS)


def test_stop_cancels_what_is_in_flight(service, scripts, sample):
    scripts.scripts[sample.task("263-1").instruction[:120]] = [fenced("while True:\n    pass\n")]
    rollouts = rollouts_for(service, wall=120.0)
    stop = threading.Event()
    req = rollouts.request(items(sample, ["263-1"])[0], SkillVersion(), "t", use_eval_feedback=False)
    got = []
    t = threading.Thread(
        target=rollouts.executor.run, args=([req],), kwargs={"on_result": got.append, "stop": stop}
    )
    t.start()
    handle = None
    for _ in range(200):
        handle = service.running.admission.get(req.rollout_id)
        if handle is not None:
            break
        t.join(0.05)
    assert handle is not None
    stop.set()
    t.join(60)
    assert not t.is_alive() and got == []
    assert handle.wait_done(60) and handle.cancel.is_set()


def test_a_resumed_batch_reruns_rows_that_ended_on_infrastructure(service, scripts, sample, tmp_path):
    ok, broken = "32255", "42354"
    scripts.scripts[sample.task(ok).instruction[:120]] = [fenced(solution_code(ok))]
    scripts.scripts[sample.task(broken).instruction[:120]] = [{"error": {"status": 503}}]
    rollouts = rollouts_for(service)
    rows = {
        r.id: r
        for r in rollouts.run(items(sample, [ok, broken]), SkillVersion(), tmp_path / "r", label="rerun")
    }
    assert rows[ok].infra_error is None and rows[broken].infra_error is not None
    # The provider is back: the resumed batch reruns only the infrastructure row, under a new
    # rollout id (the host would replay the old one), and keeps each id once in results.jsonl.
    scripts.scripts[sample.task(broken).instruction[:120]] = [fenced(solution_code(broken))]
    before = len(service.model.api_requests("chat"))
    rows = {
        r.id: r
        for r in rollouts.run(items(sample, [ok, broken]), SkillVersion(), tmp_path / "r", label="rerun")
    }
    assert rows[broken].infra_error is None and rows[broken].hard == 1.0
    assert rows[broken].rollout_id.endswith("+r1")
    assert len(service.model.api_requests("chat")) - before == 1
    lines = [json.loads(x) for x in (tmp_path / "r" / "results.jsonl").read_text().splitlines()]
    assert sorted(d["id"] for d in lines) == sorted([ok, broken])
    (aside,) = [json.loads(x) for x in (tmp_path / "r" / "infra_attempts.jsonl").read_text().splitlines()]
    assert aside["id"] == broken and aside["infra_error"]


def test_the_per_rollout_token_budget_ends_the_model_conversation(service, scripts, sample, tmp_path):
    tid = "66-24"
    scripts.scripts[sample.task(tid).instruction[:120]] = [fenced("raise SystemExit(3)")]
    rollouts = rollouts_for(service)
    rollouts = Rollouts(
        rollouts.executor,
        dataclasses.replace(
            rollouts.spec,
            agent="codegen_multi",
            limits=dataclasses.replace(rollouts.spec.limits, max_model_tokens=1),
        ),
    )
    before = len(service.model.api_requests("chat"))
    (row,) = rollouts.run(items(sample, [tid]), SkillVersion(), tmp_path / "r", label="budget")
    # One model call used the whole budget; the retry turn was refused by the gateway.
    assert len(service.model.api_requests("chat")) - before == 1
    assert row.infra_error is None and row.fail_reason.startswith("budget-exceeded"), row.fail_reason
