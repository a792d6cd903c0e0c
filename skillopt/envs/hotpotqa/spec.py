"""What HotpotQA declares: agents, options, where its two sides live."""

from __future__ import annotations

from pydantic import Field

from skillopt.envs._qa.roots import qa_data_root_problem
from skillopt.envs.base import AgentSpec, EnvOptions, EnvSpec

__all__ = ["SPEC", "HotpotQAOptions"]


class HotpotQAOptions(EnvOptions):
    """``env.options`` of HotpotQA."""

    context_chars: int = Field(default=0, ge=0, le=1_000_000)
    """Character budget of the paragraphs in the prompt, cut at paragraph boundaries (0 = all)."""


SPEC = EnvSpec(
    name="hotpotqa",
    summary="multi-hop questions over ten paragraphs (distractor setting); answer EM and F1",
    agents=(
        AgentSpec(
            name="qa", sandbox="none", summary="answer from the paragraphs; runs no code, no container"
        ),
    ),
    default_agent="qa",
    environment="skillopt.envs.hotpotqa.env:HotpotQAEnv",
    data="skillopt.envs.hotpotqa.data:HotpotQAData",
    options=HotpotQAOptions,
    raw_item="skillopt.envs.hotpotqa.items:item_from_raw",
    data_root_problem=qa_data_root_problem,
)
