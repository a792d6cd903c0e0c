"""Exec agents: the real Codex CLI (``codex_exec``) and Claude Code (``claude_code_exec``) run
inside the rollout container and work on the task there; the env grades what they leave behind
(a program, the final message) on the trusted side afterwards.

The container is on the gateway network (its only reachable address is the model gateway) and
the CLI holds a per-rollout gateway token, never a provider key. The skill is mounted read-only
where each CLI discovers skills (``.agents/skills/<name>/SKILL.md`` for Codex,
``.claude/skills/<name>/SKILL.md`` for Claude Code), rendered by :func:`render_skill_md`. Codex
runs with its own sandbox bypassed (Docker is the sandbox), stdin closed, plugins/apps/analytics
off (agent-clis.md §2, §6).

Usage (an env composes it)::

    agent = ExecAgent("codex_exec", make_task=MyExecTask, skill_md=my_renderer)
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from skillopt.agents.common import RolloutState, guarded
from skillopt.agents.context import AgentContext, ProgressEvent
from skillopt.agents.sandbox import ExecOutcome, read_output
from skillopt.errors import InvalidRequest
from skillopt.skill.document import split_front_matter
from skillopt.types import Message, RolloutResult

__all__ = [
    "CLIS",
    "CLI_APIS",
    "CliRun",
    "ExecAgent",
    "ExecTask",
    "render_skill_md",
    "run_cli",
]

#: Agent kind → the CLI it runs.
CLIS = {"codex_exec": "codex", "claude_code_exec": "claude"}
#: Agent kind → the wire API its CLI speaks (the service checks the provider matches).
CLI_APIS = {"codex_exec": "openai", "claude_code_exec": "anthropic"}
LAST_MESSAGE = ".skillopt/last_message.txt"
# The CLIs' own state (config, sessions) lives in the workspace tmpfs, created up front.
HOMES = ".skillopt/home"
_OUTPUT_CAP = 4 * 1024 * 1024
_EMPTY_SKILL = "No rules learned yet: follow the task description carefully."


def render_skill_md(
    skill: str,
    *,
    description: str,
    title: str,
    name: str = "skillopt-target",
    preamble: str = "",
) -> str:
    """SKILL.md as the CLIs expect it (reference §10.1): front matter (``name``,
    ``description``), a title, the env's preamble if any, then the skill body (a placeholder
    sentence when the skill is empty). With a preamble, the body goes under
    ``## Dynamic Guidance`` so the two stay apart. A package's SKILL.md keeps its own front
    matter (its name and description are what the CLI lists), with the body rendered as above."""
    head, body = split_front_matter(skill)
    body = body.strip() or _EMPTY_SKILL
    desc = description.replace('"', "'")
    head = head.rstrip() or f'---\nname: {name}\ndescription: "{desc}"\n---'
    parts = [head, f"# {title}"]
    if preamble.strip():
        parts += [preamble.strip(), f"## Dynamic Guidance\n\n{body}"]
    else:
        parts.append(body)
    return "\n\n".join(parts).rstrip() + "\n"


def _codex_argv(ctx: AgentContext, prompt: str) -> tuple[list[str], dict[str, str]]:
    gw = ctx.gateway
    assert gw is not None
    provider = (
        f'{{name="skillopt gateway",base_url="{gw.base_url}/v1",env_key="SKILLOPT_GATEWAY_TOKEN",'
        'wire_api="responses",request_max_retries=1,stream_max_retries=1,stream_idle_timeout_ms=300000}'
    )
    argv = [
        "codex", "exec",
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        "--ephemeral",
        "--json",
        "-o", f"/workspace/{LAST_MESSAGE}",
        "-C", "/workspace",
        "-m", gw.model,
        "-c", "model_provider=skillopt",
        "-c", f"model_providers.skillopt={provider}",
        "-c", "analytics.enabled=false",
        "--disable", "plugins",
        "--disable", "remote_plugin",
        "--disable", "apps",
        prompt,
    ]  # fmt: skip
    env = {
        "CODEX_HOME": f"/workspace/{HOMES}/codex",
        "SKILLOPT_GATEWAY_TOKEN": gw.token,
        "HOME": "/workspace",
    }
    return argv, env


def _claude_argv(ctx: AgentContext, prompt: str) -> tuple[list[str], dict[str, str]]:
    gw = ctx.gateway
    assert gw is not None
    argv = [
        "claude", "-p", prompt,
        "--output-format", "stream-json",
        "--verbose",
        "--model", gw.model,
        "--permission-mode", "bypassPermissions",
        "--allowedTools", "Bash Read Write Edit Skill",
    ]  # fmt: skip
    env = {
        "HOME": f"/workspace/{HOMES}/claude",
        "ANTHROPIC_BASE_URL": gw.base_url,
        "ANTHROPIC_API_KEY": gw.token,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
    }
    return argv, env


def _events(stdout: str) -> list[dict[str, Any]]:
    out = []
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out


def _codex_messages(events: list[dict[str, Any]]) -> tuple[list[Message], int, str]:
    """Trace messages, tool calls and the final text from Codex's ``--json`` events."""
    msgs: list[Message] = []
    calls = 0
    final = ""
    for ev in events:
        item = ev.get("item") or {}
        if ev.get("type") != "item.completed":
            continue
        kind = item.get("type")
        if kind == "agent_message":
            final = item.get("text", "")
            msgs.append(Message(role="assistant", content=final))
        elif kind == "command_execution":
            calls += 1
            msgs.append(
                Message(
                    role="tool",
                    name="command_execution",
                    content=f"$ {item.get('command', '')}\n(exit {item.get('exit_code')})\n{item.get('aggregated_output', '')}",
                )
            )
        elif kind == "file_change":
            calls += 1
            msgs.append(Message(role="tool", name="file_change", content=json.dumps(item.get("changes", []))))
        elif kind in ("reasoning", "error"):
            msgs.append(
                Message(
                    role="assistant" if kind == "reasoning" else "system", content=str(item.get("text", item))
                )
            )
    return msgs, calls, final


