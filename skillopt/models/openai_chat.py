"""OpenAI Chat Completions (and, per profile or model, the Responses API) via the ``openai`` SDK.

Covers OpenAI itself and every OpenAI-compatible server (vLLM, llama.cpp, Ollama, our scripted
model server); :class:`skillopt.models.azure_openai.AzureOpenAIModel` and
:class:`skillopt.models.openai_responses.OpenAIResponsesModel` build on it. Retries on
429/5xx/timeouts/connection errors are the SDK's own (``max_retries``, exponential backoff with
jitter, ``Retry-After`` honoured); :mod:`skillopt.models._errors` maps what is left.

Qwen on vLLM: ``thinking`` ``enabled``/``disabled`` sends
``chat_template_kwargs.enable_thinking`` true/false in the body; ``server_default`` sends
nothing, so the server's chat template decides (Qwen3 thinks by default).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from skillopt.errors import ConfigError, ModelError
from skillopt.models._errors import ErrorContext, map_sdk_error
from skillopt.models.base import ChatRequest, ChatResponse, LazyClient
from skillopt.models.responses_wire import needs_responses_api, parse_response, responses_kwargs
from skillopt.types import Message, Usage

__all__ = ["OPENAI_BASE_URL", "OpenAIChatModel", "chat_extra", "to_openai_messages"]

OPENAI_BASE_URL = "https://api.openai.com/v1"
_MIN_TIMEOUT_S = 1.0  # a nearly spent deadline still gets one short attempt, not a 0 s timeout


def to_openai_messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """Provider-neutral messages → Chat Completions ``messages``."""
    out: list[dict[str, Any]] = []
    for m in messages:
        item: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.role == "assistant" and m.tool_calls:
            item["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {
                        "name": c["name"],
                        "arguments": c["arguments"]
                        if isinstance(c["arguments"], str)
                        else json.dumps(c["arguments"]),
                    },
                }
                for c in m.tool_calls
            ]
        if m.role == "tool":
            item["tool_call_id"] = m.tool_call_id
        if m.name and m.role != "tool":
            item["name"] = m.name
        out.append(item)
    return out


def chat_extra(
    profile_extra: Mapping[str, Any], request_extra: Mapping[str, Any], *, thinking: str, name: str
) -> dict[str, Any]:
    """The ``extra_body`` of a Chat Completions call: profile fields, then the request's, with
    ``chat_template_kwargs`` merged key by key and the thinking switch applied.

    Raises:
        ConfigError: the request asks for ``enable_thinking`` against the profile's ``thinking``.
    """
    extra = {**profile_extra, **request_extra}
    template = {
        **dict(profile_extra.get("chat_template_kwargs") or {}),
        **dict(request_extra.get("chat_template_kwargs") or {}),
    }
    if thinking != "server_default":
        want = thinking == "enabled"
        if "enable_thinking" in template and bool(template["enable_thinking"]) != want:
            raise ConfigError(
                f"provider {name!r}: the model's extra.chat_template_kwargs.enable_thinking="
                f"{template['enable_thinking']!r} conflicts with the profile's thinking: {thinking}; keep one"
            )
        template["enable_thinking"] = want
    if template:
        extra["chat_template_kwargs"] = template
    return extra


def _sent_as_is(
    kwargs: dict[str, Any], bulk: tuple[str, ...], *, required: tuple[str, ...] = ()
) -> dict[str, Any]:
    """``kwargs`` of an ``openai`` SDK ``create`` call with the ``bulk`` fields moved into
    ``extra_body``, which the SDK merges into the JSON body as it is.

    Why: ``create`` first walks every parameter against its TypedDict (aliases, formats):
    ~0.1 ms of CPU per message, so 7 ms per call at 60 messages (measured against the scripted
    server) and, summed from such figures, ~110 ms of the caller's GIL over a 30-turn rollout
    whose history grows each turn (``bench/bench_gateway.py``). What we send is plain JSON already (no aliased field, no date, no file), so the walk only
    costs. A ``required`` field keeps an empty value in the call (the SDK's signature needs it);
    ``extra_body`` replaces it. Fields already in ``extra_body`` (a profile's or a request's
    extra) still win, as before.
    """
    moved = {k: kwargs.pop(k) for k in bulk if k in kwargs}
    if not moved:
        return kwargs
    for k in required:
        kwargs[k] = []
    kwargs["extra_body"] = {**moved, **kwargs.get("extra_body", {})}
    return kwargs


def _openai_client(endpoint: str, api_key: str, *, max_retries: int, timeout_s: float) -> Any:
    import openai  # here, on first use: the package loads without provider SDKs

    return openai.OpenAI(base_url=endpoint, api_key=api_key, max_retries=max_retries, timeout=timeout_s)


class OpenAIChatModel:
    """A configured OpenAI-family endpoint.

    Args:
        name: profile name (for logs and errors).
        base_url: endpoint root ending in ``/v1``; ``None`` = api.openai.com.
        api_key: the key; never logged.
        max_retries: SDK retries on 429/5xx/connection errors/timeouts.
        timeout_s: default per-attempt timeout of a call (``ChatRequest.timeout_s`` overrides).
        token_param: ``max_completion_tokens`` (OpenAI) or ``max_tokens`` (most compatible servers).
        default_extra: extra body fields sent on every call (e.g. vLLM ``top_k``).
        client: a ready SDK client (tests, Azure).
        api: ``chat``, ``responses``, or ``auto`` (Responses for the models that need it).
        thinking: Qwen's switch: ``server_default``, ``enabled`` or ``disabled`` (Chat only).
        key_hint: where the key comes from, for error messages.
    """

    kind = "openai"

    def __init__(
        self,
        name: str,
        *,
        base_url: str | None,
        api_key: str,
        max_retries: int = 4,
        timeout_s: float = 120.0,
        token_param: str = "max_completion_tokens",
        default_extra: Mapping[str, Any] | None = None,
        client: Any = None,
        api: str = "chat",
        thinking: str = "server_default",
        key_hint: str = "",
    ) -> None:
        if api not in ("chat", "responses", "auto"):
            raise ConfigError(f"provider {name!r}: api must be chat, responses or auto, got {api!r}")
        if thinking not in ("server_default", "enabled", "disabled"):
            raise ConfigError(
                f"provider {name!r}: thinking must be server_default, enabled or disabled, got {thinking!r}"
            )
        self.name = name
        self.api = api
        self.thinking = thinking
        self.token_param = token_param
        self.default_extra = dict(default_extra or {})
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self._secrets: tuple[str, ...] = (api_key,) if api_key else ()
        endpoint = base_url or OPENAI_BASE_URL
        self._ctx = ErrorContext(
            name=name,
            endpoint=endpoint,
            key_hint=key_hint or f"the key configured for provider {name!r}",
            retries=max_retries,
            secrets=self._secrets,
        )
        # base_url is always explicit, so an ambient OPENAI_BASE_URL never redirects our key.
        self._lazy = LazyClient(
            client,
            lambda: _openai_client(
                endpoint, api_key or "unused", max_retries=max_retries, timeout_s=timeout_s
            ),
        )

    @property
    def _client(self) -> Any:
        return self._lazy.get()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, endpoint={self._ctx.endpoint!r}, api={self.api!r})"

    # -- hooks for subclasses ----------------------------------------------------------------

    def wire_model(self, model: str) -> str:
        """The model name sent on the wire (Azure: the deployment)."""
        return model

    def uses_responses(self, model: str) -> bool:
        """Whether a call for ``model`` goes to the Responses API."""
        if self.api == "auto":
            return needs_responses_api(model)
        return self.api == "responses"

    def _responses_query(self) -> Mapping[str, str] | None:
        return None

    # -- the call ----------------------------------------------------------------------------

    def complete(self, request: ChatRequest) -> ChatResponse:
        import openai

        timeout = max(_MIN_TIMEOUT_S, request.timeout_s if request.timeout_s is not None else self.timeout_s)
        # Which stage asked (rollout, analyst, merge...): for gateways, recordings and scripted
        # servers; providers ignore unknown headers.
        common: dict[str, Any] = {"timeout": timeout, "extra_headers": request.headers()}
        model = self.wire_model(request.model)
        try:
            if self.uses_responses(request.model):
                kwargs = responses_kwargs(
                    request, model=model, extra={**self.default_extra, **dict(request.extra)}
                )
                query = self._responses_query()
                if query:
                    kwargs["extra_query"] = dict(query)
                kwargs = _sent_as_is(kwargs, ("input", "tools"))
                return parse_response(self._client.responses.create(**kwargs, **common), name=self.name)
            kwargs = _sent_as_is(
                self._chat_kwargs(request, model), ("messages", "tools"), required=("messages",)
            )
            resp = self._client.chat.completions.create(**kwargs, **common)
        except openai.OpenAIError as exc:
            raise map_sdk_error(openai, exc, self._ctx, timeout_s=timeout) from exc
        return self._parse_chat(resp)

    def _chat_kwargs(self, request: ChatRequest, model: str) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": model, "messages": to_openai_messages(request.messages)}
        if request.tools:
            kwargs["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": dict(t.parameters),
                    },
                }
                for t in request.tools
            ]
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if request.max_output_tokens:
            kwargs[self.token_param] = request.max_output_tokens
        if request.reasoning_effort and not request.tools:
            # Chat Completions refuses reasoning_effort together with function tools on several
            # reasoning models, so it is only sent without tools.
            kwargs["reasoning_effort"] = request.reasoning_effort
        extra = chat_extra(self.default_extra, request.extra, thinking=self.thinking, name=self.name)
        if request.cache_key:
            extra = {**extra, "prompt_cache_key": request.cache_key}
        if extra:
            kwargs["extra_body"] = extra
        return kwargs

    def _parse_chat(self, resp: Any) -> ChatResponse:
        if not getattr(resp, "choices", None):
            raise ModelError(f"{self.name}: the response had no choices")
        choice = resp.choices[0]
        msg = choice.message
        calls = tuple(
            {"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
            for c in (msg.tool_calls or ())
            if getattr(c, "function", None) is not None
        )
        details = getattr(resp.usage, "prompt_tokens_details", None)
        usage = Usage(
            calls=1,
            prompt_tokens=getattr(resp.usage, "prompt_tokens", 0) or 0,
            completion_tokens=getattr(resp.usage, "completion_tokens", 0) or 0,
            cached_input_tokens=getattr(details, "cached_tokens", 0) or 0,
        )
        return ChatResponse(
            text=msg.content or "",
            tool_calls=calls,
            usage=usage,
            finish_reason=choice.finish_reason or "",
            raw_model=resp.model or "",
        )
