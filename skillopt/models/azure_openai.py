"""Azure OpenAI through ``openai.AzureOpenAI``.

Calls go to ``{azure_endpoint}/openai/deployments/{deployment}/chat/completions?api-version=…``
(the SDK builds the path from the ``model`` argument, which we set to the deployment: the
profile's ``deployments`` map, model name → deployment, else the model name itself). Responses
API calls go to ``{azure_endpoint}/openai/responses`` with ``responses_api_version``, since
Azure serves that API only from 2025-03-01-preview on.

Credentials, exactly one:

- a key (``api_key_env`` / ``api_key_file``), sent as the ``api-key`` header;
- a static Entra ID token (``azure_ad_token_env``), sent as ``Authorization: Bearer``;
- ``auth: entra_id``: ``azure-identity``'s ``DefaultAzureCredential`` (managed identity,
  workload identity, ``az login`` ...), a fresh token per request via ``get_bearer_token_provider``.

An Entra token is only ever sent to an ``https`` endpoint on an Azure domain
(:func:`check_token_endpoint`, reference #138): a token is a bearer credential for the whole
tenant's Cognitive Services, not for one resource like a key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from skillopt.errors import ConfigError
from skillopt.models.openai_chat import OpenAIChatModel

__all__ = ["AZURE_TOKEN_HOST_SUFFIXES", "AzureOpenAIModel", "check_token_endpoint", "entra_token_provider"]

AZURE_TOKEN_HOST_SUFFIXES: tuple[str, ...] = (
    ".openai.azure.com",
    ".cognitiveservices.azure.com",
    ".services.ai.azure.com",
    ".openai.azure.us",  # Azure Government
    ".cognitiveservices.azure.us",
    ".openai.azure.cn",  # Azure China
    ".cognitiveservices.azure.cn",
    ".azure-api.net",  # API Management in front of Azure OpenAI
)
"""Hosts an Entra ID token may be sent to."""


def check_token_endpoint(endpoint: str, *, profile: str) -> None:
    """Refuse to send an Entra token anywhere but an https Azure endpoint.

    Raises:
        ConfigError: the endpoint is not https, or its host is not an Azure OpenAI domain.
    """
    parts = urlsplit(endpoint)
    host = (parts.hostname or "").lower()
    if parts.scheme != "https":
        raise ConfigError(
            f"provider {profile!r}: an Entra ID token is only sent over https; azure_endpoint is "
            f"{parts.scheme or 'not a URL'}:// (use an API key for a local or http endpoint)"
        )
    if not any(host.endswith(suffix) for suffix in AZURE_TOKEN_HOST_SUFFIXES):
        raise ConfigError(
            f"provider {profile!r}: an Entra ID token is only sent to Azure hosts "
            f"({', '.join('*' + s for s in AZURE_TOKEN_HOST_SUFFIXES)}), not {host or endpoint!r}; "
            "use an API key for other endpoints"
        )


def entra_token_provider(scope: str, *, profile: str) -> Callable[[], str]:
    """A bearer-token provider from ``azure-identity`` (imported only here).

    Raises:
        ConfigError: ``azure-identity`` is not installed.
    """
    try:
        from azure.identity import DefaultAzureCredential, get_bearer_token_provider
    except ImportError as exc:
        raise ConfigError(
            f"provider {profile!r}: auth entra_id needs the azure-identity package: "
            "pip install azure-identity (or use a key: api_key_env, or a token: azure_ad_token_env)"
        ) from exc
    return get_bearer_token_provider(DefaultAzureCredential(), scope)


class AzureOpenAIModel(OpenAIChatModel):
    """A configured Azure OpenAI resource.

    Args:
        name: profile name.
        azure_endpoint: ``https://<resource>.openai.azure.com`` (http only with a key).
        api_version: ``api-version`` of Chat Completions calls.
        responses_api_version: ``api-version`` of Responses API calls.
        deployments: model name → deployment name; unmapped models use their own name.
        api_key, ad_token, token_provider: exactly one credential.
        max_retries, timeout_s, token_param, default_extra, api, key_hint: as
            :class:`OpenAIChatModel` (``api`` defaults to ``auto``).
        client: a ready ``AzureOpenAI`` client (tests).

    Raises:
        ConfigError: no or several credentials, or a token for a non-Azure/non-https endpoint.
    """

    kind = "azure_openai"

    def __init__(
        self,
        name: str,
        *,
        azure_endpoint: str,
        api_version: str = "2024-12-01-preview",
        responses_api_version: str = "2025-04-01-preview",
        deployments: Mapping[str, str] | None = None,
        api_key: str = "",
        ad_token: str = "",
        token_provider: Callable[[], str] | None = None,
        max_retries: int = 4,
        timeout_s: float = 120.0,
        token_param: str = "max_completion_tokens",
        default_extra: Mapping[str, Any] | None = None,
        api: str = "auto",
        client: Any = None,
        key_hint: str = "",
    ) -> None:
        import openai

        if not azure_endpoint:
            raise ConfigError(f"provider {name!r}: set azure_endpoint (https://<resource>.openai.azure.com)")
        given = [bool(api_key), bool(ad_token), token_provider is not None]
        if sum(given) != 1:
            raise ConfigError(
                f"provider {name!r}: Azure needs exactly one credential (a key, an Entra token or "
                f"auth: entra_id), got {sum(given)}"
            )
        if not api_key:
            check_token_endpoint(azure_endpoint, profile=name)
        self.deployments = dict(deployments or {})
        self.responses_api_version = responses_api_version
        auth: dict[str, Any]
        if api_key:
            auth = {"api_key": api_key}
        elif ad_token:
            auth = {"azure_ad_token": ad_token}
        else:
            auth = {"azure_ad_token_provider": token_provider}
        client = client or openai.AzureOpenAI(
            azure_endpoint=azure_endpoint,
            api_version=api_version,
            max_retries=max_retries,
            timeout=timeout_s,
            **auth,
        )
        super().__init__(
            name,
            base_url=azure_endpoint,
            api_key="",
            max_retries=max_retries,
            timeout_s=timeout_s,
            token_param=token_param,
            default_extra=default_extra,
            client=client,
            api=api,
            key_hint=key_hint,
        )
        self._secrets = tuple(s for s in (api_key, ad_token) if s)
        self._ctx.secrets = self._secrets

    def wire_model(self, model: str) -> str:
        return self.deployments.get(model, model)

    def _responses_query(self) -> Mapping[str, str] | None:
        return {"api-version": self.responses_api_version}
