"""ReAct agent (reference §4.6): the model works with tools, and every tool runs INSIDE the
rollout container.

The model is called from the trusted side with two function tools:

* ``bash(cmd)`` runs ``bash -lc cmd`` in the container's workspace (the container is the
  sandbox: no network, no secrets, read-only root, non-root user), so unlike the reference no
  command filter is needed. Output (stdout, then stderr) is cut to 3800 characters with a note
  when it exceeds 4000. The env may append a check to a command's result (SpreadsheetBench: an
  auto-verify block of ``output.xlsx`` when the command mentions ``solution.py``).
* ``write_file(path, content)`` writes a file relative to the workspace; absolute paths and
  ``..`` are refused with a tool error (the rollout goes on).

The loop makes at most ``limits.max_turns`` model calls and ends at the first reply without
tool calls; then the env's :class:`ReactTask` grades what the model left in the workspace.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from skillopt.agents.common import GuardedAgent, RolloutState, exec_record, model_request
from skillopt.agents.context import AgentContext, ProgressEvent
from skillopt.agents.sandbox import ExecOutcome
from skillopt.errors import InvalidRequest
from skillopt.files import check_relative_name
from skillopt.models.base import ToolSpec
from skillopt.types import Message, RolloutResult

__all__ = [
    "BASH_DESCRIPTION",
    "BASH_TIMEOUT_S",
    "ReactAgent",
    "ReactTask",
    "ReactTools",
    "format_command_output",
    "tool_specs",
    "tool_turn",
]

#: The shell the ``bash`` tool runs (present in the runtime image).
SHELL = ("bash", "-lc")
BASH_TIMEOUT_S = 60.0
OUTPUT_LIMIT = 4000
OUTPUT_KEEP = 3800
# Stop asking the model for another turn when less than this is left of the wall time, and
# keep this much for the final runs when clipping a tool's timeout.
_MIN_TURN_S = 10.0
_RESERVE_S = 5.0
_MAX_WRITE_BYTES = 1024 * 1024


#: The ``bash`` tool's description when the env has nothing to add.
BASH_DESCRIPTION = (
    "Run a shell command (bash) in the working directory; there is no network. Returns the exit "
    "code and the output (stdout then stderr, cut after about 4000 characters)."
)


def tool_specs(bash_description: str = BASH_DESCRIPTION) -> tuple[ToolSpec, ...]:
    """The ``bash`` and ``write_file`` tools; ``bash_description`` tells the model what the
    working directory holds, which programs are there and what a command returns."""
    return (
        ToolSpec(
            name="bash",
            description=bash_description,
            parameters={
                "type": "object",
                "properties": {
                    "cmd": {"type": "string", "description": "The command, e.g. python3 solution.py"}
                },
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


class ReactTask(Protocol):
    """The env's side of a ReAct rollout (one instance per rollout)."""

    #: The ``bash`` tool's description (what the workspace holds; see :data:`BASH_DESCRIPTION`).
    bash_description: str

    def prompts(self) -> tuple[str, str]:
        """``(system, user)``; writes the files the model works on into the sandbox."""
        ...

    def after_bash(self, cmd: str, tools: ReactTools, turn: int) -> str:
        """Text appended to a command's result (``""`` for none)."""
        ...

    def after_write(self, path: str, content: str) -> str:
        """A note appended to a write's confirmation (``""`` for none)."""
        ...

    def finish(self, *, model_calls: int, stopped: str) -> RolloutResult:
        """Grade what the model left in the workspace and build the row."""
        ...


