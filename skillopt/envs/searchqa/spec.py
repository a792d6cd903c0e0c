"""What SearchQA declares: agents, options, where its two sides live."""

from __future__ import annotations

from pydantic import Field

from skillopt.envs._qa.roots import qa_data_root_problem
from skillopt.envs.base import AgentSpec, EnvOptions, EnvSpec

__all__ = ["SPEC", "SearchQAOptions"]


class SearchQAOptions(EnvOptions):
    """``env.options`` of SearchQA."""

    context_chars: int = Field(default=6000, ge=0, le=1_000_000)
    """Character budget of the context in the prompt, cut at ``[DOC]`` boundaries (0 = no cut)."""


SPEC = EnvSpec(
    name="searchqa",
    summary="Jeopardy!-style questions over search snippets; EM (hard) and token F1 (soft)",
    agents=(
        AgentSpec(name="qa", sandbox="none", summary="answer from the prompt; runs no code, no container"),
        AgentSpec(
            name="codex_exec",
            sandbox="gateway",
            api="openai",
            summary="Codex CLI in a container, question and context as files",
        ),
    ),
    default_agent="qa",
    environment="skillopt.envs.searchqa.env:SearchQAEnv",
    data="skillopt.envs.searchqa.data:SearchQAData",
    options=SearchQAOptions,
    raw_item="skillopt.envs.searchqa.items:item_from_raw",
    data_root_problem=qa_data_root_problem,
)