def _claude_messages(events: list[dict[str, Any]]) -> tuple[list[Message], int, str]:
    """Trace messages, tool calls and the final text from Claude Code's stream-json events."""
    msgs: list[Message] = []
    calls = 0
    final = ""
    for ev in events:
        kind = ev.get("type")
        if kind == "assistant":
            for block in (ev.get("message") or {}).get("content") or []:
                if block.get("type") == "text":
                    msgs.append(Message(role="assistant", content=block.get("text", "")))
                elif block.get("type") == "tool_use":
                    calls += 1
                    msgs.append(
                        Message(
                            role="assistant",
                            content="",
                            tool_calls=(
                                {
                                    "id": block.get("id", ""),
                                    "name": block.get("name", ""),
                                    "arguments": json.dumps(block.get("input", {})),
                                },
                            ),
                        )
                    )
        elif kind == "user":
            for block in (ev.get("message") or {}).get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    content = block.get("content")
                    text = content if isinstance(content, str) else json.dumps(content)
                    msgs.append(Message(role="tool", tool_call_id=block.get("tool_use_id", ""), content=text))
        elif kind == "result":
            final = ev.get("result", "") or final
    return msgs, calls, final


@dataclass(frozen=True, kw_only=True)
class CliRun:
    """What one CLI run left: its process outcome, the final message and its tool calls."""

    cli: str
    outcome: ExecOutcome
    final: str
    calls: int

    @property
    def exit_label(self) -> str:
        """The exit code as text, or ``timeout``."""
        return "timeout" if self.outcome.timed_out else str(self.outcome.exit_code)

    def notes(self) -> dict[str, str]:
        """Trace notes (``predictions/<id>/<cli>_*.txt``) for whoever looks into the run."""
        return {
            f"{self.cli}_stderr_tail": self.outcome.stderr_tail[-20000:],
            f"{self.cli}_final_message": self.final,
            f"{self.cli}_exit": self.exit_label,
        }

    def metrics(self) -> dict[str, Any]:
        """Row metrics of the CLI run."""
        return {
            "cli": self.cli,
            "cli_exit_code": self.outcome.exit_code,
            "cli_timed_out": self.outcome.timed_out,
            "tool_calls": self.calls,
        }


