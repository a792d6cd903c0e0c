"""Anthropic Messages (``POST /v1/messages``, also ``?beta=true``): parse and format replies.

Claude Code and the official ``anthropic`` SDK both speak this. SSE frames are
``event: <type>`` + ``data: <json>``: message_start, per block content_block_start /
content_block_delta (``text_delta`` or ``input_json_delta``) / content_block_stop,
message_delta (stop_reason, output usage), message_stop (agent-clis.md §5).

Turn index: the number of runs of consecutive ``assistant`` messages in ``messages`` (one per
model turn; a turn split into several assistant messages still counts once). Tool results
arrive as ``tool_result`` blocks in the next user message and do not count themselves.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from skillopt.testing.scripted.render import ResolvedReply, pieces, sse_frame
from skillopt.testing.scripted.request import (
    OfferedTool,
    ParsedBody,
    ScriptedMessage,
    ScriptedRequest,
    content_text,
    count_runs,
)
from skillopt.testing.scripted.scenario import ScenarioError

__all__ = ["API", "CALL_PREFIX", "parse", "render_json", "render_sse"]

API = "messages"
CALL_PREFIX = "toolu_"


def _tools(body: Mapping[str, Any]) -> tuple[OfferedTool, ...]:
    out: list[OfferedTool] = []
    for t in body.get("tools") or ():
        if not isinstance(t, Mapping) or not isinstance(t.get("name"), str):
            continue
        ttype = str(t.get("type") or "custom")
        given = t.get("input_schema")
        params: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
        # Client tools ("custom" or untyped) take a JSON object like a function tool.
        out.append(
            OfferedTool(name=t["name"], type="function" if ttype == "custom" else ttype, parameters=params)
        )
    return tuple(out)


def _blocks(role: str, content: Any) -> list[ScriptedMessage]:
    """One message → flattened messages: tool results become separate ``tool`` messages."""
    if not isinstance(content, list):
        return [ScriptedMessage(role=role, text=content_text(content))]
    out: list[ScriptedMessage] = []
    texts: list[str] = []

    def flush() -> None:
        if texts:
            out.append(ScriptedMessage(role=role, text="\n".join(texts)))
            texts.clear()

    for block in content:
        if isinstance(block, str):
            texts.append(block)
            continue
        if not isinstance(block, Mapping):
            continue
        btype = block.get("type")
        if btype == "text":
            texts.append(str(block.get("text") or ""))
        elif btype in ("tool_use", "server_tool_use"):
            texts.append(f"{block.get('name', '')} {json.dumps(block.get('input', {}), ensure_ascii=False)}")
        elif btype == "tool_result" or str(btype).endswith("_tool_result"):
            flush()
            out.append(ScriptedMessage(role="tool", text=content_text(block.get("content"))))
    flush()
    return out or [ScriptedMessage(role=role, text="")]


def parse(body: Mapping[str, Any]) -> ParsedBody:
    """Extract model, conversation (``system`` first), tools and turn index."""
    messages: list[ScriptedMessage] = []
    system = content_text(body.get("system"))
    if system:
        messages.append(ScriptedMessage(role="system", text=system))
    flags: list[bool] = []
    for m in body.get("messages") or ():
        if not isinstance(m, Mapping):
            continue
        role = str(m.get("role") or "user")
        messages.extend(_blocks(role, m.get("content")))
        flags.append(role == "assistant")
    # Claude Code also sends a role "system" message inside `messages` (skills list, env).
    all_system = "\n\n".join(m.text for m in messages if m.role == "system" and m.text)
    return ParsedBody(
        model=str(body.get("model") or ""),
        stream=bool(body.get("stream")),
        system=all_system,
        messages=tuple(messages),
        tools=_tools(body),
        turn=count_runs(flags),
    )


def _input(call: Any) -> dict[str, Any]:
    try:
        value = json.loads(call.arguments) if call.arguments else {}
    except json.JSONDecodeError as exc:
        raise ScenarioError(
            f"scripted server: tool_use {call.name!r} needs JSON object arguments, got {call.arguments!r}"
        ) from exc
    if not isinstance(value, dict):
        raise ScenarioError(f"scripted server: tool_use {call.name!r} arguments must be a JSON object")
    return value


def _content(r: ResolvedReply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if r.text is not None or not r.calls:
        blocks.append({"type": "text", "text": r.text or ""})
    for call in r.calls:
        blocks.append({"type": "tool_use", "id": call.call_id, "name": call.name, "input": _input(call)})
    return blocks


def _stop(r: ResolvedReply) -> str:
    return r.stop_reason or ("tool_use" if r.calls else "end_turn")


def _usage(r: ResolvedReply, output_tokens: int) -> dict[str, int]:
    # Anthropic's input_tokens are the ones neither read from nor written to the cache.
    read, write = r.cached_tokens, r.cache_write_tokens
    return {
        "input_tokens": max(0, r.prompt_tokens - read - write),
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": write,
        "cache_read_input_tokens": read,
    }


def render_json(r: ResolvedReply, req: ScriptedRequest) -> dict[str, Any]:
    """The non-streaming ``message`` body."""
    return {
        "id": r.make_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": r.model,
        "content": _content(r),
        "stop_reason": _stop(r),
        "stop_sequence": None,
        "usage": _usage(r, r.completion_tokens),
    }


def render_sse(r: ResolvedReply, req: ScriptedRequest) -> Iterator[bytes]:
    """The Messages event stream."""
    blocks = _content(r)  # validates tool inputs before the first byte is sent

    def ev(data: dict[str, Any]) -> bytes:
        return sse_frame(data, event=data["type"])

    start = {**render_json(r, req), "content": [], "stop_reason": None, "usage": _usage(r, 1)}
    yield ev({"type": "message_start", "message": start})
    for i, block in enumerate(blocks):
        if block["type"] == "text":
            yield ev(
                {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}}
            )
            for piece in pieces(block["text"]):
                if piece:
                    yield ev(
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {"type": "text_delta", "text": piece},
                        }
                    )
        else:
            head = {**block, "input": {}}
            yield ev({"type": "content_block_start", "index": i, "content_block": head})
            for piece in pieces(json.dumps(block["input"], ensure_ascii=False)):
                yield ev(
                    {
                        "type": "content_block_delta",
                        "index": i,
                        "delta": {"type": "input_json_delta", "partial_json": piece},
                    }
                )
        yield ev({"type": "content_block_stop", "index": i})
    yield ev(
        {
            "type": "message_delta",
            "delta": {"stop_reason": _stop(r), "stop_sequence": None},
            "usage": {"output_tokens": r.completion_tokens},
        }
    )
    yield ev({"type": "message_stop"})
