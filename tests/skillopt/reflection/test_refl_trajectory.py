"""How rows are shown to the optimizer; which rows count as failures."""

from __future__ import annotations

import math

from skillopt.reflection.trajectory import format_trajectory, is_failure, reflectable, split_rows
from skillopt.types import CaseResult, ExecRecord, Message

SKILL = "# Skill\n- check the header row"


def _codegen_row(row):
    system = f"You write code.\n\n## Skill\n{SKILL}\n"
    user = "# Instruction\nSum column B\n\n# Input spreadsheet preview\nSheet1: A1=1\n\n# Task\nWrite code."
    return row(
        "t1",
        0.0,
        fail_reason="eval-mismatch: Sheet1!B2 got 1 expected 2",
        system_prompt=system,
        user_prompt=user,
        notes={"spreadsheet_preview": "Sheet1: A1=1", "extra_note": "kept"},
        n_turns=2,
        cases=[CaseResult(name="1", ok=False, stage="eval"), CaseResult(name="2", ok=True, stage="eval")],
        messages=[
            Message(role="system", content=system),
            Message(role="user", content=user),
            Message(role="assistant", content="```python\nprint(1)\n```"),
            Message(role="user", content="Your code failed: NameError"),
            Message(role="assistant", content="```python\nprint(2)\n```"),
            Message(role="system", content="[POST-EXECUTION VERIFICATION]\nB2: got=1, expected=2 ✗"),
        ],
        executions=[
            ExecRecord(
                turn=1,
                case="1",
                code="print(1)",
                exit_code=1,
                stdout_tail="",
                stderr_tail="NameError: x",
                duration_s=0.2,
            ),
            ExecRecord(
                turn=2,
                case="1",
                code="print(2)",
                exit_code=0,
                stdout_tail="2\n",
                stderr_tail="",
                duration_s=0.1,
            ),
            ExecRecord(
                turn=2,
                case="2",
                code="",
                exit_code=0,
                stdout_tail="",
                stderr_tail="",
                duration_s=0.1,
                timed_out=True,
            ),
        ],
    )


def test_header_prompts_and_conversation(row) -> None:
    text = format_trajectory(
        _codegen_row(row), task_text="Sum column B", task_type="Cell-Level Manipulation", index=3, skill=SKILL
    )
    lines = text.splitlines()
    assert lines[:7] == [
        "### Trajectory 3 (id=t1)",
        "Task: Sum column B",
        "Task type: Cell-Level Manipulation",
        "Failure reason: eval-mismatch: Sheet1!B2 got 1 expected 2",
        "Steps: 2",
        "Score: hard=0 soft=0",
        "Test cases passed: 1/2",
    ]
    order = [
        "#### Target System Prompt",
        "#### Target User Prompt",
        "#### Spreadsheet Preview",
        "#### Extra Note",
        "#### Conversation",
        "[assistant] ```python\nprint(1)",
        "[execution turn=1 case=1] exit=1",
        "stderr (tail):\nNameError: x",
        "[user] Your code failed: NameError",
        "[assistant] ```python\nprint(2)",
        "[execution turn=2 case=1] exit=0",
        "stdout (tail):\n2",
        "[execution turn=2 case=2] exit=0 TIMED OUT",
        "[verification] [POST-EXECUTION VERIFICATION]",
    ]
    positions = [text.index(s) for s in order]
    assert positions == sorted(positions)
    # The skill is shown once, under Current Skill, not inside every trajectory.
    assert "check the header row" not in text
    assert "[the current skill is inserted here" in text
    # The preview note is already in the user prompt: not repeated.
    assert text.count("Sheet1: A1=1") == 1
    assert "(shown in the target user prompt above)" in text
    # The prompts are not repeated as conversation turns.
    assert text.count("Write code.") == 1
    assert "[system]" not in text


def test_no_skill_given_keeps_system_prompt_verbatim(row) -> None:
    text = format_trajectory(_codegen_row(row))
    assert "check the header row" in text
    assert "Task: (not given)" in text


def test_no_truncation_by_default_and_optional_cap(row) -> None:
    long = "x" * 50_000
    r = row("big", 0.0, messages=[Message(role="assistant", content=long + "END")])
    full = format_trajectory(r)
    assert long + "END" in full
    capped = format_trajectory(r, max_chars=2000)
    assert len(capped) <= 2000
    assert capped.startswith("### Trajectory 1 (id=big)")
    assert capped.endswith("END")
    assert "characters omitted by the per-trajectory cap" in capped


def test_tool_calls_and_results(row) -> None:
    r = row(
        "q",
        1.0,
        messages=[
            Message(
                role="assistant",
                content="",
                tool_calls=({"id": "1", "name": "search", "arguments": {"q": "x"}},),
            ),
            Message(role="tool", content="result text", name="search", tool_call_id="1"),
            Message(role="assistant", content="final"),
        ],
    )
    text = format_trajectory(r)
    assert '[tool_call search] {"q": "x"}' in text
    assert "[tool result search] result text" in text
    assert "Failure reason: none" in text


def test_failure_threshold_and_fractional_hard(row) -> None:
    assert is_failure(row("a", 0.0))
    assert is_failure(row("b", 1e-12))
    assert not is_failure(row("c", 0.5))  # fractional hard counts as success, as the reference
    assert not is_failure(row("d", 1.0))
    assert is_failure(row("e", math.nan))


def test_infra_rows_are_never_reflected(row) -> None:
    rows = [row("ok", 1.0), row("bad", 0.0), row("oom", 0.0, infra=True), row("oom2", 1.0, infra=True)]
    assert [r.id for r in reflectable(rows)] == ["ok", "bad"]
    failures, successes = split_rows(rows)
    assert [r.id for r in failures] == ["bad"]
    assert [r.id for r in successes] == ["ok"]
