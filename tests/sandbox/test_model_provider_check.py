"""The host's check of a request's model provider: configured here, and (for an agent CLI)
speaking the CLI's wire API, which the env declares (``Environment.agent_apis``)."""

from __future__ import annotations

import pytest

from sandbox.service.validation import check_model_provider
from skillopt.envs.registry import get_env
from skillopt.errors import InvalidRequest
from skillopt.models.profiles import ProviderProfile
from skillopt.types import Grading, Limits, ModelSpec, RolloutRequest, SkillVersion, Task

PROVIDERS = {
    "oa": ProviderProfile(name="oa", kind="openai"),
    "an": ProviderProfile(name="an", kind="anthropic"),
}


def _request(agent: str, provider: str, env: str = "humaneval") -> RolloutRequest:
    return RolloutRequest(
        rollout_id="run/1",
        env=env,
        agent=agent,
        task=Task(id="t1", instruction="x"),
        grading=Grading(),
        skill=SkillVersion(content="- rule\n"),
        model=ModelSpec(provider=provider, model="m"),
        limits=Limits(wall_time_s=60, max_turns=1),
    )


@pytest.mark.parametrize(("agent", "provider"), [("codex_exec", "oa"), ("claude_code_exec", "an")])
def test_a_cli_with_a_provider_of_its_own_api_passes(agent, provider):
    check_model_provider(_request(agent, provider), get_env("humaneval"), PROVIDERS, host_id="h")


@pytest.mark.parametrize(
    ("agent", "provider", "apis"),
    [("codex_exec", "an", ("openai", "anthropic")), ("claude_code_exec", "oa", ("anthropic", "openai"))],
)
def test_a_cli_with_a_provider_of_another_api_is_refused_naming_both(agent, provider, apis):
    with pytest.raises(
        InvalidRequest, match=rf"speaks the {apis[0]} API but provider '{provider}' is '{apis[1]}'"
    ):
        check_model_provider(_request(agent, provider), get_env("humaneval"), PROVIDERS, host_id="h")


def test_an_unknown_provider_is_refused_naming_the_configured_ones():
    with pytest.raises(InvalidRequest, match="configured: an, oa"):
        check_model_provider(_request("qa", "nope", env="gsm8k"), get_env("gsm8k"), PROVIDERS, host_id="h")
