"""The SpreadsheetBench ReAct agent end to end: client → gRPC → hardened container, with the
scripted model server driving real tool calls over the Chat Completions API. Every tool runs
inside the rollout container; the final solution.py is graded on the trusted side."""

from __future__ import annotations

import re
import socket
from contextlib import contextmanager

from skillopt.types import Limits
from tests.sandbox.conftest import request_for, solution_code

_ASSIGN = re.compile(r"^(INPUT_PATH|OUTPUT_PATH)\s*=.*$\n?", re.M)


def _solution(task_id: str, kind: str = "solution") -> str:
    """The reference script in the ReAct layout: the exact path assignments first."""
    body = _ASSIGN.sub("", solution_code(task_id, kind))
    return f'INPUT_PATH = "input.xlsx"\nOUTPUT_PATH = "output.xlsx"\n{body}'


def _calls(*calls: tuple[str, object]) -> dict:
    return {"tool_calls": [{"name": name, "arguments": args} for name, args in calls]}


@contextmanager
def _scripted(service, scripts, sample, task_id: str, replies: list):
    """Register per-turn replies for a task; yield a function giving this rollout's requests."""
    marker = sample.task(task_id).instruction[:120]
    scripts.scripts[marker] = replies
    before = len(service.model.api_requests("chat"))

    def requests():
        return [
            r.body
            for r in service.model.api_requests("chat")[before:]
            if any(marker in (m.get("content") or "") for m in r.body["messages"])
        ]

    try:
        yield requests
    finally:
        del scripts.scripts[marker]


def _tool_results(body: dict) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def _run(service, sample, task_id: str, **kw):
    r = service.client.run(request_for(sample, task_id, agent="react", **kw), timeout_s=180)
    assert r.infra_error is None, r.infra_error
    return r


def test_react_solves_a_real_task_with_tools_in_the_container(service, scripts, sample):
    task_id = "50755"  # three test cases
    explore = (
        'python3 -c \'import openpyxl; ws = openpyxl.load_workbook("input.xlsx").active; '
        "print(ws.title, ws.max_row, ws.max_column); [print(r) for r in ws.iter_rows(values_only=True)]'"
    )
    code = _solution(task_id)
    replies = [
        _calls(("bash", {"cmd": explore})),
        _calls(("write_file", {"path": "solution.py", "content": code})),
        _calls(("bash", {"cmd": "python3 solution.py"})),
        {"text": "solution.py writes the differences into the result row; output.xlsx checked."},
    ]
    with _scripted(service, scripts, sample, task_id, replies) as requests:
        r = _run(service, sample, task_id, skill="# Rule\nAlways MARKER-REACT-SKILL.\n")
        bodies = requests()

    assert r.hard == 1.0 and r.soft == 1.0, (r.fail_reason, [c.reason for c in r.cases])
    assert r.fail_reason == "" and r.phase == "done"
    assert r.agent_ok and r.n_turns == 3 and r.usage.calls == 4
    assert len(r.cases) == 3 and all(c.ok for c in r.cases)
    assert r.metrics["n_model_calls"] == 4 and r.metrics["stopped"] == "final-answer"
    assert r.trace.code == code
    assert sum(a.name.endswith("output.xlsx") for a in r.artifacts) == 3

    # What the model saw: the tools offered, the skill, the layout, and real tool results.
    assert len(bodies) == 4
    first = bodies[0]
    assert [t["function"]["name"] for t in first["tools"]] == ["bash", "write_file"]
    system = first["messages"][0]["content"]
    assert "## Skill" in system and "MARKER-REACT-SKILL" in system and "write_file" in system
    assert "Never write Excel formulas" in system
    assert 'INPUT_PATH = "input.xlsx"' in first["messages"][1]["content"]
    explored = _tool_results(bodies[1])[0]
    assert explored.startswith("[exit code 0]") and "Expected result" in explored
    assert _tool_results(bodies[2])[1].startswith("Wrote ") and "solution.py" in _tool_results(bodies[2])[1]
    ran = _tool_results(bodies[3])[2]
    assert ran.startswith("[exit code 0]")
    assert "[auto-verify]" in ran and "output.xlsx: exists" in ran
    assert "No formulas without cached values" in ran
    # The exploring command did not mention solution.py: no auto-verify there.
    assert "[auto-verify]" not in explored

    # The trace keeps the conversation with tool calls and their results.
    msgs = r.trace.messages
    assistants = [m for m in msgs if m.role == "assistant"]
    tools = [m for m in msgs if m.role == "tool"]
    assert len(assistants) == 4 and len(tools) == 3
    assert [m.tool_call_id for m in tools] == [a.tool_calls[0]["id"] for a in assistants[:3]]
    assert [m.name for m in tools] == ["bash", "write_file", "bash"]
    assert msgs[-1].role == "system" and "expected=" in msgs[-1].content
    bash_runs = [e for e in r.trace.executions if e.case == "bash"]
    assert [e.code for e in bash_runs] == [explore, "python3 solution.py"]
    assert {e.case for e in r.trace.executions} - {"bash"} == {c.name for c in r.cases}


