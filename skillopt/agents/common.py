"""What every agent shares: its bookkeeping, the target call, the interrupted-rollout row and
prompt files.

Usage::

    st = RolloutState()
    return guarded(ctx, st, lambda: body(ctx, st))   # infra/model failures -> a row with the trace
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from skillopt.agents.context import AgentContext, interrupted_info
from skillopt.agents.sandbox import ExecOutcome
from skillopt.errors import InfraError, ModelError
from skillopt.models.base import ChatRequest, ToolSpec
from skillopt.observability import tracing
from skillopt.skill.document import split_front_matter
from skillopt.skill.package import file_index
from skillopt.types import (
    ExecRecord,
    InfraErrorKind,
    InfraFailure,
    Message,
    RolloutResult,
    SkillVersion,
    Trace,
    Usage,
)

__all__ = [
    "MODEL_CALL_TIMEOUT_S",
    "GuardedAgent",
    "RolloutState",
    "exec_record",
    "guarded",
    "interrupted_row",
    "last_line",
    "model_request",
    "read_prompt",
    "skill_section",
    "skill_text",
    "with_diagnostic",
]

#: Longest single target call; clipped further to the rollout's remaining wall time.
MODEL_CALL_TIMEOUT_S = 120.0


@cache
def read_prompt(directory: Path, name: str) -> str:
    """The prompt template ``<directory>/<name>.md`` (read once per process).

    Raises:
        FileNotFoundError: no such prompt (the message names the path).
    """
    path = directory / f"{name}.md"
    if not path.is_file():
        raise FileNotFoundError(f"prompt {name!r} not found: {path}")
    return path.read_text(encoding="utf-8")


def skill_text(skill: SkillVersion) -> str:
    """What an agent is told of its skill, as the harnesses do it: SKILL.md's body (without
    its front matter), then an index of the package's other files (path, size, first line),
    never their contents. A one-file skill is its text, unchanged."""
    if not skill.files and not skill.content.startswith("---"):
        return skill.content
    _, body = split_front_matter(skill.content)
    index = file_index(skill)
    if not index:
        return body
    modules = any(f.path.startswith("scripts/") and f.path.endswith(".py") for f in skill.files)
    hint = (
        "\nA Python program can import the modules under /skill/scripts after "
        "`sys.path.insert(0, '/skill/scripts')`.\n"
        if modules
        else ""
    )
    return (
        f"{body.rstrip()}\n\n### Files of this skill\nRead them, or run the scripts, from the "
        f"read-only folder /skill when you need them:\n{index}\n{hint}"
    )


def skill_section(skill: str) -> str:
    """``## Skill`` and the skill text, or ``""`` for an empty skill."""
    return f"## Skill\n{skill.strip()}\n" if skill.strip() else ""


def with_diagnostic(text: str, diagnostic: str, *, earlier: str = "") -> str:
    """A user prompt plus the deep-reflect additions: the agent's own earlier attempt (never
    anything of the grader's) and the diagnostic instruction, when given."""
    if earlier.strip():
        text += f"\n\n# Your earlier attempt at this task\n{earlier.strip()}\n"
    if diagnostic.strip():
        text += f"\n\n# Diagnostic instruction\n{diagnostic.strip()}\n"
    return text


def last_line(text: str) -> str:
    """The last non-empty line of ``text`` (stripped, at most 200 characters)."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip()[:200] if lines else ""


def model_request(
    ctx: AgentContext, messages: list[Message], *, tools: tuple[ToolSpec, ...] = ()
) -> ChatRequest:
    """The target call of a turn: the request's model spec, the wall time left as timeout."""
    m = ctx.request.model
    return ChatRequest(
        model=m.model,
        messages=tuple(messages),
        tools=tools,
        temperature=m.temperature,
        max_output_tokens=m.max_output_tokens,
        reasoning_effort=m.reasoning_effort,
        timeout_s=min(MODEL_CALL_TIMEOUT_S, max(1.0, ctx.remaining_s())),
        stage="rollout",
        extra=m.extra,
        cache_key=_cache_key(ctx) if m.prompt_caching else "",
    )


def _cache_key(ctx: AgentContext) -> str:
    """The target's prompt-caching key: the run (the rollout id's first part), the role and the
    skill's hash, so rollouts of one skill in one run share their cached prefixes."""
    run = ctx.request.rollout_id.split("/", 1)[0][:64]
    return f"{run}:target:{ctx.request.skill.sha256[:16]}"


