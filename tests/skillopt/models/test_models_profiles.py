"""Startup validation of provider profiles, and secrets kept out of reprs and errors."""

from __future__ import annotations

import pytest

from skillopt.errors import ConfigError
from skillopt.models.anthropic_messages import AnthropicModel
from skillopt.models.azure_openai import AzureOpenAIModel
from skillopt.models.openai_chat import OpenAIChatModel
from skillopt.models.profiles import KINDS, ProviderProfile, build_model, load_profiles, validate_profiles

SECRET = "sk-live-DO-NOT-LEAK-42"


def test_registry_names_every_kind():
    assert set(KINDS) == {"openai", "openai_compatible", "openai_responses", "azure_openai", "anthropic"}


def test_auto_profiles_from_the_environment():
    env = {
        "OPENAI_API_KEY": SECRET,
        "ANTHROPIC_API_KEY": SECRET,
        "AZURE_OPENAI_ENDPOINT": "https://r.openai.azure.com",
        "AZURE_OPENAI_API_KEY": SECRET,
        "AZURE_OPENAI_API_VERSION": "2025-04-01-preview",
    }
    profiles = load_profiles(environ=env)
    assert {n: p.kind for n, p in profiles.items()} == {
        "openai": "openai",
        "anthropic": "anthropic",
        "azure": "azure_openai",
    }
    assert profiles["azure"].api_version == "2025-04-01-preview"
    models = validate_profiles(profiles, ["openai", "anthropic", "azure"], environ=env)
    assert isinstance(models["openai"], OpenAIChatModel)
    assert isinstance(models["anthropic"], AnthropicModel)
    assert isinstance(models["azure"], AzureOpenAIModel)
    assert load_profiles(environ={"AZURE_OPENAI_ENDPOINT": "https://r.openai.azure.com"}) == {}


@pytest.mark.parametrize(
    ("name", "env", "says"),
    [
        ("openai", {}, "set OPENAI_API_KEY"),
        ("anthropic", {}, "set ANTHROPIC_API_KEY"),
        ("azure", {"AZURE_OPENAI_ENDPOINT": "https://r.openai.azure.com"}, "set AZURE_OPENAI_API_KEY for"),
        ("azure", {}, "set AZURE_OPENAI_ENDPOINT and AZURE_OPENAI_API_KEY"),
        ("local", {}, "define it under 'providers:'"),
    ],
)
def test_missing_required_profile_says_what_to_set(name, env, says):
    with pytest.raises(ConfigError, match=says):
        validate_profiles(load_profiles(environ=env), [name], environ=env)


@pytest.mark.parametrize(
    ("yaml_text", "says"),
    [
        ("p: {kind: gemini}", "unknown kind 'gemini'; use one of: openai .*anthropic"),
        ("p: {base_url: 'http://h/v1'}", "set kind"),
        ("p: {kind: openai_compatible}", "set base_url"),
        ("p: {kind: openai, api_key_env: NOT_SET_ANYWHERE}", "NOT_SET_ANYWHERE .* is not set"),
        ("p: {kind: openai}", "needs a key; set api_key_env"),
        ("p: {kind: anthropic}", "needs a key"),
        ("p: {kind: azure_openai, api_key_env: K}", "set azure_endpoint"),
        (
            "p: {kind: openai, api_key_env: K, thinking: enabled}",
            "unknown option 'thinking'.*openai_compatible",
        ),
        ("p: {kind: anthropic, api_key_env: K, token_param: max_tokens}", "unknown option 'token_param'"),
        ("p: {kind: openai, api_key_env: K, timeout: 3}", "unknown option 'timeout'"),
        ("p: {kind: openai, api_key: sk-inline}", "do not put secrets in the config"),
        ("p: {kind: openai, api_key_env: K, api: completions}", "api must be one of auto, chat, responses"),
        (
            "p: {kind: openai_compatible, base_url: 'http://h', token_param: max}",
            "token_param must be one of",
        ),
        ("p: {kind: openai, api_key_env: K, max_retries: lots}", "max_retries must be an integer"),
        ("p: {kind: openai, api_key_env: K, timeout_s: 0}", "timeout_s must be > 0"),
        ("p: {kind: anthropic, api_key_env: K, thinking_budget_tokens: 100}", ">= 1024"),
        ("p: {kind: openai_responses, api_key_env: K, api: chat}", "always uses api: responses"),
        ("p: {kind: openai, api_key_env: K, api_key_file: /x}", "not both"),
        ("p: {kind: openai, api_key_file: /nonexistent/key}", "cannot read api_key_file"),
    ],
)
def test_misconfigured_profiles_fail_at_load(tmp_path, yaml_text, says):
    file = tmp_path / "providers.yaml"
    file.write_text("providers:\n  " + yaml_text + "\n")
    with pytest.raises(ConfigError, match=says):
        load_profiles(file=file, environ={"K": SECRET})


