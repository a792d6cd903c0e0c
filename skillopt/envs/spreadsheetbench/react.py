"""SpreadsheetBench ReAct agent (reference §4.6): the model explores and solves the task with
tools, and every tool runs INSIDE the rollout container.

The model is called from the trusted side with two function tools:

* ``bash(cmd)`` runs ``bash -lc cmd`` in the container's workspace (the container is the
  sandbox: no network, no secrets, read-only root, non-root user), so unlike the reference no
  command filter is needed. Output (stdout, then stderr) is cut to 3800 characters with a note
  when it exceeds 4000. A command mentioning ``solution.py`` gets an auto-verify block, computed
  by :mod:`.react_verify` inside the container.
* ``write_file(path, content)`` writes a file relative to the workspace; absolute paths and
  ``..`` are refused with a tool error (the rollout goes on).

The loop makes at most ``limits.max_turns`` model calls and ends at the first reply without
tool calls. Then ``solution.py`` is read back from the workspace and run on every test case
(:class:`.cases.CaseRunner`, fresh inputs in a folder the model never saw) and graded here.

Workspace as the model sees it::

    input.xlsx     the first test case's input
    solution.py    written by the model (INPUT_PATH = "input.xlsx", OUTPUT_PATH = "output.xlsx")
    output.xlsx    what solution.py saved when the model ran it
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from skillopt.envs.base import AgentContext, ProgressEvent
from skillopt.envs.spreadsheetbench.cases import (
    WORKSPACE,
    CaseRunner,
    Grades,
    RolloutState,
    build_row,
    exec_record,
    guarded,
    load_prompt,
    model_request,
    skill_section,
    task_prompt,
)
from skillopt.envs.spreadsheetbench.preview import preview_workbook
from skillopt.errors import InvalidRequest, OutputLimitExceeded
from skillopt.executor import ExecOutcome
from skillopt.files import check_relative_name
from skillopt.models.base import ToolSpec
from skillopt.types import Message, RolloutResult

__all__ = ["TOOLS", "format_command_output", "run_react", "system_prompt"]

#: The shell the ``bash`` tool runs (present in the runtime image).
SHELL = ("bash", "-lc")
BASH_TIMEOUT_S = 60.0
VERIFY_TIMEOUT_S = 30.0
OUTPUT_LIMIT = 4000
OUTPUT_KEEP = 3800
_VERIFY_KEEP = 3000
# Stop asking the model for another turn when less than this is left of the wall time, and
# keep this much for the final runs when clipping a tool's timeout.
_MIN_TURN_S = 10.0
_RESERVE_S = 5.0
_MAX_WRITE_BYTES = 1024 * 1024
_MAX_SOLUTION_BYTES = 1024 * 1024

TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="bash",
        description=(
            "Run a shell command (bash) in the working directory, which holds input.xlsx. python3 with "
            "openpyxl and pandas is available; there is no network. Returns the exit code and the output "
            "(stdout then stderr, cut after about 4000 characters). Running solution.py also returns an "
            "automatic check of output.xlsx."
        ),
        parameters={
            "type": "object",
            "properties": {"cmd": {"type": "string", "description": "The command, e.g. python3 solution.py"}},
            "required": ["cmd"],
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        name="write_file",
        description=(
            "Create or replace a text file. The path is relative to the working directory "
            "(e.g. solution.py); absolute paths and '..' are refused."
        ),
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Relative path, e.g. solution.py"},
                "content": {"type": "string", "description": "The complete file content"},
            },
            "required": ["path", "content"],
            "additionalProperties": False,
        },
    ),
)
_TOOL_NAMES = ", ".join(t.name for t in TOOLS)


@cache
def _verify_source() -> str:
    return (Path(__file__).with_name("react_verify.py")).read_text(encoding="utf-8")


def system_prompt(skill: str) -> str:
    text = load_prompt("react_system").replace("{critical_rules}", load_prompt("react_rules").strip())
    return text.replace("{skill_section}", skill_section(skill)).strip() + "\n"


def format_command_output(outcome: ExecOutcome, timeout_s: float) -> str:
    """The ``bash`` tool's result: a status line, then stdout and stderr (cut when long)."""
    if outcome.oom_killed:
        status = "[killed: out of memory (the container's memory limit was exceeded)]"
    elif outcome.timed_out:
        status = f"[timed out after {timeout_s:.0f} s; the command was killed]"
    elif outcome.signal:
        status = f"[killed by signal {outcome.signal}]"
    else:
        status = f"[exit code {outcome.exit_code}]"
    out, err = outcome.stdout_tail, outcome.stderr_tail
    text = out if not err else (out.rstrip("\n") + "\n" if out.strip() else "") + err
    if len(text) > OUTPUT_LIMIT:
        total = (
            f"{outcome.stdout_bytes + outcome.stderr_bytes} bytes"
            if outcome.output_truncated
            else f"{len(text)} characters"
        )
        text = f"{text[:OUTPUT_KEEP]}\n... [output truncated: {total} in total, showing the first {OUTPUT_KEEP} characters]"
    return f"{status}\n{text.rstrip()}" if text.strip() else f"{status}\n(no output)"


