"""The provider kinds: kind name → the model class it builds and the options it takes.

A profile (:class:`skillopt.models.profiles.ProviderProfile`) names its ``kind``;
:func:`skillopt.models.profiles.build_model` looks the kind up here and builds its model class
with the profile's values. The table is data: a kind names its model class by import path (the
class's module, and with it the SDK, is imported only when a model is built, so ``skillopt``
loads without optional SDKs such as ``azure-identity``) and the profile fields it passes on.

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

import importlib
from dataclasses import dataclass

from skillopt.errors import ConfigError

__all__ = ["COMMON_OPTIONS", "KINDS", "ProviderKind", "kind_of", "model_class"]

COMMON_OPTIONS = frozenset({"base_url", "api_key_env", "api_key_file", "max_retries", "timeout_s", "extra"})
"""Options every kind takes (``azure_openai`` takes ``azure_endpoint`` instead of ``base_url``)."""


@dataclass(frozen=True, kw_only=True)
class ProviderKind:
    """One registered kind.

    Attributes:
        name: the lower-case kind name used in profiles.
        model: the :class:`~skillopt.models.base.ChatModel` class it builds, ``"module:Class"``.
        args: the profile fields passed to that class as keyword arguments of the same name
            (besides what every kind passes: name, retries, timeout, ``extra``, a key hint).
        options: the profile options this kind takes (besides ``kind``).
        key: when a credential is needed: ``required``, ``optional``, ``unless_base_url`` (a
            compatible endpoint may take none) or ``by_auth`` (Azure: depends on ``auth``, and
            the credential passed is the one ``auth`` names).
        default_api: which OpenAI API a profile uses when it leaves ``api`` unset ("" = n/a).
        summary: one line for error messages and docs.
    """

    name: str
    model: str
    args: tuple[str, ...]
    options: frozenset[str]
    key: str = "required"
    default_api: str = ""
    summary: str = ""


_CHAT = "skillopt.models.openai_chat:OpenAIChatModel"
_OPENAI_ARGS = ("base_url", "api_key", "token_param", "api")

KINDS: dict[str, ProviderKind] = {
    k.name: k
    for k in (
        ProviderKind(
            name="openai",
            model=_CHAT,
            args=_OPENAI_ARGS,
            options=COMMON_OPTIONS | {"api", "token_param"},
            default_api="auto",
            summary="OpenAI (Chat Completions; Responses API for the models that need it)",
        ),
        ProviderKind(
            name="openai_compatible",
            model=_CHAT,
            args=(*_OPENAI_ARGS, "thinking"),
            options=COMMON_OPTIONS | {"api", "token_param", "thinking"},
            key="optional",
            default_api="chat",
            summary="an OpenAI-compatible server (vLLM, llama.cpp, Ollama ...)",
        ),
        ProviderKind(
            name="openai_responses",
            model="skillopt.models.openai_responses:OpenAIResponsesModel",
            args=("base_url", "api_key"),
            options=COMMON_OPTIONS | {"api"},  # api may only be "responses"
            default_api="responses",
            summary="the OpenAI Responses API",
        ),
        ProviderKind(
            name="azure_openai",
            model="skillopt.models.azure_openai:AzureOpenAIModel",
            args=(
                "azure_endpoint",
                "api_version",
                "responses_api_version",
                "deployments",
                "token_param",
                "api",
            ),
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
        ),
        ProviderKind(
            name="anthropic",
            model="skillopt.models.anthropic_messages:AnthropicModel",
            args=("base_url", "api_key", "max_tokens", "thinking_budget_tokens"),
            options=COMMON_OPTIONS | {"max_tokens", "thinking_budget_tokens"},
            key="unless_base_url",
            summary="the Anthropic Messages API (or a compatible endpoint)",
        ),
    )
}
"""Every provider kind, by name."""


def kind_of(name: str, *, profile: str) -> ProviderKind:
    """The registered kind, or a ConfigError listing the kinds."""
    try:
        return KINDS[name]
    except KeyError:
        listing = "; ".join(f"{k} ({v.summary})" for k, v in KINDS.items())
        raise ConfigError(f"provider {profile!r}: unknown kind {name!r}; use one of: {listing}") from None


def model_class(kind: ProviderKind) -> type:
    """The kind's model class (its module imported now)."""
    module, _, name = kind.model.partition(":")
    return getattr(importlib.import_module(module), name)
