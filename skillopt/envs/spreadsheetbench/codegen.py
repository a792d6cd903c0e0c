"""SpreadsheetBench codegen agents: single-turn (the official setting) and multi-turn.

The model is called from the trusted side; every line of code it writes runs inside the
rollout sandbox; every test case is graded here, outside the sandbox, against gold files the
sandbox never sees.

Workspace layout inside the sandbox::

    cases/<name>/input.xlsx      the case's input (written before the first model call)
    cases/<name>/solution.py     the current script with INPUT_PATH/OUTPUT_PATH prepended
    cases/<name>/output.xlsx     what the script saved
"""

from __future__ import annotations

import re
import time

from skillopt.envs.base import AgentContext, ProgressEvent
from skillopt.envs.spreadsheetbench.cases import (
    CaseRunner,
    Grades,
    RolloutState,
    build_row,
    error_text,
    guarded,
    load_prompt,
    model_request,
    prepare_script,
    skill_section,
    task_prompt,
)
from skillopt.envs.spreadsheetbench.evaluator import feedback_report
from skillopt.envs.spreadsheetbench.preview import preview_workbook
from skillopt.types import Message, RolloutResult

__all__ = ["extract_code", "prepare_script", "run_codegen"]

_FENCE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)```", re.S | re.I)
# Stop asking the model for another turn when less than this is left of the wall time.
_MIN_TURN_S = 10.0


def extract_code(text: str) -> str:
    """The first fenced Python block of a reply; the whole reply when it has no fence."""
    match = _FENCE.search(text)
    if match:
        return match.group(1).strip("\n")
    stripped = text.strip()
    return "" if stripped.startswith("```") else stripped


def system_prompt(skill: str) -> str:
    base = load_prompt("codegen_system").strip()
    section = skill_section(skill)
    return f"{base}\n\n{section}" if section else base + "\n"


def user_prompt(instruction: str, attributes: dict, preview: str, diagnostic: str = "") -> str:
    return task_prompt("codegen_user", instruction, attributes, preview, diagnostic)


def run_codegen(ctx: AgentContext, *, multi_turn: bool) -> RolloutResult:
    """Run the codegen agent on every test case of ``ctx.request.task`` and grade it.

    An infrastructure or model-endpoint failure part-way through yields a row with
    ``infra_error`` set that keeps what happened so far (trace, ``agent_ok``, usage).
    """
    st = RolloutState()
    return guarded(ctx, st, lambda: _run_codegen(ctx, st, multi_turn=multi_turn))


def _run_codegen(ctx: AgentContext, st: RolloutState, *, multi_turn: bool) -> RolloutResult:
    req = ctx.request
    task = req.task
    attrs = dict(task.attributes)
    max_turns = int(ctx.limits.max_turns or 30) if multi_turn else 1
    runner = CaseRunner(ctx, st)
    exec_timeout = runner.exec_timeout

    runner.write_inputs()
    preview = st.preview = preview_workbook(runner.inputs[runner.first])
    system = system_prompt(req.skill.content)
    user = user_prompt(task.instruction, attrs, preview, req.diagnostic_instruction)
    st.messages = [Message(role="system", content=system), Message(role="user", content=user)]

    first = runner.first
    for turn in range(1, max_turns + 1):
        if multi_turn and turn > 1 and ctx.remaining_s() < _MIN_TURN_S:
            break
        st.phase = "llm"
        ctx.emit(ProgressEvent(phase="model_call", turn=turn))
        t0 = time.monotonic()
        reply = ctx.model.complete(model_request(ctx, st.messages))
        st.add_time("model", t0)
        st.turns = turn
        st.usage = st.usage + reply.usage
        st.agent_ok = True
        st.messages.append(Message(role="assistant", content=reply.text))
        ctx.emit(
            ProgressEvent(phase="model_reply", turn=turn, detail=f"{reply.usage.completion_tokens} tokens")
        )
        code = extract_code(reply.text)
        st.phase = "extract"
        if not code:
            if not multi_turn:
                break
            st.messages.append(Message(role="user", content=load_prompt("codegen_retry_no_code").strip()))
            continue
        st.code = code
        st.phase = "exec"
        outcome, output = runner.run(first, code, turn)
        st.outputs = {first: (outcome, output)}
        if not multi_turn:
            break
        if not outcome.ok:
            st.messages.append(
                Message(
                    role="user",
                    content=load_prompt("codegen_retry_error").format(
                        error=error_text(outcome, exec_timeout)
                    ),
                )
            )
            continue
        if output is None:
            st.messages.append(Message(role="user", content=load_prompt("codegen_retry_no_output").strip()))
            continue
        if req.use_eval_feedback:
            verdict = runner.grade(first, output)
            if verdict.ok:
                break
            st.messages.append(Message(role="user", content=feedback_report(verdict)))
            continue
        break

    return _finish(ctx, st, runner)


def _finish(ctx: AgentContext, st: RolloutState, runner: CaseRunner) -> RolloutResult:
    """Run the final code on every case, grade each, and build the row."""
    attrs = dict(ctx.request.task.attributes)
    if not st.code:
        grades = Grades()
        fail_reason = "empty-code-block" if st.agent_ok else "no-model-reply"
        phase = "extract" if st.agent_ok else "llm"
    else:
        grades = runner.grade_all(st.code, st.turns)
        fail_reason, phase = grades.fail_reason, "eval"
    return build_row(
        ctx,
        st,
        grades,
        fail_reason=fail_reason,
        phase=phase,
        metrics={
            "code_ok": bool(st.code),
            "instruction_type": attrs.get("instruction_type", ""),
            "task_type": attrs.get("task_type", ""),
        },
        notes={
            "spreadsheet_preview": st.messages[1]
            .content.split("# Input spreadsheet preview", 1)[-1]
            .split("# Task", 1)[0]
            .strip()
        },
    )
