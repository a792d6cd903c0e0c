"""The corpus-tools agent: the model answers a question from a read-only document folder with
three function tools, ``glob``, ``read`` and ``grep``, and every tool call runs INSIDE the
rollout container (:mod:`skillopt.agents.corpus_tools_program`), never on the host.

When the skill package has scripts, a fourth tool, ``run_script``, runs one of them (by its
path under ``/skill/scripts/``, with arguments) in the container, output capped.

The loop (OfficeQA's, reference §5.5): at most ``max_tool_turns`` model calls; a reply with tool
calls gets their results and another turn; a reply with an ``<answer>`` tag ends the episode and
is graded; a reply with neither ends it too (graded as it stands, usually a miss). The env
supplies a :class:`CorpusTask`: the prompts, the corpus files (written under ``docs/`` and made
read-only before the first call), the tool budget and the trusted grading.

Usage (an env composes it)::

    agent = CorpusToolsAgent(lambda ctx: MyCorpusTask(ctx))
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Protocol

from skillopt.agents.common import GuardedAgent, RolloutState, exec_record
from skillopt.agents.context import AgentContext, ProgressEvent
from skillopt.agents.qa import Verdict, has_answer_tag, qa_row
from skillopt.agents.react import _parse_arguments, tool_turn
from skillopt.models.base import ToolSpec
from skillopt.types import Message, RolloutResult

__all__ = ["CORPUS_DIR", "RUN_SCRIPT_SPEC", "TOOL_SPECS", "CorpusTask", "CorpusToolsAgent", "program_source"]

#: Where the corpus lives in the workspace (tool paths are relative to it).
CORPUS_DIR = "docs"
#: Seconds one tool call may take in the container.
TOOL_TIMEOUT_S = 30.0
_OUTPUT_LIMIT = 16 * 1024
_MIN_TURN_S = 5.0


@cache
def program_source() -> str:
    """The tool program's source (run with ``python3 -I -c``)."""
    return (Path(__file__).parent / "corpus_tools_program.py").read_text(encoding="utf-8")


def _spec(name: str, description: str, properties: dict, required: list[str]) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=description,
        parameters={
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        },
    )


TOOL_SPECS: tuple[ToolSpec, ...] = (
    _spec(
        "glob",
        'List corpus files whose name matches a shell pattern (at most 50), e.g. "*1941*".',
        {
            "pattern": {
                "type": "string",
                "description": "A file-name pattern, e.g. treasury_bulletin_1941_*.txt",
            }
        },
        ["pattern"],
    ),
    _spec(
        "read",
        "Read lines of a corpus file (at most 400 lines and 4000 characters per call); pages are "
        "separated by '[page break]' lines. A file of your skill is read by its path under /skill/.",
        {
            "path": {"type": "string", "description": "A file name as glob lists it"},
            "start": {"type": "integer", "description": "First line, 1-based (default 1)"},
            "limit": {"type": "integer", "description": "Number of lines (default 80)"},
        },
        ["path"],
    ),
    _spec(
        "grep",
        "Find lines containing a literal text (case-insensitive) in one file or the whole corpus "
        "(at most 20 matches, each with its line and page number).",
        {
            "pattern": {"type": "string", "description": "Literal text to look for, e.g. national defense"},
            "path": {"type": "string", "description": "A file name; empty = every file"},
        },
        ["pattern"],
    ),
)
#: Offered when the skill package has scripts: runs one of them in the container.
RUN_SCRIPT_SPEC = _spec(
    "run_script",
    "Run a script of your skill (a file under /skill/scripts/) with arguments, in the working "
    "directory; returns its exit code and output (stdout then stderr, cut after 16 KiB).",
    {
        "path": {"type": "string", "description": "The script, e.g. /skill/scripts/convert.py"},
        "args": {"type": "array", "items": {"type": "string"}, "description": "Its arguments"},
    },
    ["path"],
)
_NAMES = ", ".join(s.name for s in TOOL_SPECS)
_MAX_ARGS = 32
_MAX_ARG_CHARS = 2000


