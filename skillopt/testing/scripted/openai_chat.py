"""OpenAI Chat Completions (``POST /v1/chat/completions``): parse requests, format replies.

Turn index: the number of runs of consecutive ``assistant`` messages in ``messages`` (normally
simply the number of assistant messages: one per model turn, parallel tool calls included).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from skillopt.testing.scripted.render import CREATED, ResolvedReply, pieces, sse_frame
from skillopt.testing.scripted.request import (
    OfferedTool,
    ParsedBody,
    ScriptedMessage,
    ScriptedRequest,
    content_text,
    count_runs,
)

__all__ = ["API", "CALL_PREFIX", "parse", "render_json", "render_sse"]

API = "chat"
CALL_PREFIX = "call_"


def _tools(body: Mapping[str, Any]) -> tuple[OfferedTool, ...]:
    out: list[OfferedTool] = []
    for t in body.get("tools") or ():
        if not isinstance(t, Mapping):
            continue
        ttype = str(t.get("type") or "function")
        nested = t.get(ttype)
        spec: Mapping[str, Any] = nested if isinstance(nested, Mapping) else t
        name = spec.get("name")
        if isinstance(name, str):
            given = spec.get("parameters")
            params: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
            out.append(OfferedTool(name=name, type=ttype, parameters=params))
    for f in body.get("functions") or ():  # the legacy `functions` field
        if isinstance(f, Mapping) and isinstance(f.get("name"), str):
            out.append(OfferedTool(name=f["name"], parameters=f.get("parameters") or {}))
    return tuple(out)


def _call_text(call: Mapping[str, Any]) -> str:
    kind = str(call.get("type") or "function")
    nested = call.get(kind)
    spec: Mapping[str, Any] = nested if isinstance(nested, Mapping) else {}
    return f"{spec.get('name', '')} {spec.get('arguments', spec.get('input', ''))}"


def parse(body: Mapping[str, Any]) -> ParsedBody:
    """Extract model, conversation, tools and turn index from a chat request body."""
    messages: list[ScriptedMessage] = []
    flags: list[bool] = []
    for m in body.get("messages") or ():
        if not isinstance(m, Mapping):
            continue
        role = str(m.get("role") or "user")
        text = content_text(m.get("content"))
        if role == "assistant":
            calls = [_call_text(c) for c in m.get("tool_calls") or () if isinstance(c, Mapping)]
            fc = m.get("function_call")
            if isinstance(fc, Mapping):
                calls.append(f"{fc.get('name', '')} {fc.get('arguments', '')}")
            text = "\n".join(t for t in (text, *calls) if t)
        elif role == "function":
            role = "tool"
        messages.append(ScriptedMessage(role=role, text=text))
        flags.append(role == "assistant")
    system = "\n\n".join(m.text for m in messages if m.role in ("system", "developer") and m.text)
    return ParsedBody(
        model=str(body.get("model") or ""),
        stream=bool(body.get("stream")),
        system=system,
        messages=tuple(messages),
        tools=_tools(body),
        turn=count_runs(flags),
    )


def _usage(r: ResolvedReply) -> dict[str, Any]:
    return {
        "prompt_tokens": r.prompt_tokens,
        "completion_tokens": r.completion_tokens,
        "total_tokens": r.total_tokens,
        "prompt_tokens_details": {"cached_tokens": r.cached_tokens},
    }


def _finish(r: ResolvedReply) -> str:
    return r.stop_reason or ("tool_calls" if r.calls else "stop")


def _call_json(call: Any) -> dict[str, Any]:
    if call.kind == "custom":
        return {"id": call.call_id, "type": "custom", "custom": {"name": call.name, "input": call.arguments}}
    return {
        "id": call.call_id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


def render_json(r: ResolvedReply, req: ScriptedRequest) -> dict[str, Any]:
    """The non-streaming ``chat.completion`` body."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": r.text if (r.text is not None or not r.calls) else None,
        "refusal": None,
    }
    if message["content"] is None and not r.calls:
        message["content"] = ""
    if r.calls:
        message["tool_calls"] = [_call_json(c) for c in r.calls]
    return {
        "id": r.make_id("chatcmpl-"),
        "object": "chat.completion",
        "created": CREATED,
        "model": r.model,
        "system_fingerprint": None,
        "choices": [{"index": 0, "message": message, "finish_reason": _finish(r), "logprobs": None}],
        "usage": _usage(r),
    }


def render_sse(r: ResolvedReply, req: ScriptedRequest) -> Iterator[bytes]:
    """``data: {chunk}`` frames ending with ``data: [DONE]``.

    With ``stream_options.include_usage`` every chunk carries ``"usage": null`` and a last
    chunk with empty ``choices`` carries the usage, as the real API does.
    """
    opts = req.body.get("stream_options")
    include_usage = isinstance(opts, Mapping) and bool(opts.get("include_usage"))
    cid = r.make_id("chatcmpl-")

    def chunk(delta: Mapping[str, Any], finish: str | None = None) -> bytes:
        data: dict[str, Any] = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": r.model,
            "system_fingerprint": None,
            "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish, "logprobs": None}],
        }
        if include_usage:
            data["usage"] = None
        return sse_frame(data)

    yield chunk({"role": "assistant", "content": "" if r.text is not None or not r.calls else None})
    if r.text:
        for piece in pieces(r.text):
            yield chunk({"content": piece})
    for i, call in enumerate(r.calls):
        kind = call.kind
        field = "input" if kind == "custom" else "arguments"
        head = {"index": i, "id": call.call_id, "type": kind, kind: {"name": call.name, field: ""}}
        yield chunk({"tool_calls": [head]})
        for piece in pieces(call.arguments):
            if piece:
                yield chunk({"tool_calls": [{"index": i, kind: {field: piece}}]})
    yield chunk({}, _finish(r))
    if include_usage:
        yield sse_frame(
            {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": CREATED,
                "model": r.model,
                "system_fingerprint": None,
                "choices": [],
                "usage": _usage(r),
            }
        )
    yield sse_frame("[DONE]")