def _parse_arguments(raw: Any) -> dict[str, Any] | str:
    """The call's arguments as a dict, or an error text."""
    if isinstance(raw, Mapping):
        return dict(raw)
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    if not isinstance(raw, str):
        return f"arguments must be a JSON object, got {type(raw).__name__}"
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return f"the arguments are not valid JSON ({exc.msg} at position {exc.pos}): {raw[:200]!r}"
    if not isinstance(value, dict):
        return f"the arguments must be a JSON object, got {type(value).__name__}"
    return value


class _Tools:
    """Executes the model's tool calls in the rollout's sandbox."""

    def __init__(
        self, ctx: AgentContext, st: RolloutState, *, bash_timeout_s: float, verify_timeout_s: float
    ):
        self.ctx = ctx
        self.st = st
        self.bash_timeout_s = bash_timeout_s
        self.verify_timeout_s = verify_timeout_s
        self.out_of_time = False

    def _budget(self, want: float) -> float | None:
        """``want`` clipped to the wall time left (minus a reserve); None when none is left."""
        budget = self.ctx.remaining_s() - _RESERVE_S
        if budget < 1.0:
            self.out_of_time = True
            return None
        return min(want, budget)

    def call(self, name: str, raw_args: Any, turn: int) -> str:
        if name not in ("bash", "write_file"):
            return f"ERROR: unknown tool {name!r}. Available tools: {_TOOL_NAMES}."
        args = _parse_arguments(raw_args)
        if isinstance(args, str):
            return f"ERROR: {name}: {args}"
        return self.bash(args, turn) if name == "bash" else self.write_file(args)

    def bash(self, args: dict[str, Any], turn: int) -> str:
        cmd = args.get("cmd", args.get("command"))
        if not isinstance(cmd, str) or not cmd.strip():
            return 'ERROR: bash needs a non-empty string argument "cmd", e.g. {"cmd": "python3 solution.py"}.'
        timeout = self._budget(self.bash_timeout_s)
        if timeout is None:
            return "ERROR: not run: the rollout's wall time is used up. Stop calling tools."
        self.ctx.emit(ProgressEvent(phase="exec", turn=turn, detail=f"bash: {cmd[:80]}"))
        t0 = time.monotonic()
        outcome = self.ctx.sandbox.run_command([*SHELL, cmd], timeout_s=timeout)
        self.st.add_time("exec", t0)
        self.st.executions.append(exec_record(outcome, turn=turn, case="bash", code=cmd))
        text = format_command_output(outcome, timeout)
        if "solution.py" in cmd:
            text += "\n\n" + self.verify()
        return text

    def verify(self) -> str:
        """The auto-verify block, computed inside the container."""
        timeout = self._budget(self.verify_timeout_s)
        if timeout is None:
            return "[auto-verify] skipped: the rollout's wall time is used up"
        t0 = time.monotonic()
        outcome = self.ctx.sandbox.run_command(["python3", "-c", _verify_source()], timeout_s=timeout)
        self.st.add_time("exec", t0)
        text = outcome.stdout_tail.strip()
        if not outcome.ok:
            problem = (
                "timed out"
                if outcome.timed_out
                else (outcome.stderr_tail.strip() or f"exit {outcome.exit_code}")
            )
            text = f"{text}\n[auto-verify] the check itself failed: {problem[-500:]}".strip()
        if len(text) > _VERIFY_KEEP:
            text = text[:_VERIFY_KEEP] + "\n... [auto-verify output truncated]"
        return text

    def write_file(self, args: dict[str, Any]) -> str:
        path, content = args.get("path"), args.get("content")
        if not isinstance(path, str) or not isinstance(content, str):
            return 'ERROR: write_file needs string arguments "path" and "content".'
        try:
            name = check_relative_name(path, what="path")
        except InvalidRequest as exc:
            return f"ERROR: write_file refused: {exc}. Use a path relative to the working directory, e.g. 'solution.py'."
        data = content.encode("utf-8", "replace")
        if len(data) > _MAX_WRITE_BYTES:
            return (
                f"ERROR: write_file refused: {len(data)} bytes is more than the {_MAX_WRITE_BYTES} allowed."
            )
        try:
            self.ctx.sandbox.write_file(name, data)
        except InvalidRequest as exc:
            return f"ERROR: cannot write {name!r}: {exc}"
        note = ""
        if name == "solution.py" and ("INPUT_PATH" not in content or "OUTPUT_PATH" not in content):
            note = (
                "\nNote: solution.py should read INPUT_PATH and save to OUTPUT_PATH; the grader sets both "
                "to other files, so a script that does not use them fails on the other test cases."
            )
        return f"Wrote {len(data)} bytes to {name}.{note}"


