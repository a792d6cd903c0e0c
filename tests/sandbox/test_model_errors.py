"""Provider errors are typed, never executed (issue 9, item 4): a 400/401/429/500 or a timeout
from the model provider ends the rollout with a typed model error — for in-service agents
(codegen through the SDK clients) and for exec agents (the real CLIs through the gateway's HTTP
front end) alike — which the trainer masks out of scores and names in its systemic abort."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator

import pytest

from skillopt.trainer.rollouts import _common_reason
from skillopt.trainer.scoring import score_rows
from skillopt.types import Limits, ModelSpec
from tests.sandbox.conftest import TaskScripts, request_for, start_service

# task id -> (scripted reply, expected kind, retryable)
CASES = {
    "32255": ({"error": {"status": 400, "message": "bad parameter SCRIPTED"}}, "model_bad_request", False),
    "42354": ({"error": {"status": 401, "message": "invalid key SCRIPTED"}}, "model_auth", False),
    "32902": ({"error": {"status": 429, "message": "slow down SCRIPTED"}}, "model_rate_limited", True),
    "416-15": ({"error": {"status": 500, "message": "upstream broke SCRIPTED"}}, "model_unavailable", True),
    "66-24": ({"text": "too late", "delay_s": 60}, "model_unavailable", True),
}


@pytest.fixture(scope="module")
def svc(docker_client, scripted):
    # Short timeouts so the timeout case is quick: the SDK's per-attempt timeout (in-service
    # agents) and the gateway's per-attempt upstream timeout (exec agents).
    yield from start_service(
        scripted,
        capacity=len(CASES),
        pool_size=2,
        provider_timeout_s=2.0,
        server_kw={"gateway_upstream_timeout_s": 2.0},
    )


@pytest.fixture(scope="module")
def errors(scripted, sample) -> Iterator[TaskScripts]:
    ts = TaskScripts()
    for task_id, (reply, _, _) in CASES.items():
        ts.scripts[sample.task(task_id).instruction[:120]] = [reply]
    scripted.add_responder(ts)
    yield ts
    # The server outlives this module: later modules ask about the same tasks and must get
    # the simulation's answers, not these errors.
    ts.scripts.clear()


def _run_all(svc, sample, agent: str) -> dict:
    provider = "scripted-anthropic" if agent == "claude_code_exec" else "scripted"
    model = "claude-sonnet-4-6" if provider == "scripted-anthropic" else "gpt-5.5"
    rows: dict = {}

    def one(task_id: str) -> None:
        req = dataclasses.replace(
            request_for(sample, task_id, agent=agent),
            model=ModelSpec(provider=provider, model=model),
            limits=Limits(wall_time_s=150, exec_timeout_s=60),
        )
        rows[task_id] = svc.client.run(req, timeout_s=200)

    threads = [threading.Thread(target=one, args=(t,)) for t in CASES]
    for t in threads:
        t.start()
    for t in threads:
        t.join(240)
    return rows


@pytest.mark.parametrize("agent", ["codegen_single", "codex_exec", "claude_code_exec"])
def test_provider_errors_are_typed_model_errors(svc, errors, sample, agent):
    rows = _run_all(svc, sample, agent)
    assert set(rows) == set(CASES)
    for task_id, (_, kind, retryable) in CASES.items():
        row = rows[task_id]
        info = row.infra_error
        assert info is not None, (task_id, row.fail_reason, row.metrics)
        assert info.kind.value == kind, (task_id, info, row.fail_reason)
        assert info.is_retryable is retryable, (task_id, info)
        prefix = kind.replace("_", "-") + ": "
        assert row.fail_reason.startswith(prefix), (task_id, row.fail_reason)
        # Nothing the agent made of the error was graded as the skill's result.
        assert row.hard == 0.0 and not row.cases, (task_id, row.cases)
        if task_id == "66-24":
            assert "answer" in info.message or "within" in info.message, info.message
        else:
            assert str(CASES[task_id][0]["error"]["status"]) in info.message, info.message
    # The trainer masks every such row and names the failure in its systemic message.
    score = score_rows(list(rows.values()))
    assert score.n == 0 and score.n_infra == len(CASES)
    assert _common_reason([rows["42354"]]).startswith("model-auth: ")
