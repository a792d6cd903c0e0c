"""What MATH-500 declares: agents, options, where its two sides live."""

from __future__ import annotations

from pydantic import Field

from skillopt.envs._qa.roots import qa_data_root_problem
from skillopt.envs.base import AgentSpec, EnvOptions, EnvSpec

__all__ = ["SPEC", "Math500Options"]


class Math500Options(EnvOptions):
    """``env.options`` of MATH-500."""

    verify_timeout_s: float = Field(default=10.0, gt=0, le=120)
    """Longest time one equivalence check may take (the checker runs in a worker process that
    is killed past it; the answer then counts as wrong, with reason ``grader-timeout``)."""


SPEC = EnvSpec(
    name="math500",
    summary="competition math; the boxed answer graded by mathematical equivalence (math-verify)",
    agents=(
        AgentSpec(name="qa", sandbox="none", summary="solve and box the answer; runs no code, no container"),
    ),
    default_agent="qa",
    environment="skillopt.envs.math500.env:Math500Env",
    data="skillopt.envs.math500.data:Math500Data",
    options=Math500Options,
    raw_item="skillopt.envs.math500.items:item_from_raw",
    data_root_problem=qa_data_root_problem,
)
