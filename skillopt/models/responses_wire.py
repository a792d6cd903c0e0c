"""The OpenAI Responses API (``client.responses.create``) on the wire: translation both ways,
and which models need it. :class:`~skillopt.models.openai_chat.OpenAIChatModel` calls it.

Used by kind ``openai_responses``, by any OpenAI-family profile with ``api: responses``, and by
``api: auto`` for the models that only speak it (:data:`RESPONSES_ONLY_MODELS`, the one table).

Mapping (provider-neutral → Responses):

- leading ``system`` messages → ``instructions``; a later one stays an input message;
- ``user`` / ``assistant`` text → input messages;
- an assistant's ``tool_calls`` → ``function_call`` items (``call_id`` = our call ``id``);
- ``tool`` messages → ``function_call_output`` items (``call_id`` = ``tool_call_id``);
- :class:`ToolSpec` → ``{"type": "function", name, description, parameters, strict: false}``;
- ``max_output_tokens``, ``temperature``, ``reasoning.effort``; ``store`` is false (each call
  sends the whole conversation, nothing is kept at the provider).

Back: ``output_text`` parts → ``text``, ``function_call`` items → ``tool_calls``
(``{id: call_id, name, arguments}``), usage ``input_tokens``/``output_tokens``, and
``finish_reason`` in Chat Completions words (``stop``, ``tool_calls``, ``length``, ...).
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Mapping
from typing import Any

from skillopt.errors import ModelError
from skillopt.models.base import ChatRequest, ChatResponse
from skillopt.types import Message, Usage

__all__ = [
    "RESPONSES_ONLY_MODELS",
    "needs_responses_api",
    "parse_response",
    "responses_kwargs",
    "to_responses_input",
]

RESPONSES_ONLY_MODELS: tuple[str, ...] = (
    "*-codex",  # gpt-5-codex, gpt-5.1-codex, gpt-5.2-codex, gpt-5.3-codex ...
    "*-codex-*",  # ... and their -mini / -max / dated variants
    "codex-mini",
    "codex-mini-*",
    "gpt-5*-pro",  # gpt-5-pro, gpt-5.4-pro
    "gpt-5*-pro-*",
    "o1-pro",
    "o1-pro-*",
    "o3-pro",
    "o3-pro-*",
)
"""Model-name patterns (``fnmatch``, case-insensitive) that ``api: auto`` sends to the
Responses API because Chat Completions refuses them."""


def needs_responses_api(model: str) -> bool:
    """Whether ``model`` only works with the Responses API (``api: auto`` routing)."""
    name = model.lower().rsplit("/", 1)[-1]  # tolerate "openai/gpt-5-codex"-style names
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in RESPONSES_ONLY_MODELS)


def _arguments(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def to_responses_input(messages: tuple[Message, ...]) -> tuple[str, list[dict[str, Any]]]:
    """Provider-neutral messages → (``instructions``, ``input`` items)."""
    instructions: list[str] = []
    items: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system" and not items:
            instructions.append(m.content)
        elif m.role == "tool":
            items.append({"type": "function_call_output", "call_id": m.tool_call_id, "output": m.content})
        elif m.role == "assistant":
            if m.content:
                items.append({"role": "assistant", "content": m.content})
            for c in m.tool_calls:
                items.append(
                    {
                        "type": "function_call",
                        "call_id": c["id"],
                        "name": c["name"],
                        "arguments": _arguments(c.get("arguments", "")),
                    }
                )
        else:
            items.append({"role": m.role, "content": m.content})
    return "\n\n".join(instructions), items


def responses_kwargs(request: ChatRequest, *, model: str, extra: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments of ``client.responses.create`` for ``request`` (no timeout/headers)."""
    instructions, items = to_responses_input(request.messages)
    kwargs: dict[str, Any] = {"model": model, "input": items, "store": False}
    if instructions:
        kwargs["instructions"] = instructions
    if request.tools:
        kwargs["tools"] = [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": dict(t.parameters),
                "strict": False,
            }
            for t in request.tools
        ]
    if request.temperature is not None:
        kwargs["temperature"] = request.temperature
    if request.max_output_tokens:
        kwargs["max_output_tokens"] = request.max_output_tokens
    if request.reasoning_effort:
        kwargs["reasoning"] = {"effort": request.reasoning_effort}
    if request.cache_key:
        extra = {**extra, "prompt_cache_key": request.cache_key}
    if extra:
        kwargs["extra_body"] = dict(extra)
    return kwargs


_INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}


def parse_response(resp: Any, *, name: str) -> ChatResponse:
    """A Responses API ``Response`` → :class:`ChatResponse`."""
    if getattr(resp, "status", "") == "failed":
        err = getattr(resp, "error", None)
        detail = getattr(err, "message", "") or "no details"
        raise ModelError(f"{name}: the response failed: {detail}")
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for item in getattr(resp, "output", None) or ():
        itype = getattr(item, "type", "")
        if itype == "message":
            for part in getattr(item, "content", None) or ():
                if getattr(part, "type", "") == "output_text":
                    texts.append(part.text or "")
        elif itype == "function_call":
            calls.append({"id": item.call_id, "name": item.name, "arguments": item.arguments or ""})
    usage = getattr(resp, "usage", None)
    if getattr(resp, "status", "") == "incomplete":
        reason = getattr(getattr(resp, "incomplete_details", None), "reason", "") or "incomplete"
        finish = _INCOMPLETE.get(reason, reason)
    else:
        finish = "tool_calls" if calls else "stop"
    return ChatResponse(
        text="".join(texts),
        tool_calls=tuple(calls),
        usage=Usage(
            calls=1,
            prompt_tokens=getattr(usage, "input_tokens", 0) or 0,
            completion_tokens=getattr(usage, "output_tokens", 0) or 0,
            cached_input_tokens=getattr(getattr(usage, "input_tokens_details", None), "cached_tokens", 0)
            or 0,
        ),
        finish_reason=finish,
        raw_model=getattr(resp, "model", "") or "",
    )
