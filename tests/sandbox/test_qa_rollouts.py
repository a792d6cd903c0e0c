"""Question-answering envs through the real sandbox service: client → gRPC → the ``qa`` agent
in the service (no container) → trusted grading; the scripted model server answers.

Also the generic rollout machinery on a QA env (append + resume, per-task timeout rows, the
systemic-failure abort) and SearchQA's Codex exec variant in a real container."""

from __future__ import annotations

import dataclasses
import json

import pytest

from controller.client.sandbox_client import ChannelConfig
from controller.fleet.executor import FleetExecutor
from skillopt.envs.registry import envs_with_agent, get_env, load_env_data
from skillopt.errors import SystemicFailure
from skillopt.testing.fixtures.qa import load_catalogue, sim_reply
from skillopt.trainer.rollouts import Rollouts, RolloutSpec
from skillopt.types import Limits, ModelSpec, SkillVersion


def rollouts_for(service, env: str, *, agent: str = "qa", provider: str = "scripted", wall: float = 60.0):
    executor = FleetExecutor(
        [ChannelConfig(address=service.running.address, token=service.token)], workers=4, rpc_slack_s=30
    )
    spec = RolloutSpec(
        run_id=f"qa-{env}",
        env=env,
        agent=agent,
        model=ModelSpec(provider=provider, model="gpt-5.5"),
        limits=Limits(wall_time_s=wall, exec_timeout_s=min(wall, 60), max_turns=1),
    )
    return Rollouts(executor, spec)


def script_answers(scripts, env_name: str, items, solved) -> list[str]:
    """Register, per item, the simulated right or wrong reply; returns the markers."""
    env = get_env(env_name)
    markers = []
    for item, ok in zip(items, solved, strict=True):
        task = env.parse_task(item.task.attributes)
        marker = item.task.instruction[:100]
        scripts.scripts[marker] = [{"text": sim_reply(env_name, item, env.user_prompt(task), solved=ok)}]
        markers.append(marker)
    return markers


@pytest.mark.parametrize("env_name", envs_with_agent("qa"))
def test_right_answers_score_1_wrong_ones_0_with_a_breakdown(service, scripts, tmp_path, env_name):
    catalogue = load_catalogue(env_name)["tasks"]
    items = [it for it in load_env_data(env_name).split("val") if it.id in catalogue][:4]
    solved = [True, False, True, False][: len(items)]
    markers = script_answers(scripts, env_name, items, solved)
    try:
        rows = rollouts_for(service, env_name).run(
            items, SkillVersion(content="# Skill\n"), tmp_path / "r", label="eval"
        )
    finally:
        for m in markers:
            scripts.scripts.pop(m, None)
    for row, item, ok in zip(rows, items, solved, strict=True):
        assert row.infra_error is None, row.fail_reason
        assert row.hard == float(ok) and row.agent_ok and row.n_turns == 1, (row.id, row.fail_reason)
        assert (row.fail_reason == "") == ok and row.phase == ("done" if ok else "eval")
        assert row.metrics["task_type"] == item.task_type and "predicted_answer" in row.metrics
        assert "acquire" not in row.timings_s  # no container was leased for this rollout
        assert row.trace.messages[-1].content.startswith("[EVALUATION RESULT]")
    lines = [json.loads(line) for line in (tmp_path / "r" / "results.jsonl").read_text().splitlines()]
    assert {line["task_type"] for line in lines} == {it.task_type for it in items}
    assert all((tmp_path / "r" / "predictions").glob("*/conversation.json"))


def test_a_malformed_qa_payload_is_refused_with_the_field_named(service):
    item = load_env_data("searchqa").split("val")[0]
    req = rollouts_for(service, "searchqa").request(item, SkillVersion(), "bad", use_eval_feedback=False)
    bad = dataclasses.replace(req, task=dataclasses.replace(req.task, attributes={"context": "x"}))
    from skillopt.errors import InvalidRequest

    with pytest.raises(InvalidRequest, match=r"searchqa: task\.attributes\.question: Field required"):
        service.client.run(bad, timeout_s=60)
    gold = dataclasses.replace(req, grading=dataclasses.replace(req.grading, attributes={"answers": []}))
    with pytest.raises(InvalidRequest, match=r"grading\.attributes\.answers"):
        service.client.run(gold, timeout_s=60)