def run_cli(ctx: AgentContext, st: RolloutState, agent: str, prompt: str, *, reserve_s: float) -> CliRun:
    """Run the agent CLI of ``agent`` in the workspace with ``prompt`` and read back its trace.

    ``st.messages`` gets the CLI's messages appended, ``st.turns`` its tool calls and
    ``st.agent_ok`` whether the model answered at all. The CLI gets the wall time left minus
    ``reserve_s`` (kept for grading afterwards), at least 10 s.
    """
    sandbox = ctx.require_sandbox()
    cli = CLIS[agent]
    for name in ("codex", "claude"):
        sandbox.write_file(f"{HOMES}/{name}/.keep", b"")
    argv, env = (_codex_argv if cli == "codex" else _claude_argv)(ctx, prompt)
    budget = max(10.0, ctx.remaining_s() - reserve_s)
    st.phase = "llm"
    ctx.emit(ProgressEvent(phase="model_call", turn=1, detail=f"{cli} started"))
    t0 = time.monotonic()
    outcome = sandbox.run_command(argv, timeout_s=budget, env=env, output_limit_bytes=_OUTPUT_CAP)
    st.add_time("model", t0)
    failure = ctx.gateway.provider_error() if ctx.gateway is not None else None
    if failure is not None:
        raise failure  # the provider refused or failed: nothing the CLI made of that is graded
    events = _events(outcome.stdout_tail)
    msgs, calls, final = (_codex_messages if cli == "codex" else _claude_messages)(events)
    if cli == "codex":
        last = read_output(sandbox, LAST_MESSAGE, max_bytes=1 << 20)
        final = last.decode("utf-8", "replace").strip() if last else final
    st.messages += msgs
    st.turns = calls
    st.agent_ok = bool(events) and any(m.role == "assistant" for m in msgs)
    ctx.emit(
        ProgressEvent(
            phase="model_reply", turn=1, detail=f"{cli} exit {outcome.exit_code}, {calls} tool calls"
        )
    )
    return CliRun(cli=cli, outcome=outcome, final=final, calls=calls)


class ExecTask(Protocol):
    """The env's side of an exec-agent rollout (one instance per rollout)."""

    def prepare(self, cli: str) -> tuple[str, str]:
        """Write the workspace files; return ``(task text for the trace, the CLI's prompt)``."""
        ...

    def finish(self, run: CliRun) -> RolloutResult:
        """Grade what the CLI left (files in the sandbox, its final message) and build the row."""
        ...


class ExecAgent:
    """An agent CLI over any :class:`ExecTask`.

    Args:
        agent: ``codex_exec`` or ``claude_code_exec``.
        make_task: builds the env's task for one rollout from the context and the state.
        skill_md: renders the skill as the CLI's SKILL.md (front matter, title, preamble).
        reserve_s: wall time kept back from the CLI for grading afterwards.
    """

    def __init__(
        self,
        agent: str,
        *,
        make_task: Callable[[AgentContext, RolloutState], ExecTask],
        skill_md: Callable[[str], str],
        reserve_s: float = 30.0,
    ) -> None:
        if agent not in CLIS:
            raise ValueError(f"unknown exec agent {agent!r}; known: {', '.join(CLIS)}")
        self.agent = agent
        self.make_task = make_task
        self.skill_md = skill_md
        self.reserve_s = reserve_s

    def skill_file(self, content: str) -> str:
        """SKILL.md as the CLI discovers it (see :func:`render_skill_md`)."""
        return self.skill_md(content)

    def run(self, ctx: AgentContext) -> RolloutResult:
        """Let the CLI work in the container, then grade on the trusted side."""
        if ctx.gateway is None:
            raise InvalidRequest(f"{self.agent} needs the model gateway (the host did not provide it)")
        st = RolloutState()
        return guarded(ctx, st, lambda: self._run(ctx, st))

    def _run(self, ctx: AgentContext, st: RolloutState) -> RolloutResult:
        cli = CLIS[self.agent]
        task = self.make_task(ctx, st)
        task_md, prompt = task.prepare(cli)
        st.messages = [
            Message(role="system", content=f"[{cli} harness] {cli} {'exec' if cli == 'codex' else '-p'}"),
            Message(role="user", content=task_md),
        ]
        run = run_cli(ctx, st, self.agent, prompt, reserve_s=self.reserve_s)
        return task.finish(run)
