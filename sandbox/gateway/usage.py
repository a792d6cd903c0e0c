"""Token usage as the three wire APIs report it (OpenAI Chat and Responses, Anthropic
Messages), from a JSON or a streamed (SSE) response body."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from skillopt.types import Usage

__all__ = ["parse_usage"]


def _usage_of(obj: Mapping[str, Any]) -> Usage:
    """One ``usage`` object of any of the three APIs, cached tokens included: Chat's
    ``prompt_tokens_details.cached_tokens``, Responses' ``input_tokens_details``, Anthropic's
    ``cache_read_input_tokens``/``cache_creation_input_tokens`` (which its ``input_tokens``
    leave out: they are added to the prompt tokens here)."""

    def num(value: Any) -> int:
        return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0

    details = obj.get("prompt_tokens_details") or obj.get("input_tokens_details") or {}
    cached = num(details.get("cached_tokens")) if isinstance(details, Mapping) else 0
    read, write = num(obj.get("cache_read_input_tokens")), num(obj.get("cache_creation_input_tokens"))
    prompt = num(obj.get("prompt_tokens", obj.get("input_tokens", 0))) + read + write
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=num(obj.get("completion_tokens", obj.get("output_tokens", 0))),
        cached_input_tokens=cached + read,
        cache_write_input_tokens=write,
    )


def _later(a: Usage, b: Usage) -> Usage:
    """The more complete of two reports of the same call's usage (streams repeat it)."""
    return b if (b.prompt_tokens, b.completion_tokens) >= (a.prompt_tokens, a.completion_tokens) else a


def parse_usage(content_type: str, body: bytes) -> Usage:
    """Token usage reported in a JSON or SSE response of any of the three APIs."""
    text = body.decode("utf-8", "replace")
    if "event-stream" not in content_type:
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            return Usage(calls=1)
        usage = data.get("usage") if isinstance(data, dict) else None
        return Usage(calls=1) + (_usage_of(usage) if isinstance(usage, dict) else Usage())
    found = Usage()
    completion = 0
    for line in text.splitlines():
        if not line.startswith("data:"):
            continue
        try:
            event = json.loads(line[5:].strip())
        except json.JSONDecodeError:
            continue
        if not isinstance(event, dict):
            continue
        kind = event.get("type", "")
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            found = _later(found, _usage_of(event.get("response", {}).get("usage") or {}))
        elif kind == "message_start":
            found = found + _usage_of(event.get("message", {}).get("usage") or {})
        elif kind == "message_delta":
            completion = max(completion, _usage_of(event.get("usage") or {}).completion_tokens)
        elif isinstance(event.get("usage"), dict):  # chat completions' final chunk
            found = _later(found, _usage_of(event["usage"]))
    return Usage(
        calls=1,
        prompt_tokens=found.prompt_tokens,
        completion_tokens=max(found.completion_tokens, completion),
        cached_input_tokens=found.cached_input_tokens,
        cache_write_input_tokens=found.cache_write_input_tokens,
    )
