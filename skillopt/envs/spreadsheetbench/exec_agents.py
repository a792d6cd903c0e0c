"""Exec agents: the real Codex CLI (``codex_exec``) and Claude Code (``claude_code_exec``) run
inside the rollout container and solve the task there; the service grades ``solution.py`` on
every test case afterwards.

The container is on the gateway network (its only reachable address is the model gateway) and
the CLI holds a per-rollout gateway token, never a provider key. The skill is mounted read-only
where each CLI discovers skills (``.agents/skills/<name>/SKILL.md`` for Codex,
``.claude/skills/<name>/SKILL.md`` for Claude Code). Codex runs with its own sandbox bypassed
(Docker is the sandbox), stdin closed, plugins/apps/analytics off (agent-clis.md §2, §6).

Workspace::

    task.md            instruction, preview and the harness notes
    input.xlsx         case 1's input
    run_solution.py    runs solution.py on input.xlsx -> output.xlsx (for the agent to check)
    solution.py        what the agent writes; graded per case under cases/<n>/ afterwards
"""

from __future__ import annotations

import json
import time
from typing import Any

from skillopt.envs.base import AgentContext, ProgressEvent
from skillopt.envs.spreadsheetbench.cases import (
    CaseRunner,
    Grades,
    RolloutState,
    build_row,
    guarded,
    load_prompt,
    task_prompt,
)
from skillopt.envs.spreadsheetbench.codegen import extract_code
from skillopt.envs.spreadsheetbench.preview import preview_workbook
from skillopt.errors import InvalidRequest
from skillopt.types import Message, RolloutResult

__all__ = ["CLIS", "render_skill_md", "run_exec_agent"]

CLIS = {"codex_exec": "codex", "claude_code_exec": "claude"}
_LAST_MESSAGE = ".skillopt/last_message.txt"
# The CLIs' own state (config, sessions) lives in the workspace tmpfs, created up front.
_HOMES = ".skillopt/home"
_OUTPUT_CAP = 4 * 1024 * 1024
# Time kept back from the CLI for grading every case afterwards.
_GRADING_RESERVE_S = 30.0
_RUN_SOLUTION = """\
# Runs solution.py on input.xlsx and saves output.xlsx (the harness defines the two paths).
import re, runpy, sys
src = open("solution.py", encoding="utf-8").read()
src = re.sub(r"^([ \\t]*)(?:INPUT_PATH|OUTPUT_PATH)[ \\t]*=(?!=).*$", r"\\1pass", src, flags=re.M)
namespace = {"__name__": "__main__", "INPUT_PATH": "input.xlsx", "OUTPUT_PATH": "output.xlsx"}
exec(compile("INPUT_PATH = 'input.xlsx'\\nOUTPUT_PATH = 'output.xlsx'\\n" + src, "solution.py", "exec"), namespace)
print("saved output.xlsx")
"""


def render_skill_md(skill: str) -> str:
    """SKILL.md as the CLIs expect it: front matter (name, description) and the skill body."""
    body = skill.strip() or "No rules learned yet: follow the task description carefully."
    return load_prompt("exec_skill").format(skill=body).rstrip() + "\n"


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
        "-o", f"/workspace/{_LAST_MESSAGE}",
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
        "CODEX_HOME": f"/workspace/{_HOMES}/codex",
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
        "HOME": f"/workspace/{_HOMES}/claude",
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


def run_exec_agent(ctx: AgentContext, agent: str) -> RolloutResult:
    """Let the agent CLI solve the task in the container, then grade ``solution.py``."""
    if ctx.gateway is None:
        raise InvalidRequest(f"{agent} needs the model gateway (the host did not provide it)")
    st = RolloutState()
    return guarded(ctx, st, lambda: _run(ctx, st, agent))


def _run(ctx: AgentContext, st: RolloutState, agent: str) -> RolloutResult:
    req = ctx.request
    sandbox = ctx.sandbox
    cli = CLIS[agent]
    runner = CaseRunner(ctx, st)
    first_input = runner.inputs[runner.first]
    st.preview = preview_workbook(first_input)
    task_md = task_prompt(
        "codegen_user",
        req.task.instruction,
        dict(req.task.attributes),
        st.preview,
        req.diagnostic_instruction,
    )
    task_md += load_prompt("exec_task")
    sandbox.write_file("task.md", task_md.encode())
    sandbox.write_file("input.xlsx", first_input)
    sandbox.write_file("run_solution.py", _RUN_SOLUTION.encode())
    for name in ("codex", "claude"):
        sandbox.write_file(f"{_HOMES}/{name}/.keep", b"")
    prompt = load_prompt(f"exec_prompt_{cli}").format(instruction=req.task.instruction.strip()).strip()
    argv, env = (_codex_argv if cli == "codex" else _claude_argv)(ctx, prompt)
    st.messages = [
        Message(role="system", content=f"[{cli} harness] {' '.join(argv[:2])}"),
        Message(role="user", content=task_md),
    ]
    budget = max(10.0, ctx.remaining_s() - _GRADING_RESERVE_S)
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
        last = sandbox.read_file(_LAST_MESSAGE, max_bytes=1 << 20)
        final = last.decode("utf-8", "replace").strip() if last else final
    st.messages += msgs
    st.turns = calls
    st.agent_ok = bool(events) and any(m.role == "assistant" for m in msgs)
    ctx.emit(
        ProgressEvent(
            phase="model_reply", turn=1, detail=f"{cli} exit {outcome.exit_code}, {calls} tool calls"
        )
    )
    solution = sandbox.read_file("solution.py", max_bytes=1 << 20)
    st.code = solution.decode("utf-8", "replace") if solution else extract_code(final)
    notes = {
        "spreadsheet_preview": st.preview,
        f"{cli}_stderr_tail": outcome.stderr_tail[-20000:],
        f"{cli}_final_message": final,
        f"{cli}_exit": str(outcome.exit_code if not outcome.timed_out else "timeout"),
    }
    metrics = {
        "cli": cli,
        "cli_exit_code": outcome.exit_code,
        "cli_timed_out": outcome.timed_out,
        "tool_calls": calls,
        "instruction_type": req.task.attributes.get("instruction_type", ""),
        "task_type": req.task.attributes.get("task_type", ""),
    }
    if not st.code.strip():
        reason = (
            "agent-timeout" if outcome.timed_out else ("no-model-reply" if not st.agent_ok else "no-solution")
        )
        st.phase = "extract"
        return build_row(ctx, st, Grades(), fail_reason=reason, phase="extract", metrics=metrics, notes=notes)
    st.phase = "eval"
    runner.write_inputs()
    grades = runner.grade_all(st.code, turn=1)
    return build_row(
        ctx, st, grades, fail_reason=grades.fail_reason, phase="eval", metrics=metrics, notes=notes
    )
