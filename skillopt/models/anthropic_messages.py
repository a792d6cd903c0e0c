"""The Anthropic Messages API through the official ``anthropic`` SDK.

Mapping (provider-neutral → Messages):

- every ``system`` message → the top-level ``system`` prompt (joined by blank lines);
- ``user`` text → a ``text`` block of a user message;
- an assistant's text and ``tool_calls`` → ``text`` + ``tool_use`` blocks (``id``, ``name``,
  ``input`` as a JSON object);
- ``tool`` messages → ``tool_result`` blocks (``tool_use_id`` = ``tool_call_id``) of the next
  user message; consecutive same-role messages are merged, as the API expects;
- :class:`ToolSpec` → ``{name, description, input_schema}``;
- ``max_tokens`` is required by the API: the call's limit, else the profile's ``max_tokens``;
- ``thinking_budget_tokens`` > 0 turns on extended thinking: ``thinking: {type: enabled,
  budget_tokens}``, with ``max_tokens`` raised by the budget (thinking counts toward it);
- ``reasoning_effort`` (low, medium, high, xhigh, max) → ``output_config.effort``; ``none`` is
  not sent;
- ``temperature`` is not sent: the Messages API of the SDK we use (anthropic 2.x) has no such
  parameter any more.

Back: text blocks → ``text``; ``tool_use`` blocks → ``tool_calls`` (arguments as JSON text);
usage ``input_tokens`` (+ cache reads/writes) and ``output_tokens``; ``stop_reason`` in Chat
Completions words (``end_turn`` → ``stop``, ``tool_use`` → ``tool_calls``, ``max_tokens`` →
``length``). With thinking and tool use, the API wants the turn's thinking blocks sent back with
its ``tool_use`` blocks; they ride in the first tool call under ``anthropic_thinking`` (plain
JSON, so traces keep them) and are restored from there.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from skillopt.errors import ModelError
from skillopt.models._errors import ErrorContext, map_sdk_error
from skillopt.models.base import ChatRequest, ChatResponse, LazyClient
from skillopt.types import Message, Usage

__all__ = ["ANTHROPIC_BASE_URL", "THINKING_KEY", "AnthropicModel", "parse_message", "to_anthropic_messages"]

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
THINKING_KEY = "anthropic_thinking"
_MIN_TIMEOUT_S = 1.0
_EFFORTS = frozenset({"low", "medium", "high", "xhigh", "max"})
_STOP = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "content_filter",
}


def _input(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, Mapping):
        return dict(arguments)
    if isinstance(arguments, str) and arguments.strip():
        try:
            value = json.loads(arguments)
        except ValueError:
            return {"raw": arguments}
        return value if isinstance(value, dict) else {"value": value}
    return {}


def to_anthropic_messages(messages: tuple[Message, ...]) -> tuple[str, list[dict[str, Any]]]:
    """Provider-neutral messages → (``system``, ``messages``)."""
    system: list[str] = []
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for m in messages:
        if m.role == "system":
            system.append(m.content)
        elif m.role == "tool":
            add("user", [{"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}])
        elif m.role == "assistant":
            blocks: list[dict[str, Any]] = []
            if m.tool_calls:
                blocks.extend(dict(b) for b in m.tool_calls[0].get(THINKING_KEY) or ())
            if m.content.strip():
                blocks.append({"type": "text", "text": m.content})
            blocks.extend(
                {"type": "tool_use", "id": c["id"], "name": c["name"], "input": _input(c.get("arguments"))}
                for c in m.tool_calls
            )
            add("assistant", blocks)
        elif m.content:
            add("user", [{"type": "text", "text": m.content}])
    return "\n\n".join(s for s in system if s), out


def parse_message(resp: Any) -> ChatResponse:
    """A Messages API ``Message`` → :class:`ChatResponse`."""
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    thinking: list[dict[str, Any]] = []
    for block in getattr(resp, "content", None) or ():
        btype = getattr(block, "type", "")
        if btype == "text":
            texts.append(block.text or "")
        elif btype == "tool_use":
            calls.append({"id": block.id, "name": block.name, "arguments": json.dumps(block.input or {})})
        elif btype == "thinking":
            thinking.append({"type": "thinking", "thinking": block.thinking, "signature": block.signature})
        elif btype == "redacted_thinking":
            thinking.append({"type": "redacted_thinking", "data": block.data})
    if calls and thinking:
        calls[0][THINKING_KEY] = thinking
    usage = getattr(resp, "usage", None)
    prompt = sum(
        getattr(usage, k, 0) or 0
        for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
    stop = getattr(resp, "stop_reason", "") or ""
    return ChatResponse(
        text="".join(texts),
        tool_calls=tuple(calls),
        usage=Usage(
            calls=1,
            prompt_tokens=prompt,
            completion_tokens=getattr(usage, "output_tokens", 0) or 0,
            cached_input_tokens=getattr(usage, "cache_read_input_tokens", 0) or 0,
            cache_write_input_tokens=getattr(usage, "cache_creation_input_tokens", 0) or 0,
        ),
        finish_reason=_STOP.get(stop, stop),
        raw_model=getattr(resp, "model", "") or "",
    )


def _anthropic_client(endpoint: str, api_key: str, *, max_retries: int, timeout_s: float) -> Any:
    import anthropic  # here, on first use: the package loads without provider SDKs

    return anthropic.Anthropic(api_key=api_key, base_url=endpoint, max_retries=max_retries, timeout=timeout_s)


class AnthropicModel:
    """A configured Anthropic Messages endpoint.

    Args:
        name: profile name.
        base_url: ``None`` = api.anthropic.com; else a compatible endpoint (no ``/v1``).
        api_key: the key; never logged. Always passed explicitly, so the SDK never falls back to
            ambient credentials (``ANTHROPIC_*`` variables, profile files).
        max_retries: SDK retries on 429/529/5xx/timeouts/connection errors.
        timeout_s: default per-attempt timeout (``ChatRequest.timeout_s`` overrides).
        max_tokens: ``max_tokens`` of calls that give no limit.
        thinking_budget_tokens: extended thinking budget; 0 = off.
        default_extra: extra body fields sent on every call.
        client: a ready SDK client (tests).
        key_hint: where the key comes from, for error messages.
    """

    kind = "anthropic"

    def __init__(
        self,
        name: str,
        *,
        base_url: str | None = None,
        api_key: str,
        max_retries: int = 4,
        timeout_s: float = 120.0,
        max_tokens: int = 8192,
        thinking_budget_tokens: int = 0,
        default_extra: Mapping[str, Any] | None = None,
        client: Any = None,
        key_hint: str = "",
    ) -> None:
        self.name = name
        self.timeout_s = timeout_s
        self.max_tokens = max_tokens
        self.thinking_budget_tokens = thinking_budget_tokens
        self.default_extra = dict(default_extra or {})
        endpoint = base_url or ANTHROPIC_BASE_URL
        self._ctx = ErrorContext(
            name=name,
            endpoint=endpoint,
            key_hint=key_hint or f"the key configured for provider {name!r}",
            retries=max_retries,
            secrets=(api_key,),
        )
        self._lazy = LazyClient(
            client,
            lambda: _anthropic_client(
                endpoint, api_key or "unused", max_retries=max_retries, timeout_s=timeout_s
            ),
        )

    @property
    def _client(self) -> Any:
        return self._lazy.get()

    def __repr__(self) -> str:
        return f"AnthropicModel(name={self.name!r}, endpoint={self._ctx.endpoint!r})"

    def complete(self, request: ChatRequest) -> ChatResponse:
        import anthropic

        timeout = max(_MIN_TIMEOUT_S, request.timeout_s if request.timeout_s is not None else self.timeout_s)
        try:
            resp = self._client.messages.create(
                **self.request_kwargs(request),
                timeout=timeout,
                extra_headers=request.headers(),
            )
        except anthropic.AnthropicError as exc:
            raise map_sdk_error(anthropic, exc, self._ctx, timeout_s=timeout) from exc
        if getattr(resp, "type", "message") != "message":
            raise ModelError(f"{self.name}: unexpected response type {resp.type!r}")
        return parse_message(resp)

    def request_kwargs(self, request: ChatRequest) -> dict[str, Any]:
        """Keyword arguments of ``client.messages.create`` (no timeout/headers)."""
        system, messages = to_anthropic_messages(request.messages)
        max_tokens = request.max_output_tokens or self.max_tokens
        kwargs: dict[str, Any] = {"model": request.model, "messages": messages, "max_tokens": max_tokens}
        if system:
            kwargs["system"] = system
        if request.tools:
            kwargs["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
                for t in request.tools
            ]
        if request.cache_key:
            # Cache breakpoints after the stable parts: the tools, then the system prompt.
            if system:
                kwargs["system"] = [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}]
            if request.tools:
                kwargs["tools"][-1] = {**kwargs["tools"][-1], "cache_control": {"type": "ephemeral"}}
        if self.thinking_budget_tokens:
            budget = self.thinking_budget_tokens
            kwargs["thinking"] = {"type": "enabled", "budget_tokens": budget}
            kwargs["max_tokens"] = max_tokens + budget  # the answer keeps its own limit
        if request.reasoning_effort in _EFFORTS:
            kwargs["output_config"] = {"effort": request.reasoning_effort}
        extra = {**self.default_extra, **dict(request.extra)}
        if extra:
            kwargs["extra_body"] = extra
        return kwargs
