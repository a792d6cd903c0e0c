"""The scripted model server against the real ``anthropic`` SDK and raw Claude Code-style SSE."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import pytest

from skillopt.testing.scripted_server import ScriptedModelServer

WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
# Claude Code's Bash tool (agent-clis.md §5), trimmed.
BASH_TOOL = {
    "name": "Bash",
    "description": "Run a shell command",
    "input_schema": {
        "type": "object",
        "properties": {
            "command": {"type": "string"},
            "description": {"type": "string"},
            "timeout": {"type": "number"},
        },
        "required": ["command"],
    },
}
GREETING = "Hello from the scripted Claude, streamed in several pieces."

SCENARIO: dict[str, Any] = {
    "rules": [
        {
            "name": "weather",
            "match": {"api": "messages", "contains": "weather in Paris"},
            "replies": [
                {
                    "text": "Let me check.",
                    "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}],
                },
                {"text": "Sunny in Paris."},
            ],
        },
        {
            "name": "claude-code",
            "match": {"api": "messages", "contains": "create a file hello.txt"},
            "replies": [{"shell": "printf hi > hello.txt"}, {"text": "Done: created hello.txt"}],
        },
        {"name": "greet", "match": {"contains": "hello claude"}, "reply": GREETING},
    ]
}


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(SCENARIO) as srv:
        yield srv


@pytest.fixture
def client(server: ScriptedModelServer) -> Iterator[anthropic.Anthropic]:
    server.reset()
    with anthropic.Anthropic(base_url=server.anthropic_base_url, api_key="sk-ant-test", max_retries=0) as c:
        yield c


def tokens(s: str) -> int:
    return math.ceil(len(s) / 4)


def test_messages_create_text(client: anthropic.Anthropic, server: ScriptedModelServer) -> None:
    m = client.messages.create(
        model="claude-fake-1",
        max_tokens=100,
        system="sys",
        messages=[{"role": "user", "content": "hello claude"}],
    )
    assert [b.type for b in m.content] == ["text"]
    assert m.content[0].text == GREETING  # type: ignore[union-attr]
    assert m.stop_reason == "end_turn"
    assert m.model == "claude-fake-1"
    assert m.usage.input_tokens == tokens("sys\n\nhello claude")
    assert m.usage.output_tokens == tokens(GREETING)
    (rec,) = server.requests
    assert (rec.api, rec.path, rec.rule, rec.status) == ("messages", "/v1/messages", "greet", 200)


def test_messages_stream_final_message(client: anthropic.Anthropic) -> None:
    with client.messages.stream(
        model="claude-fake-1", max_tokens=100, messages=[{"role": "user", "content": "hello claude"}]
    ) as stream:
        pieces = list(stream.text_stream)
        final = stream.get_final_message()
    assert len(pieces) > 1 and "".join(pieces) == GREETING
    assert final.content[0].text == GREETING  # type: ignore[union-attr]
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens == tokens(GREETING)


def test_tool_use_round_trip(client: anthropic.Anthropic, server: ScriptedModelServer) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "What is the weather in Paris?"}]
    m1 = client.messages.create(model="c", max_tokens=100, messages=messages, tools=[WEATHER_TOOL])  # type: ignore[arg-type]
    assert m1.stop_reason == "tool_use"
    assert [b.type for b in m1.content] == ["text", "tool_use"]
    tool_use = m1.content[1]
    assert tool_use.type == "tool_use"
    assert tool_use.name == "get_weather" and tool_use.input == {"city": "Paris"}
    assert tool_use.id.startswith("toolu_")

    messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in m1.content]})
    messages.append(
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_use.id, "content": "sunny"}]}
    )
    m2 = client.messages.create(model="c", max_tokens=100, messages=messages, tools=[WEATHER_TOOL])  # type: ignore[arg-type]
    assert m2.content[0].text == "Sunny in Paris."  # type: ignore[union-attr]
    assert [(r.turn, r.reply_index) for r in server.requests] == [(0, 0), (1, 1)]


def test_tool_use_streamed(client: anthropic.Anthropic) -> None:
    with client.messages.stream(
        model="c",
        max_tokens=100,
        messages=[{"role": "user", "content": "weather in Paris"}],
        tools=[WEATHER_TOOL],  # type: ignore[list-item]
    ) as stream:
        events = [e.type for e in stream]
        final = stream.get_final_message()
    assert "input_json" in events
    assert final.stop_reason == "tool_use"
    tool_use = final.content[1]
    assert tool_use.type == "tool_use" and tool_use.input == {"city": "Paris"}


def test_count_tokens(client: anthropic.Anthropic) -> None:
    r = client.messages.count_tokens(model="c", messages=[{"role": "user", "content": "hello claude"}])
    assert r.input_tokens == tokens("hello claude")


def test_probes_answer_200(server: ScriptedModelServer) -> None:
    with httpx.Client(timeout=5) as http:
        assert http.head(f"{server.url}/api/hello").status_code == 200
        r = http.get(f"{server.url}/")
        assert r.status_code == 200 and r.json()["ok"] is True


def claude_code_events(
    server: ScriptedModelServer, messages: list[dict[str, Any]]
) -> list[tuple[str, dict[str, Any]]]:
    """POST like Claude Code (``?beta=true``, x-api-key, stream) and parse the raw frames."""
    body = {
        "model": "claude-opus-5-5",
        "max_tokens": 128000,
        "stream": True,
        "system": [{"type": "text", "text": "You are Claude Code"}],
        "messages": messages,
        "tools": [BASH_TOOL],
    }
    headers = {"x-api-key": "dummy", "anthropic-version": "2023-06-01", "x-app": "cli"}
    with (
        httpx.Client(timeout=10) as http,
        http.stream("POST", f"{server.url}/v1/messages?beta=true", json=body, headers=headers) as resp,
    ):
        assert resp.status_code == 200
        raw = "".join(resp.iter_text())
    frames = []
    for block in raw.strip().split("\n\n"):
        event, data = block.split("\n")
        frames.append((event.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    assert all(e == d["type"] for e, d in frames)
    return frames


def test_claude_code_sse_shell_then_text(server: ScriptedModelServer) -> None:
    server.reset()
    user = {"role": "user", "content": [{"type": "text", "text": "create a file hello.txt containing hi"}]}
    frames = claude_code_events(server, [user])
    names = [e for e, _ in frames]
    n_deltas = names.count("content_block_delta")
    assert names == [
        "message_start",
        "content_block_start",
        *["content_block_delta"] * n_deltas,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    block = frames[1][1]["content_block"]
    assert block == {"type": "tool_use", "id": block["id"], "name": "Bash", "input": {}}
    partial = "".join(d["delta"]["partial_json"] for e, d in frames if e == "content_block_delta")
    assert json.loads(partial) == {"command": "printf hi > hello.txt", "description": "Run shell command"}
    assert frames[-2][1]["delta"]["stop_reason"] == "tool_use"
    assert frames[0][1]["message"]["usage"]["input_tokens"] > 0

    assistant = {"role": "assistant", "content": [{**block, "input": json.loads(partial)}]}
    result = {
        "role": "user",
        "content": [
            {
                "tool_use_id": block["id"],
                "type": "tool_result",
                "content": "(Bash completed with no output)",
                "is_error": False,
            }
        ],
    }
    frames2 = claude_code_events(server, [user, assistant, result])
    assert frames2[1][1]["content_block"] == {"type": "text", "text": ""}
    assert (
        "".join(d["delta"]["text"] for e, d in frames2 if e == "content_block_delta")
        == "Done: created hello.txt"
    )
    assert frames2[-2][1]["delta"]["stop_reason"] == "end_turn"
    recs = server.requests
    assert [(r.query, r.turn, r.headers["x-api-key"]) for r in recs] == [
        ("beta=true", 0, "d…[redacted]"),
        ("beta=true", 1, "d…[redacted]"),
    ]


def test_error_shape_is_anthropic(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.BadRequestError) as info:
        client.messages.create(
            model="c", max_tokens=10, messages=[{"role": "user", "content": "nothing scripted"}]
        )
    body = info.value.body
    assert isinstance(body, dict) and body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert "no scenario rule matched" in body["error"]["message"]