class ReactTools:
    """Executes the model's tool calls in the rollout's sandbox.

    Args:
        ctx: the rollout's context (its sandbox runs every command).
        st: the rollout's bookkeeping (executions and timings are recorded into it).
        bash_timeout_s: per-command timeout, clipped to the wall time left.
        names: the tools offered (for the unknown-tool message).
    """

    def __init__(self, ctx: AgentContext, st: RolloutState, *, bash_timeout_s: float, names: str) -> None:
        self.ctx = ctx
        self.st = st
        self.bash_timeout_s = bash_timeout_s
        self.names = names
        self.out_of_time = False
        self.task: ReactTask | None = None

    def budget(self, want: float) -> float | None:
        """``want`` clipped to the wall time left (minus a reserve); None when none is left."""
        budget = self.ctx.remaining_s() - _RESERVE_S
        if budget < 1.0:
            self.out_of_time = True
            return None
        return min(want, budget)

    def call(self, name: str, raw_args: Any, turn: int) -> str:
        """Run one tool call; every failure is a tool result the model can read."""
        if name not in ("bash", "write_file"):
            return f"ERROR: unknown tool {name!r}. Available tools: {self.names}."
        args = _parse_arguments(raw_args)
        if isinstance(args, str):
            return f"ERROR: {name}: {args}"
        return self.bash(args, turn) if name == "bash" else self.write_file(args)

    def bash(self, args: dict[str, Any], turn: int) -> str:
        cmd = args.get("cmd", args.get("command"))
        if not isinstance(cmd, str) or not cmd.strip():
            return 'ERROR: bash needs a non-empty string argument "cmd", e.g. {"cmd": "python3 solution.py"}.'
        timeout = self.budget(self.bash_timeout_s)
        if timeout is None:
            return "ERROR: not run: the rollout's wall time is used up. Stop calling tools."
        self.ctx.emit(ProgressEvent(phase="exec", turn=turn, detail=f"bash: {cmd[:80]}"))
        t0 = time.monotonic()
        outcome = self.ctx.require_sandbox().run_command([*SHELL, cmd], timeout_s=timeout)
        self.st.add_time("exec", t0)
        self.st.executions.append(exec_record(outcome, turn=turn, case="bash", code=cmd))
        text = format_command_output(outcome, timeout)
        extra = self.task.after_bash(cmd, self, turn) if self.task is not None else ""
        return f"{text}\n\n{extra}" if extra else text

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
            self.ctx.require_sandbox().write_file(name, data)
        except InvalidRequest as exc:
            return f"ERROR: cannot write {name!r}: {exc}"
        note = self.task.after_write(name, content) if self.task is not None else ""
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


def tool_turn(
    ctx: AgentContext, st: RolloutState, turn: int, tools: tuple[ToolSpec, ...]
) -> tuple[str, tuple[dict[str, Any], ...]]:
    """One model call of a tool loop: the reply's text and its (normalised) tool calls, with
    the usage, timing, trace message and progress events recorded."""
    assert ctx.model is not None
    st.phase = "llm"
    ctx.emit(ProgressEvent(phase="model_call", turn=turn))
    t0 = time.monotonic()
    reply = ctx.model.complete(model_request(ctx, st.messages, tools=tools))
    st.add_time("model", t0)
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
    return reply.text, calls


class ReactAgent(GuardedAgent):
    """ReAct over any :class:`ReactTask`.

    Args:
        make_task: builds the env's task for one rollout from the context, the state and the
            tools (which the task may use, e.g. to budget its own checks).
        bash_timeout_s: per-command timeout of the ``bash`` tool; also clipped to
            ``limits.exec_timeout_s`` and to the wall time left.
    """

    def __init__(
        self,
        make_task: Callable[[AgentContext, RolloutState, ReactTools], ReactTask],
        *,
        bash_timeout_s: float = BASH_TIMEOUT_S,
    ) -> None:
        self.make_task = make_task
        self.bash_timeout_s = bash_timeout_s

    def _run(self, ctx: AgentContext, st: RolloutState) -> RolloutResult:
        assert ctx.model is not None
        max_turns = int(ctx.limits.max_turns or 30)
        timeout = min(self.bash_timeout_s, float(ctx.limits.exec_timeout_s or self.bash_timeout_s))
        tools = ReactTools(ctx, st, bash_timeout_s=timeout, names="bash, write_file")
        task = self.make_task(ctx, st, tools)
        tools.task = task
        specs = tool_specs(task.bash_description)
        system, user = task.prompts()
        st.messages = [Message(role="system", content=system), Message(role="user", content=user)]
        model_calls = 0
        stopped = "max-turns"
        for turn in range(1, max_turns + 1):
            if (turn > 1 and ctx.remaining_s() < _MIN_TURN_S) or tools.out_of_time:
                stopped = "wall-time"
                break
            _, calls = tool_turn(ctx, st, turn, specs)
            model_calls = turn
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
        return task.finish(model_calls=model_calls, stopped=stopped)
