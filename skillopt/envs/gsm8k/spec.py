"""What GSM8K declares: agents, options, where its two sides live."""

from __future__ import annotations

from skillopt.envs._qa.roots import qa_data_root_problem
from skillopt.envs.base import AgentSpec, EnvOptions, EnvSpec

__all__ = ["SPEC", "GSM8KOptions"]


class GSM8KOptions(EnvOptions):
    """``env.options`` of GSM8K (none yet)."""


SPEC = EnvSpec(
    name="gsm8k",
    summary="grade-school math word problems; exact final number",
    agents=(AgentSpec(name="qa", sandbox="none", summary="solve and answer; runs no code, no container"),),
    default_agent="qa",
    environment="skillopt.envs.gsm8k.env:GSM8KEnv",
    data="skillopt.envs.gsm8k.data:GSM8KData",
    options=GSM8KOptions,
    raw_item="skillopt.envs.gsm8k.items:item_from_raw",
    data_root_problem=qa_data_root_problem,
)