def test_write_file_refuses_paths_outside_the_workspace_and_the_rollout_goes_on(service, scripts, sample):
    task_id = "42354"
    replies = [
        _calls(
            ("write_file", {"path": "../x", "content": "escape"}),
            ("write_file", {"path": "/etc/x", "content": "escape"}),
            ("write_file", '{"path": "solution.py", "content": '),  # malformed JSON
            ("python", {"code": "print(1)"}),  # unknown tool
        ),
        _calls(("write_file", {"path": "./solution.py", "content": _solution(task_id)})),
        {"text": "Done."},
    ]
    with _scripted(service, scripts, sample, task_id, replies) as requests:
        r = _run(service, sample, task_id)
        bodies = requests()
    traversal, absolute, malformed, unknown = _tool_results(bodies[1])
    assert traversal.startswith("ERROR: write_file refused") and "traversal" in traversal
    assert absolute.startswith("ERROR: write_file refused") and "absolute" in absolute
    assert malformed.startswith("ERROR: write_file: the arguments are not valid JSON")
    assert unknown.startswith("ERROR: unknown tool 'python'") and "bash, write_file" in unknown
    # The rollout continued: the next write succeeded and the solution passed.
    assert _tool_results(bodies[2])[4].startswith("Wrote ")
    assert r.hard == 1.0, (r.fail_reason, [c.reason for c in r.cases])
    assert r.n_turns == 5 and r.usage.calls == 3


def test_a_wrong_solution_fails_with_the_first_wrong_cell(service, scripts, sample):
    task_id = "50755"  # wrong.py writes formulas: no cached values, graded as empty
    replies = [
        _calls(
            ("write_file", {"path": "solution.py", "content": _solution(task_id, "wrong")}),
            ("bash", {"cmd": "python3 solution.py && echo ran"}),
        ),
        {"text": "Done."},
    ]
    with _scripted(service, scripts, sample, task_id, replies) as requests:
        r = _run(service, sample, task_id)
        bodies = requests()
    assert r.hard == 0.0 and r.phase == "eval"
    assert r.fail_reason.startswith("eval-mismatch: value@"), r.fail_reason
    cell = r.fail_reason.split("value@", 1)[1].split(":", 1)[0]
    assert "!" in cell and any(ch.isdigit() for ch in cell)
    # The auto-verify block warned the model about the formulas.
    ran = _tool_results(bodies[1])[1]
    assert "ran" in ran and "[auto-verify]" in ran
    assert "WARNING" in ran and "no cached value" in ran and "=B2-B3" in ran
    assert r.trace.messages[-1].role == "system" and "expected=" in r.trace.messages[-1].content


def test_bash_runs_inside_the_container_and_long_output_is_cut(service, scripts, sample):
    task_id = "56563"
    replies = [
        _calls(
            ("bash", {"cmd": "id -u; cat /etc/hostname; pwd; ls"}),
            ("bash", {"cmd": "seq 1 3000; echo to-stderr >&2"}),
            ("bash", {"cmd": "touch /etc/owned; exit 3"}),
            ("bash", {"cmd": "sleep 30"}),
        ),
        {"text": "I only looked around."},
    ]
    with _scripted(service, scripts, sample, task_id, replies) as requests:
        # The bash timeout (60 s) is clipped to the request's exec timeout.
        r = _run(service, sample, task_id, limits=Limits(wall_time_s=120, exec_timeout_s=2))
        bodies = requests()
    inside, long, failing, slow = _tool_results(bodies[1])
    lines = inside.splitlines()
    assert lines[0] == "[exit code 0]"
    assert lines[1] == "1000"
    assert lines[2] == "sandbox" != socket.gethostname()
    assert lines[3] == "/workspace" and lines[4] == "input.xlsx"
    assert len(long) < 4100
    assert long.splitlines()[1] == "1" and "[output truncated:" in long and "showing the first 3800" in long
    assert failing.startswith("[exit code 3]") and "Read-only file system" in failing
    assert slow.startswith("[timed out after 2 s; the command was killed]")
    # No solution.py was written.
    assert r.fail_reason == "no-solution" and r.phase == "agent" and r.hard == 0.0
    assert r.n_turns == 4 and r.agent_ok


def test_no_solution_is_a_no_solution_row(service, scripts, sample):
    task_id = "32255"
    with _scripted(service, scripts, sample, task_id, [{"text": "I cannot do this."}]):
        r = _run(service, sample, task_id)
    assert r.fail_reason == "no-solution" and r.phase == "agent"
    assert r.hard == 0.0 and r.soft == 0.0 and not r.cases
    assert r.agent_ok and r.n_turns == 0 and r.usage.calls == 1
    assert r.metrics["stopped"] == "final-answer"


def test_a_model_failure_mid_rollout_is_an_infra_row_that_keeps_the_trace(service, scripts, sample):
    task_id = "66-24"
    replies = [
        _calls(("bash", {"cmd": "ls"})),
        {"error": {"status": 500, "message": "the model fell over"}},
    ]
    with _scripted(service, scripts, sample, task_id, replies):
        r = service.client.run(request_for(sample, task_id, agent="react"), timeout_s=120)
    assert r.infra_error is not None and r.infra_error.kind.value == "model_unavailable"
    assert r.fail_reason.startswith("model-unavailable: ")
    assert r.agent_ok and r.n_turns == 1 and r.hard == 0.0
    assert [m.role for m in r.trace.messages] == ["system", "user", "assistant", "tool"]
    assert r.trace.messages[-1].content.startswith("[exit code 0]\ninput.xlsx")