def _normalise_calls(calls: Any, turn: int) -> tuple[dict[str, Any], ...]:
    """Tool calls as ``{id, name, arguments}`` with an id on each (some servers omit them)."""
    out = []
    for i, c in enumerate(calls or ()):
        args = c.get("arguments")
        out.append(
            {
                "id": str(c.get("id") or f"call_{turn}_{i}"),
                "name": str(c.get("name") or ""),
                "arguments": args if isinstance(args, str) else json.dumps(args if args is not None else {}),
            }
        )
    return tuple(out)


def run_react(
    ctx: AgentContext,
    *,
    bash_timeout_s: float = BASH_TIMEOUT_S,
    verify_timeout_s: float = VERIFY_TIMEOUT_S,
) -> RolloutResult:
    """Run the ReAct agent on ``ctx.request.task`` and grade its ``solution.py`` on every case.

    An infrastructure or model-endpoint failure part-way through yields a row with
    ``infra_error`` set that keeps what happened so far (trace, ``agent_ok``, usage).

    Args:
        ctx: the rollout's context.
        bash_timeout_s: per-command timeout of the ``bash`` tool; also clipped to
            ``limits.exec_timeout_s`` and to the wall time left.
        verify_timeout_s: timeout of the auto-verify check.
    """
    st = RolloutState()
    return guarded(
        ctx,
        st,
        lambda: _run_react(ctx, st, bash_timeout_s=bash_timeout_s, verify_timeout_s=verify_timeout_s),
    )


def _run_react(
    ctx: AgentContext, st: RolloutState, *, bash_timeout_s: float, verify_timeout_s: float
) -> RolloutResult:
    req = ctx.request
    task = req.task
    attrs = dict(task.attributes)
    sandbox = ctx.sandbox
    max_turns = int(ctx.limits.max_turns or 30)
    # The final runs use a folder created after the loop, so nothing the model left in the
    # workspace (a stale output.xlsx, an edited input) can stand in for a case's output.
    runner = CaseRunner(ctx, st, root=f"grading-{secrets.token_hex(4)}", env={"PYTHONPATH": WORKSPACE})
    tools = _Tools(
        ctx,
        st,
        bash_timeout_s=min(bash_timeout_s, runner.exec_timeout),
        verify_timeout_s=verify_timeout_s,
    )

    first_input = runner.inputs[runner.first]
    sandbox.write_file("input.xlsx", first_input)
    st.preview = preview_workbook(first_input)
    system = system_prompt(req.skill.content)
    user = task_prompt("react_user", task.instruction, attrs, st.preview, req.diagnostic_instruction)
    st.messages = [Message(role="system", content=system), Message(role="user", content=user)]

    model_calls = 0
    stopped = "max-turns"
    for turn in range(1, max_turns + 1):
        if (turn > 1 and ctx.remaining_s() < _MIN_TURN_S) or tools.out_of_time:
            stopped = "wall-time"
            break
        st.phase = "llm"
        ctx.emit(ProgressEvent(phase="model_call", turn=turn))
        t0 = time.monotonic()
        reply = ctx.model.complete(model_request(ctx, st.messages, tools=TOOLS))
        st.add_time("model", t0)
        model_calls = turn
        st.usage = st.usage + reply.usage
        st.agent_ok = True
        calls = _normalise_calls(reply.tool_calls, turn)
        st.messages.append(Message(role="assistant", content=reply.text, tool_calls=calls))
        ctx.emit(
            ProgressEvent(
                phase="model_reply",
                turn=turn,
                detail=f"{reply.usage.completion_tokens} tokens, {len(calls)} tool call(s)",
            )
        )
        if not calls:
            stopped = "final-answer"
            break
        st.phase = "tools"
        for call in calls:
            st.turns += 1
            result = tools.call(call["name"], call["arguments"], turn)
            st.messages.append(
                Message(role="tool", content=result, tool_call_id=call["id"], name=call["name"])
            )

    grades = Grades()
    fail_reason, phase = "", "eval"
    code = ""
    try:
        raw = sandbox.read_file("solution.py", max_bytes=_MAX_SOLUTION_BYTES) if st.agent_ok else None
    except OutputLimitExceeded:
        raw, fail_reason, phase = None, f"solution-too-large: more than {_MAX_SOLUTION_BYTES} bytes", "agent"
    if raw is not None:
        code = raw.decode("utf-8", "replace")
    st.code = code
    if not st.agent_ok:
        fail_reason, phase = "no-model-reply", "llm"
    elif not code.strip() and not fail_reason:
        fail_reason, phase = "no-solution", "agent"
    elif code.strip():
        ctx.emit(ProgressEvent(phase="grading", turn=model_calls, detail=f"{len(runner.cases)} case(s)"))
        runner.write_inputs()
        grades = runner.grade_all(code, model_calls)
        fail_reason = grades.fail_reason
    return build_row(
        ctx,
        st,
        grades,
        fail_reason=fail_reason,
        phase=phase,
        metrics={
            "n_model_calls": model_calls,
            "n_tool_calls": st.turns,
            "stopped": stopped,
            "instruction_type": attrs.get("instruction_type", ""),
            "task_type": attrs.get("task_type", ""),
        },
        notes={"spreadsheet_preview": st.preview.strip()},
    )
