"""OfficeQA through a real sandbox service (real gRPC, real Docker, the scripted model server as
the target): the ``tools`` agent's glob/read/grep run in the rollout container over the cited
bulletins and stay inside them; the real Codex CLI and Claude Code browse the same bulletins as
files; the gold answer never reaches a model or a container."""

from __future__ import annotations

import json
import uuid

import pytest

from skillopt.envs.base import TaskItem
from skillopt.envs.registry import load_env_data
from skillopt.types import Limits, ModelSpec, RolloutRequest, SkillFile, SkillVersion


def item(uid: str) -> TaskItem:
    data = load_env_data("officeqa")
    return next(it for s in ("train", "val", "test") for it in data.split(s) if it.id == uid)


def run(service, scripts, it: TaskItem, replies: list, *, agent: str = "tools", provider: str = "scripted",
        marker: str = "", max_turns: int = 30, skill: SkillVersion | None = None):  # fmt: skip
    marker = marker or it.task.instruction.strip()[:80]
    scripts.scripts[marker] = replies
    req = RolloutRequest(
        rollout_id=f"test/{it.id}/{uuid.uuid4().hex[:8]}",
        env="officeqa",
        agent=agent,
        task=it.task,
        grading=it.grading,
        skill=skill or SkillVersion(content="# Rules\n- MARKER-OQA-SKILL: answer with the value alone.\n"),
        model=ModelSpec(
            provider=provider, model="gpt-5.5" if provider == "scripted" else "claude-sonnet-4-6"
        ),
        limits=Limits(wall_time_s=240, exec_timeout_s=120, max_turns=max_turns),
    )
    before = len(service.model.requests)
    try:
        row = service.client.run(req, timeout_s=300)
    finally:
        del scripts.scripts[marker]
    return row, service.model.requests[before:]


def calls(*pairs: tuple[str, object]) -> dict:
    return {"tool_calls": [{"name": n, "arguments": a} for n, a in pairs]}


def test_the_tools_run_in_the_container_over_the_cited_bulletins_and_stay_there(service, scripts):
    it = item("UID0001")
    replies = [
        calls(
            ("glob", {"pattern": "*1941*"}),
            ("grep", {"pattern": "national defense"}),
            ("read", {"path": "treasury_bulletin_1941_01.txt", "start": 1, "limit": 5}),
        ),
        calls(
            ("read", {"path": "../../etc/passwd"}),
            ("read", {"path": "/etc/hostname"}),
            ("grep", {"pattern": "root", "path": "../.."}),
            ("bash", {"cmd": "cat /etc/passwd"}),
            ("read", '{"path": '),
        ),
        {"text": "The table gives it.\n<answer>2,602</answer>"},
    ]
    row, requests = run(service, scripts, it, replies)
    assert row.infra_error is None, row.fail_reason
    assert row.hard == 1.0 and row.metrics["tool_calls"] == 8 and row.metrics["stopped"] == "answer"
    assert row.n_turns == 3 and "acquire" in row.timings_s  # a container was leased
    results = [m.content for m in row.trace.messages if m.role == "tool"]
    assert results[0].startswith("treasury_bulletin_1941_01.txt (281706 bytes)")
    assert "treasury_bulletin_1941_01.txt:" in results[1] and "(page " in results[1]
    assert results[2].startswith("treasury_bulletin_1941_01.txt, lines 1-5")
    assert "'..' is refused" in results[3] and "absolute paths are refused" in results[4]
    assert "'..' is refused" in results[5] and "unknown tool 'bash'" in results[6]
    assert results[7].startswith("ERROR: read: the arguments are not valid JSON")
    assert not any("root:x:0:0" in r for r in results)
    # Every tool call was an execution in the container, recorded in the trace.
    assert [e.case for e in row.trace.executions] == ["glob", "grep", "read", "read", "read", "grep"]
    # The gold never reached the model; the skill and the cited page did.
    bodies = [json.dumps(r.body) for r in requests if r.api == "chat"]
    assert len(bodies) == 3 and all("2,602" not in b.split("<answer>")[0] for b in bodies[:1])
    assert "MARKER-OQA-SKILL" in bodies[0] and "Cited pages" in bodies[0]
    assert '"grading"' not in bodies[-1] and "numeric_tolerance" not in bodies[-1]
    assert [t["function"]["name"] for t in requests[0].body["tools"]] == ["glob", "read", "grep"]


