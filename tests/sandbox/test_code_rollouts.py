"""HumanEval / MBPP rollouts through a real sandbox service (real gRPC, real Docker, the
scripted model server as the target): codegen and the real Codex CLI write programs; every
program is graded in a fresh grading container, never the agent's own."""

from __future__ import annotations

import uuid

import pytest

from skillopt.envs.base import TaskItem
from skillopt.envs.registry import load_env_data
from skillopt.types import Limits, ModelSpec, RolloutRequest, SkillVersion
from tests.sandbox.conftest import fenced


def item(env: str, tid: str) -> TaskItem:
    data = load_env_data(env)
    return next(it for s in ("train", "val", "test") for it in data.split(s) if it.id == tid)


def request(
    env: str, it: TaskItem, *, agent: str = "codegen_single", provider: str = "scripted"
) -> RolloutRequest:
    return RolloutRequest(
        rollout_id=f"test/{it.id}/{uuid.uuid4().hex[:8]}",
        env=env,
        agent=agent,
        task=it.task,
        grading=it.grading,
        skill=SkillVersion(content="# Rule\nAlways MARKER-CODE-SKILL.\n"),
        model=ModelSpec(
            provider=provider, model="gpt-5.5" if provider == "scripted" else "claude-sonnet-4-6"
        ),
        limits=Limits(wall_time_s=240, exec_timeout_s=30, max_turns=3),
    )


def run(service, scripts, env: str, it: TaskItem, replies: list, *, marker: str = "", **kw):
    marker = marker or it.task.instruction.strip()[:80]
    scripts.scripts[marker] = replies
    try:
        return service.client.run(request(env, it, **kw), timeout_s=300)
    finally:
        del scripts.scripts[marker]


@pytest.mark.parametrize(("env", "tid"), [("humaneval", "HumanEval-2"), ("mbpp", "mbpp-602")])
def test_codegen_right_is_1_and_wrong_is_0(service, scripts, env, tid):
    it = item(env, tid)
    entry = it.task.attributes["entry_point"]
    right = run(service, scripts, env, it, [{"text": fenced(it.grading.attributes["reference"])}])
    assert right.infra_error is None and right.hard == 1.0 and right.soft == 1.0, right.fail_reason
    assert right.cases and all(c.ok for c in right.cases)
    assert right.metrics["n_tests"] == len(right.cases) and right.metrics["task_type"] == it.task_type
    assert right.trace.messages[-1].content.startswith("[EVALUATION RESULT]")
    wrong = run(service, scripts, env, it, [{"text": fenced(f"def {entry}(*a):\n    return None")}])
    assert wrong.infra_error is None and wrong.hard == 0.0 and wrong.fail_reason.startswith("wrong-answer")
    # The analyst's report names the expected values; the prompts never do.
    assert "expected" in wrong.trace.messages[-1].content
    assert "[EVALUATION RESULT]" not in wrong.trace.user_prompt


def test_a_hostile_reply_fails_typed_through_the_service(service, scripts):
    it = item("humaneval", "HumanEval-2")
    forge = (
        "import json, os\nwith open('results.jsonl', 'a') as f:\n"
        "    for i in range(20): f.write(json.dumps({'i': i, 'v': ['float', '0.5']}) + '\\n')\n"
        "def truncate_number(number):\n    os._exit(0)\n"
    )
    row = run(service, scripts, "humaneval", it, [{"text": fenced(forge)}])
    assert row.infra_error is None and row.hard == 0.0
    assert row.fail_reason.split(":")[0] == "tampered"


def test_codegen_multi_feeds_a_load_error_back(service, scripts):
    it = item("mbpp", "mbpp-602")
    replies = [
        {"text": fenced("def first_repeated_char(s)\n    return None")},
        {"text": fenced(it.grading.attributes["reference"])},
    ]
    row = run(service, scripts, "mbpp", it, replies, agent="codegen_multi")
    assert row.hard == 1.0 and row.n_turns == 2, row.fail_reason
    assert any("SyntaxError" in m.content for m in row.trace.messages if m.role == "user")


#: In the CLI's prompt (the problem itself is in task.md, read through the shell).
MARKER = "write the Python function `truncate_number`"


def heredoc(code: str) -> str:
    return f"cat > solution.py <<'SKILLOPT_EOF'\n{code}\nSKILLOPT_EOF"


@pytest.mark.parametrize(
    ("agent", "provider"), [("codex_exec", "scripted"), ("claude_code_exec", "scripted-anthropic")]
)
def test_an_agent_cli_writes_solution_py_graded_in_a_fresh_container(service, scripts, agent, provider):
    it = item("humaneval", "HumanEval-2")

    def steps(code: str) -> list[dict]:
        return [
            {
                "shell": "cat .agents/skills/skillopt-target/SKILL.md .claude/skills/skillopt-target/SKILL.md task.md"
            },
            {"shell": "echo yes > planted.txt && " + heredoc(code)},
            {"shell": "python3 -c 'import solution; print(solution.truncate_number(3.5))'"},
            {"text": "Done: solution.py written."},
        ]

    row = run(
        service,
        scripts,
        "humaneval",
        it,
        steps(it.grading.attributes["reference"]),
        agent=agent,
        provider=provider,
        marker=MARKER,
    )
    assert row.infra_error is None, (row.fail_reason, row.trace.notes)
    assert row.hard == 1.0, (row.fail_reason, [m.content[:200] for m in row.trace.messages])
    assert row.metrics["solution_file"] is True
    # A program that is right only where the agent planted a file: the grading container is
    # fresh, the file is not there, the program is graded wrong.
    planted = (
        "import os\ndef truncate_number(number):\n"
        "    return number % 1.0 if os.path.exists('planted.txt') else 0.123\n"
    )
    row = run(
        service, scripts, "humaneval", it, steps(planted), agent=agent, provider=provider, marker=MARKER
    )
    assert row.infra_error is None and row.hard == 0.0 and row.fail_reason.startswith("wrong-answer")