class CorpusTask(Protocol):
    """The env's side of a corpus-tools rollout (one instance per rollout)."""

    def prompts(self) -> tuple[str, str]:
        """``(system, user)`` of the first turn."""
        ...

    def corpus_files(self) -> Mapping[str, bytes]:
        """Name (relative, under ``docs/``) → content of the documents the tools search."""
        ...

    def max_tool_turns(self) -> int:
        """Model calls allowed."""
        ...

    def grade(self, response: str) -> Verdict:
        """Grade the final reply (trusted side only)."""
        ...


class CorpusToolsAgent(GuardedAgent):
    """The corpus-tools loop over any :class:`CorpusTask` (see the module docstring)."""

    def __init__(self, make_task: Callable[[AgentContext], CorpusTask]) -> None:
        self.make_task = make_task

    def _run(self, ctx: AgentContext, st: RolloutState) -> RolloutResult:
        assert ctx.model is not None
        task = self.make_task(ctx)
        self._stage_corpus(ctx, st, task)
        system, user = task.prompts()
        st.messages = [Message(role="system", content=system), Message(role="user", content=user)]
        max_turns = min(task.max_tool_turns(), int(ctx.limits.max_turns or task.max_tool_turns()))
        scripts = _scripts(ctx)
        tools = (*TOOL_SPECS, RUN_SCRIPT_SPEC) if scripts else TOOL_SPECS
        response, stopped, tool_calls = "", "max-tool-turns", 0
        for turn in range(1, max(1, max_turns) + 1):
            if turn > 1 and ctx.remaining_s() < _MIN_TURN_S:
                stopped = "wall-time"
                break
            text, calls = tool_turn(ctx, st, turn, tools)
            st.turns = turn
            if text.strip():
                response = text
            if not calls:
                stopped = "answer" if has_answer_tag(text) else "no-tool-call-no-answer"
                break
            st.phase = "tools"
            for call in calls:
                tool_calls += 1
                if call["name"] == "run_script" and scripts:
                    result = self._run_script(ctx, st, call["arguments"], turn, scripts)
                else:
                    result = self._call(ctx, st, call["name"], call["arguments"], turn)
                st.messages.append(
                    Message(role="tool", content=result, tool_call_id=call["id"], name=call["name"])
                )
        st.notes["stopped"] = stopped
        metrics = {"tool_calls": tool_calls, "stopped": stopped}
        if not has_answer_tag(response) and stopped != "no-tool-call-no-answer":
            st.phase = "extract"
            return qa_row(
                ctx, st, None, response=response, metrics=metrics, fail_reason=f"no-answer: {stopped}"
            )
        st.phase = "eval"
        t0 = time.monotonic()
        verdict = task.grade(response)
        st.add_time("grade", t0)
        return qa_row(ctx, st, verdict, response=response, metrics=metrics)

    def _stage_corpus(self, ctx: AgentContext, st: RolloutState, task: CorpusTask) -> None:
        """Write the documents under ``docs/`` and make them read-only."""
        sandbox = ctx.require_sandbox()
        t0 = time.monotonic()
        for name, data in task.corpus_files().items():
            sandbox.write_file(f"{CORPUS_DIR}/{name}", data)
        outcome = sandbox.run_command(["chmod", "-R", "a-w", CORPUS_DIR], timeout_s=TOOL_TIMEOUT_S)
        st.add_time("exec", t0)
        if not outcome.ok:
            st.executions.append(exec_record(outcome, turn=0, case="corpus", code="chmod -R a-w docs"))

    def _call(self, ctx: AgentContext, st: RolloutState, name: str, raw_args: object, turn: int) -> str:
        """One tool call in the container; every failure is a result the model can read."""
        if name not in ("glob", "read", "grep"):
            return f"ERROR: unknown tool {name!r}. Available tools: {_NAMES}."
        args = _parse_arguments(raw_args)
        if isinstance(args, str):
            return f"ERROR: {name}: {args}"
        timeout = min(TOOL_TIMEOUT_S, ctx.remaining_s() - 1.0)
        if timeout < 1.0:
            return "ERROR: not run: the rollout's wall time is used up. Answer now."
        encoded = json.dumps(args)
        ctx.emit(ProgressEvent(phase="exec", turn=turn, detail=f"{name} {encoded[:80]}"))
        t0 = time.monotonic()
        outcome = ctx.require_sandbox().run_command(
            ["python3", "-I", "-c", program_source(), CORPUS_DIR, name, encoded],
            timeout_s=timeout,
            output_limit_bytes=_OUTPUT_LIMIT,
        )
        st.add_time("exec", t0)
        st.executions.append(exec_record(outcome, turn=turn, case=name, code=f"{name} {encoded}"))
        if outcome.timed_out:
            return f"ERROR: {name} timed out after {timeout:.0f} s; narrow the call."
        if not outcome.ok:
            return f"ERROR: {name} failed (exit {outcome.exit_code}): {outcome.stderr_tail[-500:]}"
        return outcome.stdout_tail.rstrip() or "(no output)"

    def _run_script(
        self, ctx: AgentContext, st: RolloutState, raw_args: object, turn: int, scripts: frozenset[str]
    ) -> str:
        """Run one of the package's scripts from its read-only mount; a refusal is a result."""
        args = _parse_arguments(raw_args)
        if isinstance(args, str):
            return f"ERROR: run_script: {args}"
        path = str(args.get("path", "")).strip()
        rel = path[len(SKILL_ROOT) + 1 :] if path.startswith(SKILL_ROOT + "/") else path
        if rel not in scripts:
            listed = ", ".join(f"{SKILL_ROOT}/{p}" for p in sorted(scripts))
            return f"ERROR: run_script: {path!r} is not a script of your skill (scripts: {listed})"
        argv_in = args.get("args") or []
        if not isinstance(argv_in, list) or not all(isinstance(a, str) for a in argv_in):
            return "ERROR: run_script: args must be a list of strings"
        if len(argv_in) > _MAX_ARGS or any(len(a) > _MAX_ARG_CHARS for a in argv_in):
            return f"ERROR: run_script: at most {_MAX_ARGS} arguments of {_MAX_ARG_CHARS} characters"
        timeout = min(TOOL_TIMEOUT_S, ctx.remaining_s() - 1.0)
        if timeout < 1.0:
            return "ERROR: not run: the rollout's wall time is used up. Answer now."
        argv = [*_interpreter(rel), f"{SKILL_ROOT}/{rel}", *argv_in]
        ctx.emit(ProgressEvent(phase="exec", turn=turn, detail=f"run_script {rel}"))
        t0 = time.monotonic()
        outcome = ctx.require_sandbox().run_command(argv, timeout_s=timeout, output_limit_bytes=_OUTPUT_LIMIT)
        st.add_time("exec", t0)
        st.executions.append(exec_record(outcome, turn=turn, case="run_script", code=" ".join(argv)))
        if outcome.timed_out:
            return f"ERROR: {rel} timed out after {timeout:.0f} s"
        output = (outcome.stdout_tail + ("\n" + outcome.stderr_tail if outcome.stderr_tail else "")).strip()
        return f"exit {outcome.exit_code}\n{output or '(no output)'}"


#: Where the rollout container mounts the skill package (read-only).
SKILL_ROOT = "/skill"


def _scripts(ctx: AgentContext) -> frozenset[str]:
    """The package's files under ``scripts/`` (what ``run_script`` may run)."""
    skill = ctx.request.skill
    return frozenset(
        f.path for f in (skill.files if skill is not None else ()) if f.path.startswith("scripts/")
    )


def _interpreter(rel: str) -> list[str]:
    """How a script is started: by its language's interpreter, else as an executable."""
    if rel.endswith(".py"):
        return ["python3"]
    if rel.endswith((".sh", ".bash")):
        return ["bash"]
    return []
