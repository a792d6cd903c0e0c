"""What MBPP declares: agents, options, where its two sides live."""

from __future__ import annotations

from skillopt.envs._qa.roots import qa_data_root_problem
from skillopt.envs.base import AgentSpec, EnvOptions, EnvSpec

__all__ = ["SPEC", "MBPPOptions"]


class MBPPOptions(EnvOptions):
    """``env.options`` of MBPP (none yet)."""


SPEC = EnvSpec(
    name="mbpp",
    summary="Python functions from a one-line problem statement (sanitized); hidden assert tests (pass@1)",
    agents=(
        AgentSpec(
            name="codegen_single",
            sandbox="isolated",
            summary="one program, one model call (official setting)",
        ),
        AgentSpec(
            name="codegen_multi", sandbox="isolated", summary="program, load check in the container, fix"
        ),
        AgentSpec(name="codex_exec", sandbox="gateway", api="openai", summary="Codex CLI in the container"),
        AgentSpec(
            name="claude_code_exec",
            sandbox="gateway",
            api="anthropic",
            summary="Claude Code in the container",
        ),
    ),
    default_agent="codegen_single",
    environment="skillopt.envs.mbpp.env:MBPPEnv",
    data="skillopt.envs.mbpp.data:MBPPData",
    options=MBPPOptions,
    raw_item="skillopt.envs._code.items:mbpp_item",
    data_root_problem=qa_data_root_problem,
)