def exec_record(outcome: ExecOutcome, *, turn: int, case: str, code: str) -> ExecRecord:
    """The trace's record of one execution."""
    return ExecRecord(
        turn=turn,
        case=case,
        code=code,
        exit_code=outcome.exit_code,
        stdout_tail=outcome.stdout_tail,
        stderr_tail=outcome.stderr_tail,
        duration_s=outcome.duration_s,
        timed_out=outcome.timed_out,
        oom_killed=outcome.oom_killed,
    )


@dataclass
class RolloutState:
    """Mutable bookkeeping of one rollout (local to the agent run).

    ``notes`` become ``trace.notes`` (files ``predictions/<id>/<key>.txt`` for the analyst);
    ``outputs`` holds what an agent's own loop already produced per test case, so the final
    grading does not run the same code twice.
    """

    messages: list[Message] = field(default_factory=list)
    executions: list[ExecRecord] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    timings: dict[str, float] = field(default_factory=lambda: {"model": 0.0, "exec": 0.0, "grade": 0.0})
    turns: int = 0
    agent_ok: bool = False
    code: str = ""
    phase: str = "setup"
    notes: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, tuple[ExecOutcome, bytes | None]] = field(default_factory=dict)

    def add_time(self, key: str, t0: float) -> None:
        """Add the time since ``t0`` (``time.monotonic()``) to timing ``key``; a grading's
        interval is also its trace span (every agent measures its grading here)."""
        self.timings[key] = self.timings.get(key, 0.0) + time.monotonic() - t0
        if key == "grade":
            tracing.record_span("sandbox.grade", start=t0)

    def trace(self, *, messages: list[Message] | None = None, notes: dict[str, str] | None = None) -> Trace:
        """The trace so far (``messages``/``notes`` override the state's own)."""
        msgs = self.messages if messages is None else messages
        return Trace(
            messages=tuple(msgs),
            executions=tuple(self.executions),
            system_prompt=self.messages[0].content if self.messages else "",
            user_prompt=self.messages[1].content if len(self.messages) > 1 else "",
            code=self.code,
            notes=dict(self.notes if notes is None else notes),
        )


class GuardedAgent:
    """Base of the in-service agents (codegen, ReAct, QA): the skill is mounted as its plain
    text, and the agent's loop (:meth:`_run`) runs :func:`guarded`, so an infrastructure or
    model-endpoint failure part-way through yields a row with ``infra_error`` set that keeps
    what happened so far."""

    def skill_file(self, content: str) -> str:
        """The skill as mounted: the plain text."""
        return content

    def run(self, ctx: AgentContext) -> RolloutResult:
        st = RolloutState()
        return guarded(ctx, st, lambda: self._run(ctx, st))

    def _run(self, ctx: AgentContext, st: RolloutState) -> RolloutResult:
        raise NotImplementedError


def guarded(ctx: AgentContext, st: RolloutState, body: Callable[[], RolloutResult]) -> RolloutResult:
    """Run an agent's ``body``; an infrastructure or model-endpoint failure part-way through
    yields a row that keeps what happened so far (trace, ``agent_ok``, usage), with
    ``infra_error`` set unless the failure is the agent's own (a used-up token budget); see
    :func:`skillopt.agents.context.interrupted_info`."""
    try:
        return body()
    except (InfraError, ModelError) as exc:
        if isinstance(exc, ModelError) and ctx.remaining_s() <= 0:
            # The call was cut by the rollout's own deadline: a per-task timeout row, as when
            # a program in the sandbox overruns (reference §4.8), not a model outage.
            wall = ctx.limits.wall_time_s or 0
            timeout = InfraFailure(
                kind=InfraErrorKind.TIMEOUT,
                message=f"the rollout used up its wall time ({wall:.0f} s) waiting for the model",
            )
            return interrupted_row(ctx, st, timeout, f"infra-timeout: {timeout.message}")
        info, reason = interrupted_info(exc)
        return interrupted_row(ctx, st, info, reason)


def interrupted_row(
    ctx: AgentContext, st: RolloutState, info: InfraFailure | None, fail_reason: str
) -> RolloutResult:
    """The row of a rollout cut short: no score, the trace so far."""
    req = ctx.request
    return RolloutResult(
        id=req.task.id,
        rollout_id=req.rollout_id,
        phase=st.phase,
        fail_reason=fail_reason,
        agent_ok=st.agent_ok,
        n_turns=st.turns,
        trace=st.trace(),
        usage=st.usage,
        timings_s=dict(st.timings),
        infra_error=info,
    )
