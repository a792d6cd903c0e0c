"""What HumanEval declares: agents, options, where its two sides live."""

from __future__ import annotations

from skillopt.envs._qa.roots import qa_data_root_problem
from skillopt.envs.base import AgentSpec, EnvOptions, EnvSpec

__all__ = ["SPEC", "HumanEvalOptions"]


class HumanEvalOptions(EnvOptions):
    """``env.options`` of HumanEval (none yet)."""


SPEC = EnvSpec(
    name="humaneval",
    summary="Python function completion from signature + docstring; hidden unit tests (pass@1)",
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
    environment="skillopt.envs.humaneval.env:HumanEvalEnv",
    data="skillopt.envs.humaneval.data:HumanEvalData",
    options=HumanEvalOptions,
    raw_item="skillopt.envs._code.items:humaneval_item",
    data_root_problem=qa_data_root_problem,
)
