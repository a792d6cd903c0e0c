"""What MBPP declares: agents, options, where its two sides live."""

from __future__ import annotations

from skillopt.envs._code.spec import CODE_AGENTS, CODE_DEFAULT_AGENT
from skillopt.envs._qa.roots import qa_data_root_problem
from skillopt.envs.base import EnvOptions, EnvSpec

__all__ = ["SPEC", "MBPPOptions"]


class MBPPOptions(EnvOptions):
    """``env.options`` of MBPP (none yet)."""


SPEC = EnvSpec(
    name="mbpp",
    summary="Python functions from a one-line problem statement (sanitized); hidden assert tests (pass@1)",
    agents=CODE_AGENTS,
    default_agent=CODE_DEFAULT_AGENT,
    environment="skillopt.envs.mbpp.env:MBPPEnv",
    data="skillopt.envs.mbpp.data:MBPPData",
    options=MBPPOptions,
    raw_item="skillopt.envs._code.items:mbpp_item",
    score_problems="data/full/sanitized-mbpp.json.gz",  # the full set, with its LICENSE
    data_root_problem=qa_data_root_problem,
)