def test_cli_specs_and_key_files(tmp_path):
    key_file = tmp_path / "key"
    key_file.write_text(SECRET + "\n")
    profiles = load_profiles(
        specs=[
            f"vllm=openai_compatible,base_url=http://h:8000/v1,token_param=max_tokens,thinking=disabled,max_retries=1,timeout_s=9.5,api_key_file={key_file}"
        ],
        environ={},
    )
    p = profiles["vllm"]
    assert (p.token_param, p.thinking, p.max_retries, p.timeout_s, p.api_key) == (
        "max_tokens",
        "disabled",
        1,
        9.5,
        SECRET,
    )
    with pytest.raises(ConfigError, match="set it in the providers file"):
        load_profiles(specs=["x=azure_openai,deployments=a:b"], environ={})
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ConfigError, match="is empty"):
        load_profiles(specs=[f"x=openai,api_key_file={tmp_path / 'empty'}"], environ={})


def test_secrets_never_in_reprs_public_or_errors(tmp_path):
    env = {"OPENAI_API_KEY": SECRET, "ANTHROPIC_API_KEY": SECRET, "T": SECRET}
    profiles = load_profiles(
        specs=["az=azure_openai,azure_endpoint=https://r.openai.azure.com,azure_ad_token_env=T"], environ=env
    )
    for p in profiles.values():
        assert p.api_key == SECRET or p.ad_token == SECRET
        for text in (repr(p), str(p), str(p.public()), repr(build_model(p))):
            assert SECRET not in text
    assert profiles["openai"].public()["credential"] == "OPENAI_API_KEY"
    # Equality ignores the secret, so comparing profiles never depends on (or reveals) it.
    assert profiles["openai"] == ProviderProfile(name="openai", kind="openai", api_key_env="OPENAI_API_KEY")
    # A wrong option next to a key: the error names the option, never the key.
    file = tmp_path / "p.yaml"
    file.write_text("providers:\n  x: {kind: openai, api_key_env: OPENAI_API_KEY, colour: blue}\n")
    with pytest.raises(ConfigError) as info:
        load_profiles(file=file, environ=env)
    assert "colour" in info.value.message and SECRET not in info.value.message


def test_build_model_resolves_an_unresolved_profile(monkeypatch):
    monkeypatch.setenv("SKILLOPT_TEST_KEY", SECRET)
    model = build_model(ProviderProfile(name="o", kind="openai", api_key_env="SKILLOPT_TEST_KEY"))
    assert isinstance(model, OpenAIChatModel)
    monkeypatch.delenv("SKILLOPT_TEST_KEY")
    with pytest.raises(ConfigError, match="SKILLOPT_TEST_KEY"):
        build_model(ProviderProfile(name="o", kind="openai", api_key_env="SKILLOPT_TEST_KEY"))


def test_profile_built_in_code_checks_options():
    with pytest.raises(ConfigError, match="unknown option 'thinking_budget_tokens'"):
        ProviderProfile(
            name="o", kind="openai_compatible", base_url="http://h/v1", thinking_budget_tokens=2048
        )
    with pytest.raises(ConfigError, match="unknown kind"):
        ProviderProfile(name="o", kind="bedrock")
