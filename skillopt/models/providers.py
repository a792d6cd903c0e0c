"""The provider registry: kind name → factory, and the options each kind takes.

A profile (:class:`skillopt.models.profiles.ProviderProfile`) names its ``kind``;
:func:`build_model` looks the kind up here and calls its factory. Each factory imports its
provider module, and with it the SDK, only when called, so ``skillopt`` loads without optional
SDKs (``azure-identity``) installed.

==================  ===========================================================================
kind                what it talks to
==================  ===========================================================================
openai              api.openai.com: Chat Completions, or the Responses API for models that need it
openai_compatible   any OpenAI-compatible server (vLLM serving Qwen, llama.cpp, Ollama ...)
openai_responses    the Responses API only (``client.responses.create``)
azure_openai        Azure OpenAI (``openai.AzureOpenAI``): key, static Entra token or Entra ID
anthropic           the Anthropic Messages API (``anthropic.Anthropic``) or a compatible endpoint
==================  ===========================================================================
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from skillopt.errors import ConfigError

if TYPE_CHECKING:
    from skillopt.models.base import ChatModel
    from skillopt.models.profiles import ProviderProfile

__all__ = ["COMMON_OPTIONS", "KINDS", "ProviderKind", "build_model"]

COMMON_OPTIONS = frozenset({"base_url", "api_key_env", "api_key_file", "max_retries", "timeout_s", "extra"})
"""Options every kind takes (``azure_openai`` takes ``azure_endpoint`` instead of ``base_url``)."""


@dataclass(frozen=True, kw_only=True)
class ProviderKind:
    """One registered kind.

    Attributes:
        name: the lower-case kind name used in profiles.
        factory: builds the :class:`ChatModel` from a resolved profile.
        options: the profile options this kind takes (besides ``kind``).
        key: when a credential is needed: ``required``, ``optional``, ``unless_base_url`` (a
            compatible endpoint may take none) or ``by_auth`` (Azure: depends on ``auth``).
        default_api: which OpenAI API a profile uses when it leaves ``api`` unset ("" = n/a).
        summary: one line for error messages and docs.
    """

    name: str
    factory: Callable[[ProviderProfile], ChatModel]
    options: frozenset[str]
    key: str = "required"
    default_api: str = ""
    summary: str = ""


KINDS: dict[str, ProviderKind] = {}
"""Every provider kind, by name."""


def _register(
    name: str, *, options: frozenset[str], key: str = "required", default_api: str = "", summary: str
) -> Callable[[Callable[[ProviderProfile], ChatModel]], Callable[[ProviderProfile], ChatModel]]:
    def decorate(factory: Callable[[ProviderProfile], ChatModel]) -> Callable[[ProviderProfile], ChatModel]:
        KINDS[name] = ProviderKind(
            name=name, factory=factory, options=options, key=key, default_api=default_api, summary=summary
        )
        return factory

    return decorate


def _key_hint(p: ProviderProfile) -> str:
    if p.api_key_file:
        return f"the key file {p.api_key_file} (api_key_file of provider {p.name!r})"
    if p.api_key_env:
        return f"the environment variable {p.api_key_env} (api_key_env of provider {p.name!r})"
    if p.azure_ad_token_env:
        return f"the Entra token in {p.azure_ad_token_env} (azure_ad_token_env of provider {p.name!r})"
    if p.auth == "entra_id":
        return "the Entra ID login of this host (azure-identity DefaultAzureCredential)"
    return f"the credential of provider {p.name!r} (set api_key_env or api_key_file)"


@_register(
    "openai",
    options=COMMON_OPTIONS | {"api", "token_param"},
    default_api="auto",
    summary="OpenAI (Chat Completions; Responses API for the models that need it)",
)
def _openai(p: ProviderProfile) -> ChatModel:
    from skillopt.models.openai_chat import OpenAIChatModel

    return OpenAIChatModel(
        p.name,
        base_url=p.base_url,
        api_key=p.api_key,
        max_retries=p.max_retries,
        timeout_s=p.timeout_s,
        token_param=p.token_param,
        default_extra=p.extra,
        api=p.api,
        key_hint=_key_hint(p),
    )


@_register(
    "openai_compatible",
    options=COMMON_OPTIONS | {"api", "token_param", "thinking"},
    key="optional",
    default_api="chat",
    summary="an OpenAI-compatible server (vLLM, llama.cpp, Ollama ...)",
)
def _openai_compatible(p: ProviderProfile) -> ChatModel:
    from skillopt.models.openai_chat import OpenAIChatModel

    return OpenAIChatModel(
        p.name,
        base_url=p.base_url,
        api_key=p.api_key,
        max_retries=p.max_retries,
        timeout_s=p.timeout_s,
        token_param=p.token_param,
        default_extra=p.extra,
        api=p.api,
        thinking=p.thinking,
        key_hint=_key_hint(p),
    )


@_register(
    "openai_responses",
    options=COMMON_OPTIONS | {"api"},  # api may only be "responses"
    default_api="responses",
    summary="the OpenAI Responses API",
)
def _openai_responses(p: ProviderProfile) -> ChatModel:
    from skillopt.models.openai_responses import OpenAIResponsesModel

    return OpenAIResponsesModel(
        p.name,
        base_url=p.base_url,
        api_key=p.api_key,
        max_retries=p.max_retries,
        timeout_s=p.timeout_s,
        default_extra=p.extra,
        key_hint=_key_hint(p),
    )


@_register(
    "azure_openai",
    options=(COMMON_OPTIONS - {"base_url"})
    | {
        "api",
        "token_param",
        "azure_endpoint",
        "api_version",
        "responses_api_version",
        "deployments",
        "azure_ad_token_env",
        "auth",
        "entra_scope",
    },
    key="by_auth",
    default_api="auto",
    summary="Azure OpenAI (key, Entra token or Entra ID)",
)
def _azure_openai(p: ProviderProfile) -> ChatModel:
    from skillopt.models.azure_openai import AzureOpenAIModel, entra_token_provider

    token_provider = entra_token_provider(p.entra_scope, profile=p.name) if p.auth == "entra_id" else None
    return AzureOpenAIModel(
        p.name,
        azure_endpoint=p.azure_endpoint,
        api_version=p.api_version,
        responses_api_version=p.responses_api_version,
        deployments=p.deployments,
        api_key=p.api_key if p.auth == "api_key" else "",
        ad_token=p.ad_token if p.auth == "ad_token" else "",
        token_provider=token_provider,
        max_retries=p.max_retries,
        timeout_s=p.timeout_s,
        token_param=p.token_param,
        default_extra=p.extra,
        api=p.api,
        key_hint=_key_hint(p),
    )


@_register(
    "anthropic",
    options=COMMON_OPTIONS | {"max_tokens", "thinking_budget_tokens"},
    key="unless_base_url",
    summary="the Anthropic Messages API (or a compatible endpoint)",
)
def _anthropic(p: ProviderProfile) -> ChatModel:
    from skillopt.models.anthropic_messages import AnthropicModel

    return AnthropicModel(
        p.name,
        base_url=p.base_url,
        api_key=p.api_key,
        max_retries=p.max_retries,
        timeout_s=p.timeout_s,
        max_tokens=p.max_tokens,
        thinking_budget_tokens=p.thinking_budget_tokens,
        default_extra=p.extra,
        key_hint=_key_hint(p),
    )


def kind_of(name: str, *, profile: str) -> ProviderKind:
    """The registered kind, or a ConfigError listing the kinds."""
    try:
        return KINDS[name]
    except KeyError:
        listing = "; ".join(f"{k} ({v.summary})" for k, v in KINDS.items())
        raise ConfigError(f"provider {profile!r}: unknown kind {name!r}; use one of: {listing}") from None


def build_model(profile: ProviderProfile) -> ChatModel:
    """Instantiate the SDK client for a profile (no network traffic).

    A profile built in code whose key is not resolved yet (``api_key_env`` set, ``api_key``
    empty) is resolved from the environment first.

    Raises:
        ConfigError: an unknown kind, a missing credential or a missing optional package.
    """
    from skillopt.models.profiles import resolve_secrets

    return kind_of(profile.kind, profile=profile.name).factory(resolve_secrets(profile))