def test_a_reply_without_tool_call_or_answer_ends_the_episode_and_turns_are_capped(service, scripts):
    it = item("UID0220")
    row, _ = run(service, scripts, it, [{"text": "I am not sure where to look."}])
    assert row.infra_error is None and row.hard == 0.0 and row.n_turns == 1
    assert row.metrics["stopped"] == "no-tool-call-no-answer" and row.fail_reason.startswith("EM=0")
    looping = [calls(("grep", {"pattern": "receipts"}))]
    row, _ = run(service, scripts, it, looping, max_turns=3)
    assert row.infra_error is None and row.hard == 0.0 and row.n_turns == 3
    assert row.fail_reason == "no-answer: max-tool-turns" and row.metrics["tool_calls"] == 3


@pytest.mark.parametrize(
    ("agent", "provider"), [("codex_exec", "scripted"), ("claude_code_exec", "scripted-anthropic")]
)
def test_an_agent_cli_answers_from_the_bulletins_under_docs(service, scripts, agent, provider):
    it = item("UID0001")
    replies = [
        {
            "shell": "cat .agents/skills/skillopt-target/SKILL.md .claude/skills/skillopt-target/SKILL.md task.md"
        },
        {
            "shell": "ls -la docs; grep -i -c 'national defense' docs/*.txt; touch docs/new.txt || echo READ-ONLY"
        },
        {"text": "From the budget table.\n<answer>2,602</answer>"},
    ]
    row, requests = run(
        service, scripts, it, replies, agent=agent, provider=provider, marker="Read the skill at `"
    )
    assert row.infra_error is None, (row.fail_reason, row.trace.notes)
    assert row.hard == 1.0 and row.metrics["predicted_answer"] == "2,602", row.fail_reason
    sent = json.dumps([r.body for r in requests if r.api in ("responses", "messages")])
    assert "MARKER-OQA-SKILL" in sent and "treasury_bulletin_1941_01.txt" in sent
    assert "READ-ONLY" in sent  # the bulletins are read-only in the workspace
    assert "numeric_tolerance" not in sent and "2,602" not in sent.split("READ-ONLY")[0]


def test_a_package_script_runs_in_the_container_from_its_read_only_mount(service, scripts):
    """With scripts in the skill package the agent gets ``run_script``: it runs the package's
    own script (arguments passed, output back), and nothing else."""
    convert = (
        "import sys\n"
        "print('millions:', float(sys.argv[1]) / 1000)\n"
        "open('/skill/scripts/owned.txt', 'w')\n"  # the mount is read-only: this fails
    )
    skill = SkillVersion(
        name="bulletin-units",
        content="---\nname: bulletin-units\ndescription: Units in Treasury bulletins.\n---\n# Units\n",
        files=(SkillFile(path="scripts/convert.py", data=convert.encode(), executable=True),),
    )
    it = item("UID0001")
    replies = [
        calls(
            ("run_script", {"path": "/skill/scripts/convert.py", "args": ["2602000"]}),
            ("run_script", {"path": "/skill/../etc/passwd"}),
            ("run_script", {"path": "scripts/convert.py", "args": "not a list"}),
        ),
        {"text": "<answer>2,602</answer>"},
    ]
    row, requests = run(service, scripts, it, replies, skill=skill)
    assert row.infra_error is None, row.fail_reason
    results = [m.content for m in row.trace.messages if m.role == "tool"]
    assert results[0].startswith("exit 1\nmillions: 2602.0") and "Read-only file system" in results[0]
    assert "is not a script of your skill (scripts: /skill/scripts/convert.py)" in results[1]
    assert results[2] == "ERROR: run_script: args must be a list of strings"
    assert [e.case for e in row.trace.executions] == ["run_script"]
    assert [t["function"]["name"] for t in requests[0].body["tools"]] == [
        "glob",
        "read",
        "grep",
        "run_script",
    ]
