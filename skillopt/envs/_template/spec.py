"""What the env declares (keep this module cheap: config validation imports it)."""

from __future__ import annotations

from pydantic import Field

from skillopt.envs._qa.roots import qa_data_root_problem
from skillopt.envs.base import AgentSpec, EnvOptions, EnvSpec

__all__ = ["SPEC", "TemplateOptions"]


class TemplateOptions(EnvOptions):
    """``env.options`` of the env: typed, with defaults; unknown keys are refused."""

    max_question_chars: int = Field(default=20_000, ge=1)
    """Longest question accepted from the data."""


SPEC = EnvSpec(
    name="template",
    summary="a template question-answering env (exact match)",
    agents=(AgentSpec(name="qa", sandbox="none", summary="answer from the prompt; no container"),),
    default_agent="qa",
    environment="skillopt.envs._template.env:TemplateEnv",
    data="skillopt.envs._template.data:TemplateData",
    options=TemplateOptions,
    raw_item="skillopt.envs._template.items:item_from_raw",
    data_root_problem=qa_data_root_problem,
)
