"""Azure OpenAI through openai.AzureOpenAI, over real HTTP against the scripted server."""

from __future__ import annotations

import importlib.util

import pytest

from skillopt.errors import ConfigError
from skillopt.models.azure_openai import AzureOpenAIModel, check_token_endpoint
from skillopt.models.base import ChatRequest
from skillopt.models.profiles import ProviderProfile, build_model, load_profiles, validate_profiles
from skillopt.testing.scripted import ScriptedModelServer
from tests.skillopt.models.conftest import KEY, WEATHER, conversation


def test_azure_deployment_path_and_api_key_header(server, tmp_path):
    file = tmp_path / "providers.yaml"
    file.write_text(
        "providers:\n"
        "  az:\n"
        "    kind: azure_openai\n"
        f"    azure_endpoint: {server.url}\n"
        "    api_version: 2024-10-21\n"  # YAML reads this as a date; it must stay the string
        "    api_key_env: AZ_KEY\n"
        "    deployments: {gpt-5.5: prod-gpt55}\n"
    )
    profiles = load_profiles(file=file, environ={"AZ_KEY": KEY})
    model = build_model(profiles["az"])
    reply = model.complete(
        ChatRequest(model="gpt-5.5", messages=conversation(), tools=(WEATHER,), stage="merge")
    )
    assert reply.tool_calls[0]["name"] == "get_weather"
    model.complete(ChatRequest(model="gpt-4o", messages=conversation("hi")))  # unmapped: its own name

    mapped, unmapped = server.api_requests("chat")
    assert mapped.path == "/openai/deployments/prod-gpt55/chat/completions"
    assert mapped.query == "api-version=2024-10-21"
    assert mapped.headers["api-key"].endswith("[redacted]")  # the key went in the api-key header
    assert "authorization" not in mapped.headers
    assert mapped.headers["x-skillopt-stage"] == "merge"
    assert unmapped.path == "/openai/deployments/gpt-4o/chat/completions"


def test_azure_auto_profile_from_env(server):
    env = {"AZURE_OPENAI_ENDPOINT": server.url, "AZURE_OPENAI_API_KEY": KEY}
    profiles = load_profiles(environ=env)
    assert profiles["azure"].kind == "azure_openai" and profiles["azure"].auth == "api_key"
    models = validate_profiles(profiles, ["azure"], environ=env)
    assert models["azure"].complete(ChatRequest(model="dep", messages=conversation("hi"))).text == "ok"
    assert server.api_requests()[0].query == "api-version=2024-12-01-preview"


def test_azure_responses_api_version(server):
    model = AzureOpenAIModel("az", azure_endpoint=server.url, api_key=KEY, max_retries=0)
    model.complete(ChatRequest(model="gpt-5-codex", messages=conversation("hi")))  # auto → Responses
    (req,) = server.api_requests()
    assert req.api == "responses" and req.path == "/openai/responses"
    assert req.query == "api-version=2025-04-01-preview"


def test_azure_needs_endpoint_and_exactly_one_credential():
    with pytest.raises(ConfigError, match="set azure_endpoint"):
        ProviderProfile(name="az", kind="azure_openai", api_key_env="K")
    with pytest.raises(ConfigError, match="say how to authenticate"):
        ProviderProfile(name="az", kind="azure_openai", azure_endpoint="https://r.openai.azure.com")
    with pytest.raises(ConfigError, match="one credential"):
        ProviderProfile(
            name="az",
            kind="azure_openai",
            azure_endpoint="https://r.openai.azure.com",
            api_key_env="K",
            azure_ad_token_env="T",
        )
    with pytest.raises(ConfigError, match="takes azure_endpoint"):
        load_profiles(specs=["az=azure_openai,base_url=https://x,api_key_env=K"], environ={"K": "v"})
    with pytest.raises(ConfigError, match="AZ_TOKEN"):
        load_profiles(
            specs=["az=azure_openai,azure_endpoint=https://r.openai.azure.com,azure_ad_token_env=AZ_TOKEN"],
            environ={},
        )


@pytest.mark.parametrize(
    "endpoint",
    [
        "http://r.openai.azure.com",  # not https
        "https://evil.example.com",  # not Azure
        "https://openai.azure.com.evil.example",  # Azure-looking prefix only
    ],
)
def test_entra_token_never_sent_off_azure(endpoint, server):
    with pytest.raises(ConfigError, match="Entra ID token"):
        ProviderProfile(name="az", kind="azure_openai", azure_endpoint=endpoint, azure_ad_token_env="T")
    with pytest.raises(ConfigError, match="Entra ID token"):
        ProviderProfile(name="az", kind="azure_openai", azure_endpoint=endpoint, auth="entra_id")
    # Built directly, the provider refuses too: the local scripted server never sees the token.
    with pytest.raises(ConfigError, match="Entra ID token"):
        AzureOpenAIModel("az", azure_endpoint=server.url, ad_token="eyJ-token")
    assert server.requests == []


def test_token_endpoints_accepted():
    for endpoint in (
        "https://res.openai.azure.com",
        "https://res.cognitiveservices.azure.com/",
        "https://proj.services.ai.azure.com",
        "https://gw.azure-api.net",
    ):
        check_token_endpoint(endpoint, profile="az")


def test_entra_id_without_azure_identity_is_a_clear_startup_error():
    profile = ProviderProfile(
        name="az", kind="azure_openai", azure_endpoint="https://r.openai.azure.com", auth="entra_id"
    )
    if (
        importlib.util.find_spec("azure") is not None
        and importlib.util.find_spec("azure.identity") is not None
    ):
        pytest.skip("azure-identity is installed here")
    with pytest.raises(ConfigError, match="pip install azure-identity"):
        validate_profiles({"az": profile}, ["az"])


def test_static_entra_token_profile_builds():
    env = {"AZ_TOKEN": "eyJ0eXAi.static-token"}
    profiles = load_profiles(
        specs=["az=azure_openai,azure_endpoint=https://r.openai.azure.com,azure_ad_token_env=AZ_TOKEN"],
        environ=env,
    )
    assert profiles["az"].auth == "ad_token"
    assert "static-token" not in repr(profiles["az"]) and "static-token" not in str(profiles["az"].public())
    model = build_model(profiles["az"])
    assert "static-token" not in repr(model)


def test_unknown_endpoint_with_key_still_works_over_http():
    """A key (unlike a token) is scoped to one resource, so a local http endpoint is allowed."""
    with ScriptedModelServer({"default": {"replies": ["ok"]}}, expect_auth=KEY) as srv:
        model = AzureOpenAIModel("az", azure_endpoint=srv.url, api_key=KEY, max_retries=0)
        assert model.complete(ChatRequest(model="d", messages=conversation("hi"))).text == "ok"