def test_rows_append_and_a_resume_skips_done_ids(service, scripts, tmp_path):
    items = load_env_data("searchqa").split("test")[:4]
    markers = script_answers(scripts, "searchqa", items, [True] * 4)
    try:
        rollouts = rollouts_for(service, "searchqa")
        first = rollouts.run(items[:2], SkillVersion(), tmp_path / "r", label="t")
        before = len(service.model.api_requests("chat"))
        rows = rollouts.run(items, SkillVersion(), tmp_path / "r", label="t")
    finally:
        for m in markers:
            scripts.scripts.pop(m, None)
    assert [r.id for r in first] == [it.id for it in items[:2]]
    assert [r.id for r in rows] == [it.id for it in items] and all(r.hard == 1.0 for r in rows)
    assert len(service.model.api_requests("chat")) - before == 2  # only the two new ids
    assert len((tmp_path / "r" / "results.jsonl").read_text().splitlines()) == 4


def test_a_model_reply_past_the_wall_time_is_a_timeout_row(service, scripts, tmp_path):
    slow, quick = load_env_data("gsm8k").split("test")[:2]
    scripts.scripts[slow.task.instruction[:100]] = [{"text": "<answer>1</answer>", "delay_s": 30}]
    (marker,) = script_answers(scripts, "gsm8k", [quick], [True])
    try:
        row, ok = rollouts_for(service, "gsm8k", wall=3.0).run(
            [slow, quick], SkillVersion(), tmp_path / "r", label="t"
        )
    finally:
        del scripts.scripts[slow.task.instruction[:100]], scripts.scripts[marker]
    assert row.infra_error is not None and row.infra_error.kind.value == "timeout", row.fail_reason
    assert row.hard == 0.0 and row.fail_reason.startswith("infra-timeout")
    assert ok.infra_error is None and ok.hard == 1.0


def test_every_qa_row_failing_before_any_model_reply_stops_the_run(docker_client, scripted, tmp_path):
    from tests.sandbox.conftest import start_service

    items = load_env_data("hotpotqa").split("val")[:4]
    for svc in start_service(scripted, capacity=2, pool_size=1):
        svc.running.service.providers["dead"] = type(svc.running.service.providers["scripted"])(
            name="dead", kind="openai_compatible", base_url="http://127.0.0.1:9/v1", max_retries=0
        )
        rollouts = rollouts_for(svc, "hotpotqa", provider="dead")
        with pytest.raises(SystemicFailure, match="before any model reply"):
            rollouts.run(items, SkillVersion(), tmp_path / "r", label="t")
        with pytest.raises(SystemicFailure):  # cached all-failed rows abort too
            rollouts.run(items, SkillVersion(), tmp_path / "r", label="t")


def test_searchqa_codex_exec_answers_from_files_in_its_container(service, scripts, tmp_path):
    item = next(it for it in load_env_data("searchqa").split("train") if it.id.startswith("221c83e6"))
    marker = "Read the skill at `.agents/skills/skillopt-target/SKILL.md`"
    scripts.scripts[marker] = [
        {
            "shell": "cat .agents/skills/skillopt-target/SKILL.md task.md question.md; head -c 300 context.md; ls -a"
        },
        {"text": "The clue describes the author.\n<answer>Tom Clancy</answer>"},
    ]
    before = len(service.model.requests)
    try:
        (row,) = rollouts_for(service, "searchqa", agent="codex_exec", wall=180).run(
            [item],
            SkillVersion(content="# Rules\n- MARKER-QA-SKILL: answer with the full name.\n"),
            tmp_path / "r",
            label="x",
        )
    finally:
        del scripts.scripts[marker]
    assert row.infra_error is None, (row.fail_reason, row.trace.notes.get("codex_stderr_tail"))
    assert row.hard == 1.0 and row.soft == 1.0, (row.fail_reason, row.trace.notes.get("codex_final_message"))
    assert row.metrics["cli"] == "codex" and row.metrics["predicted_answer"] == "Tom Clancy"
    assert "acquire" in row.timings_s  # this one did lease a container
    calls = [r for r in service.model.requests[before:] if r.api == "responses"]
    tool_output = json.dumps(calls[1].body)
    # The skill was rendered for the CLI (front matter, preamble, the learned rules) and the
    # question and the snippets were files in the workspace; the gold answers never were.
    assert "MARKER-QA-SKILL" in tool_output and "Dynamic Guidance" in tool_output
    assert "techno-thriller" in tool_output.lower() and "context.md" in tool_output
    assert '"answers"' not in tool_output and "grading" not in tool_output
