"""What HumanEval declares: agents, options, where its two sides live."""

from __future__ import annotations

from skillopt.envs._code.spec import CODE_AGENTS, CODE_DEFAULT_AGENT
from skillopt.envs._qa.roots import qa_data_root_problem
from skillopt.envs.base import EnvOptions, EnvSpec

__all__ = ["SPEC", "HumanEvalOptions"]


class HumanEvalOptions(EnvOptions):
    """``env.options`` of HumanEval (none yet)."""


SPEC = EnvSpec(
    name="humaneval",
    summary="Python function completion from signature + docstring; hidden unit tests (pass@1)",
    agents=CODE_AGENTS,
    default_agent=CODE_DEFAULT_AGENT,
    environment="skillopt.envs.humaneval.env:HumanEvalEnv",
    data="skillopt.envs.humaneval.data:HumanEvalData",
    options=HumanEvalOptions,
    raw_item="skillopt.envs._code.items:humaneval_item",
    score_problems="data/full/HumanEval.jsonl.gz",  # the full set, with its LICENSE
    data_root_problem=qa_data_root_problem,
)
