"""OpenAI Responses (``POST /v1/responses``): parse requests, format replies (JSON and SSE).

This is the only API Codex CLI speaks. SSE frames are ``event: <type>`` + ``data: <json>``
(agent-clis.md §2.5). Codex acts only on ``response.output_item.done`` and the terminal
``response.completed``; the official SDK's ``responses.stream()`` helper additionally needs
``response.content_part.added`` before text deltas, which the default ``full`` mode sends.

Turn index: the number of runs of consecutive model-output items in ``input``: assistant
``message`` items and ``*_call`` items (``function_call``, ``custom_tool_call``, ...) plus
``reasoning``. Tool outputs (``function_call_output``, ``custom_tool_call_output``) and
user/developer/system messages end a run. Codex appends ``function_call`` +
``function_call_output`` per turn, so the index equals the number of tool round trips. A string
``input`` or a request chained only by ``previous_response_id`` is turn 0 (the server keeps no
history).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from skillopt.testing.scripted.render import CREATED, ResolvedCall, ResolvedReply, pieces, sse_frame
from skillopt.testing.scripted.request import (
    OfferedTool,
    ParsedBody,
    ScriptedMessage,
    ScriptedRequest,
    content_text,
    count_runs,
)

__all__ = ["API", "CALL_PREFIX", "parse", "render_json", "render_sse"]

API = "responses"
CALL_PREFIX = "call_"


def _tools(body: Mapping[str, Any]) -> tuple[OfferedTool, ...]:
    out: list[OfferedTool] = []
    for t in body.get("tools") or ():
        if not isinstance(t, Mapping):
            continue
        ttype = str(t.get("type") or "function")
        name = t.get("name") or ttype  # built-ins such as web_search have no name
        given = t.get("parameters")
        params: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
        out.append(OfferedTool(name=str(name), type=ttype, parameters=params))
    return tuple(out)


def _item(item: Any) -> tuple[ScriptedMessage | None, bool]:
    """(flattened message or None, whether the item is model output)."""
    if isinstance(item, str):
        return ScriptedMessage(role="user", text=item), False
    if not isinstance(item, Mapping):
        return None, False
    itype = str(item.get("type") or "message")
    if itype == "message":
        role = str(item.get("role") or "user")
        return ScriptedMessage(role=role, text=content_text(item.get("content"))), role == "assistant"
    if itype == "function_call":
        return ScriptedMessage(
            role="assistant", text=f"{item.get('name', '')} {item.get('arguments', '')}"
        ), True
    if itype == "custom_tool_call":
        return ScriptedMessage(role="assistant", text=f"{item.get('name', '')} {item.get('input', '')}"), True
    if itype == "reasoning":
        return ScriptedMessage(role="assistant", text=content_text(item.get("summary"))), True
    if itype.endswith("_output"):
        out = item.get("output")
        text = out if isinstance(out, str) else content_text(out) or json.dumps(out, ensure_ascii=False)
        return ScriptedMessage(role="tool", text=text), False
    if itype.endswith("_call"):
        rest = {k: v for k, v in item.items() if k not in ("id", "type", "status")}
        return ScriptedMessage(role="assistant", text=f"{itype} {json.dumps(rest, ensure_ascii=False)}"), True
    return None, False  # item_reference, compaction markers, ...: no text, not a turn


def parse(body: Mapping[str, Any]) -> ParsedBody:
    """Extract model, conversation (``instructions`` first), tools and turn index."""
    messages: list[ScriptedMessage] = []
    flags: list[bool] = []
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        messages.append(ScriptedMessage(role="system", text=instructions))
        flags.append(False)
    raw = body.get("input")
    items = [raw] if isinstance(raw, str) else list(raw or ())
    for item in items:
        msg, is_model = _item(item)
        if msg is not None:
            messages.append(msg)
        flags.append(is_model)
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
        "input_tokens": r.prompt_tokens,
        "input_tokens_details": {"cached_tokens": r.cached_tokens},
        "output_tokens": r.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": r.total_tokens,
    }


def _message_item(r: ResolvedReply, *, done: bool) -> dict[str, Any]:
    content = (
        [{"type": "output_text", "text": r.text or "", "annotations": [], "logprobs": []}] if done else []
    )
    return {
        "type": "message",
        "id": r.make_id("msg_"),
        "role": "assistant",
        "status": "completed" if done else "in_progress",
        "content": content,
    }


def _call_item(call: ResolvedCall, *, done: bool) -> dict[str, Any]:
    status = "completed" if done else "in_progress"
    if call.kind == "custom":
        return {
            "type": "custom_tool_call",
            "id": f"ctc_{call.call_id}",
            "call_id": call.call_id,
            "name": call.name,
            "input": call.arguments if done else "",
            "status": status,
        }
    return {
        "type": "function_call",
        "id": f"fc_{call.call_id}",
        "call_id": call.call_id,
        "name": call.name,
        "arguments": call.arguments if done else "",
        "status": status,
    }


def _output(r: ResolvedReply) -> list[dict[str, Any]]:
    items = [_message_item(r, done=True)] if (r.text is not None or not r.calls) else []
    return items + [_call_item(c, done=True) for c in r.calls]


def _response(r: ResolvedReply, req: ScriptedRequest, *, final: bool) -> dict[str, Any]:
    status = ("incomplete" if r.stop_reason else "completed") if final else "in_progress"
    return {
        "id": r.make_id("resp_"),
        "object": "response",
        "created_at": CREATED,
        "status": status,
        "model": r.model,
        "output": _output(r) if final else [],
        "usage": _usage(r) if final else None,
        "error": None,
        "incomplete_details": {"reason": r.stop_reason} if final and r.stop_reason else None,
        "instructions": req.body.get("instructions"),
        "metadata": {},
        "parallel_tool_calls": bool(req.body.get("parallel_tool_calls", True)),
        "tool_choice": req.body.get("tool_choice", "auto"),
        "tools": [],
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
        "previous_response_id": req.body.get("previous_response_id"),
        "store": bool(req.body.get("store", False)),
    }


def render_json(r: ResolvedReply, req: ScriptedRequest) -> dict[str, Any]:
    """The non-streaming ``response`` object."""
    return _response(r, req, final=True)


def render_sse(r: ResolvedReply, req: ScriptedRequest) -> Iterator[bytes]:
    """The event stream, shaped by ``r.sse_mode`` (see ``ScriptedReply.sse_mode``)."""
    seq = 0
    full = r.sse_mode != "minimal"

    def ev(data: dict[str, Any]) -> bytes:
        nonlocal seq
        if full:
            data["sequence_number"] = seq
        seq += 1
        return sse_frame(data, event=data["type"])

    yield ev({"type": "response.created", "response": _response(r, req, final=False)})
    if full:
        yield ev({"type": "response.in_progress", "response": _response(r, req, final=False)})
    index = 0
    if r.text is not None or not r.calls:
        yield from _message_events(r, index, ev, full=full)
        index += 1
    for call in r.calls:
        yield from _call_events(call, index, ev, full=full)
        index += 1
    if r.sse_mode != "nocomplete":
        final = _response(r, req, final=True)
        kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
        yield ev({"type": kind, "response": final})


def _message_events(r: ResolvedReply, index: int, ev: Any, *, full: bool) -> Iterator[bytes]:
    item_id = r.make_id("msg_")
    text = r.text or ""
    yield ev(
        {"type": "response.output_item.added", "output_index": index, "item": _message_item(r, done=False)}
    )
    part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    where = {"item_id": item_id, "output_index": index, "content_index": 0}
    if full:
        yield ev({"type": "response.content_part.added", **where, "part": part})
        for piece in pieces(text):
            if piece:
                yield ev({"type": "response.output_text.delta", **where, "delta": piece, "logprobs": []})
        yield ev({"type": "response.output_text.done", **where, "text": text, "logprobs": []})
        yield ev({"type": "response.content_part.done", **where, "part": {**part, "text": text}})
    else:
        # Exactly the verified Codex sequence: one delta carrying the whole text.
        yield ev({"type": "response.output_text.delta", **where, "delta": text})
    yield ev(
        {"type": "response.output_item.done", "output_index": index, "item": _message_item(r, done=True)}
    )


def _call_events(call: ResolvedCall, index: int, ev: Any, *, full: bool) -> Iterator[bytes]:
    yield ev(
        {"type": "response.output_item.added", "output_index": index, "item": _call_item(call, done=False)}
    )
    if full:
        item_id = _call_item(call, done=False)["id"]
        where = {"item_id": item_id, "output_index": index}
        if call.kind == "custom":
            for piece in pieces(call.arguments):
                if piece:
                    yield ev({"type": "response.custom_tool_call_input.delta", **where, "delta": piece})
            yield ev({"type": "response.custom_tool_call_input.done", **where, "input": call.arguments})
        else:
            for piece in pieces(call.arguments):
                if piece:
                    yield ev({"type": "response.function_call_arguments.delta", **where, "delta": piece})
            yield ev(
                {
                    "type": "response.function_call_arguments.done",
                    **where,
                    "name": call.name,
                    "arguments": call.arguments,
                }
            )
    yield ev(
        {"type": "response.output_item.done", "output_index": index, "item": _call_item(call, done=True)}
    )
