"""The agents every code-generation env (HumanEval, MBPP) offers: one declaration, cheap to
import (the envs' ``spec.py`` use it; config validation imports those)."""

from __future__ import annotations

from skillopt.envs.base import AgentSpec

__all__ = ["CODE_AGENTS", "CODE_DEFAULT_AGENT"]

CODE_AGENTS: tuple[AgentSpec, ...] = (
    AgentSpec(
        name="codegen_single", sandbox="isolated", summary="one program, one model call (official setting)"
    ),
    AgentSpec(name="codegen_multi", sandbox="isolated", summary="program, load check in the container, fix"),
    AgentSpec(name="codex_exec", sandbox="gateway", api="openai", summary="Codex CLI in the container"),
    AgentSpec(
        name="claude_code_exec", sandbox="gateway", api="anthropic", summary="Claude Code in the container"
    ),
)
CODE_DEFAULT_AGENT = "codegen_single"
