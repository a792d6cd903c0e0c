"""The scripted model server against the real ``openai`` SDK and raw Codex-style SSE."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from skillopt.testing.scripted_server import ScriptedModelServer

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
RESP_WEATHER_TOOL = {"type": "function", **WEATHER_TOOL["function"]}

# The shape of Codex CLI's tools (agent-clis.md §2.4), trimmed to what matters here.
CODEX_TOOLS = [
    {
        "type": "function",
        "name": "exec_command",
        "description": "Runs a command",
        "strict": False,
        "parameters": {
            "type": "object",
            "properties": {"cmd": {"type": "string"}, "workdir": {"type": "string"}},
            "required": ["cmd"],
        },
    },
    {"type": "custom", "name": "apply_patch", "description": "Apply a patch", "format": {"type": "grammar"}},
    {"type": "web_search"},
]

SCENARIO: dict[str, Any] = {
    "name": "openai-tests",
    "models": ["gpt-scripted"],
    "rules": [
        {
            "name": "weather",
            "match": {"contains": "weather in Paris"},
            "replies": [
                {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
                {"text": "It is sunny in Paris (turn {{turn}})."},
            ],
        },
        {
            "name": "codex",
            "match": {"api": "responses", "contains": "create a file hello.txt"},
            "replies": [
                {"shell": "printf hi > hello.txt"},
                {"apply_patch": "*** Begin Patch\n*** Add File: greeting.txt\n+hello\n*** End Patch\n"},
                {"text": "Done: created hello.txt"},
            ],
        },
        {
            "name": "codex-minimal",
            "match": {"api": "responses", "contains": "minimal mode"},
            "replies": [
                {"shell": "printf hi > hello.txt", "sse_mode": "minimal"},
                {"text": "Done", "sse_mode": "minimal"},
            ],
        },
        {
            "name": "nocomplete",
            "match": {"contains": "broken stream"},
            "reply": {"text": "partial", "sse_mode": "nocomplete"},
        },
        {
            "name": "bash-tool",
            "match": {"api": "chat", "contains": "list files"},
            "replies": [{"shell": "ls -la"}, {"text": "listed"}],
        },
        {
            "name": "usage",
            "match": {"contains": "fixed usage"},
            "reply": {"text": "x", "usage": {"prompt_tokens": 7}},
        },
        {
            "name": "greet",
            "match": {"contains": "hello model"},
            "reply": {"text": "Hello! This reply is long enough to be streamed in several chunks."},
        },
    ],
}


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(SCENARIO) as srv:
        yield srv


@pytest.fixture
def client(server: ScriptedModelServer) -> Iterator[openai.OpenAI]:
    server.reset()
    with openai.OpenAI(base_url=server.base_url, api_key="sk-test-key-123", max_retries=0) as c:
        yield c


def tokens(s: str) -> int:
    return math.ceil(len(s) / 4)


GREETING = "Hello! This reply is long enough to be streamed in several chunks."


# ------------------------------------------------------------------------------------ chat


def test_chat_text_non_stream(client: openai.OpenAI, server: ScriptedModelServer) -> None:
    r = client.chat.completions.create(
        model="gpt-scripted",
        messages=[{"role": "system", "content": "be nice"}, {"role": "user", "content": "hello model"}],
    )
    assert r.choices[0].message.content == GREETING
    assert r.choices[0].finish_reason == "stop"
    assert r.model == "gpt-scripted"
    # usage: ceil(len(full request text)/4), full text = system + "\n\n" + user
    assert r.usage is not None
    assert r.usage.prompt_tokens == tokens("be nice\n\nhello model")
    assert r.usage.completion_tokens == tokens(GREETING)
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    (rec,) = server.requests
    assert (rec.api, rec.rule, rec.reply_index, rec.turn, rec.status) == ("chat", "greet", 0, 0, 200)


def test_chat_text_stream_with_usage(client: openai.OpenAI) -> None:
    chunks = list(
        client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "hello model"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text_parts = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(text_parts) > 1  # really streamed in pieces
    assert "".join(text_parts) == GREETING
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == tokens(GREETING)
    assert all(c.usage is None for c in chunks[:-1])


def test_chat_stream_without_usage_option(client: openai.OpenAI) -> None:
    chunks = list(
        client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hello model"}], stream=True
        )
    )
    assert all(c.usage is None for c in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == GREETING


def test_chat_tool_call_round_trip(client: openai.OpenAI, server: ScriptedModelServer) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "What is the weather in Paris?"}]
    r1 = client.chat.completions.create(model="m", messages=messages, tools=[WEATHER_TOOL])  # type: ignore[arg-type]
    msg = r1.choices[0].message
    assert r1.choices[0].finish_reason == "tool_calls"
    assert msg.tool_calls is not None and len(msg.tool_calls) == 1
    call = msg.tool_calls[0]
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    assert r1.usage is not None and r1.usage.completion_tokens == tokens(call.function.arguments)

    messages.append(msg.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "sunny, 21C"})
    r2 = client.chat.completions.create(model="m", messages=messages, tools=[WEATHER_TOOL])  # type: ignore[arg-type]
    assert r2.choices[0].message.content == "It is sunny in Paris (turn 1)."
    assert [(r.turn, r.reply_index) for r in server.requests] == [(0, 0), (1, 1)]
    # The tool result is part of the request text the rules see.
    assert "sunny, 21C" in json.dumps(server.requests[-1].body)


def test_chat_tool_call_streamed_as_deltas(client: openai.OpenAI) -> None:
    chunks = list(
        client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "weather in Paris"}],
            tools=[WEATHER_TOOL],  # type: ignore[list-item]
            stream=True,
        )
    )
    deltas = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    assert len(deltas) >= 2  # a head with id/name, then argument pieces
    assert deltas[0].id and deltas[0].function is not None and deltas[0].function.name == "get_weather"
    args = "".join(d.function.arguments or "" for d in deltas if d.function is not None)
    assert json.loads(args) == {"city": "Paris"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_chat_shell_maps_to_generic_bash_tool(client: openai.OpenAI) -> None:
    bash = {
        "type": "function",
        "function": {
            "name": "bash",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
    r = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "list files"}], tools=[bash]
    )  # type: ignore[list-item]
    (call,) = r.choices[0].message.tool_calls or []
    assert call.function.name == "bash"
    assert json.loads(call.function.arguments) == {"command": "ls -la"}


def test_usage_override(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "fixed usage"}])
    assert r.usage is not None
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (7, 1, 8)


def test_models_endpoint(client: openai.OpenAI) -> None:
    ids = [m.id for m in client.models.list()]
    assert ids[:2] == ["scripted-model", "gpt-scripted"]


def test_azure_deployment_path(server: ScriptedModelServer) -> None:
    server.reset()
    with openai.AzureOpenAI(
        azure_endpoint=server.url, api_key="azure-key-xyz", api_version="2024-10-21", max_retries=0
    ) as az:
        r = az.chat.completions.create(
            model="my-deployment", messages=[{"role": "user", "content": "hello model"}]
        )
    assert r.choices[0].message.content == GREETING
    (rec,) = server.requests
    assert rec.path == "/openai/deployments/my-deployment/chat/completions"
    assert rec.headers["api-key"].endswith("[redacted]") and "azure-key-xyz" not in rec.headers["api-key"]


# ------------------------------------------------------------------------------- responses


def test_responses_non_stream(client: openai.OpenAI, server: ScriptedModelServer) -> None:
    r = client.responses.create(model="gpt-scripted", instructions="be brief", input="hello model")
    assert r.output_text == GREETING
    assert r.status == "completed"
    assert r.usage is not None
    assert r.usage.input_tokens == tokens("be brief\n\nhello model")
    assert r.usage.output_tokens == tokens(GREETING)
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    assert server.requests[-1].api == "responses"


def test_responses_stream_events(client: openai.OpenAI) -> None:
    events = list(client.responses.create(model="m", input="hello model", stream=True))
    types = [e.type for e in events]
    assert types[0] == "response.created"
    assert types[-1] == "response.completed"
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert len(deltas) > 1 and "".join(deltas) == GREETING
    final = events[-1]
    assert final.type == "response.completed"
    assert final.response.output_text == GREETING
    assert final.response.usage is not None and final.response.usage.output_tokens == tokens(GREETING)
    assert [e.sequence_number for e in events] == list(range(len(events)))


def test_responses_stream_helper_final_response(client: openai.OpenAI) -> None:
    with client.responses.stream(model="m", input="hello model") as stream:
        text = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
        final = stream.get_final_response()
    assert text == GREETING
    assert final.output_text == GREETING


def test_responses_function_call_round_trip(client: openai.OpenAI, server: ScriptedModelServer) -> None:
    inputs: list[Any] = [{"role": "user", "content": "weather in Paris please"}]
    r1 = client.responses.create(model="m", input=inputs, tools=[RESP_WEATHER_TOOL])  # type: ignore[list-item]
    (call,) = [o for o in r1.output if o.type == "function_call"]
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
    inputs += [
        call.model_dump(exclude_none=True),
        {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"},
    ]
    r2 = client.responses.create(model="m", input=inputs, tools=[RESP_WEATHER_TOOL])  # type: ignore[list-item]
    assert r2.output_text == "It is sunny in Paris (turn 1)."
    assert [r.turn for r in server.requests] == [0, 1]


def test_responses_usage_adds_up_over_a_conversation(
    client: openai.OpenAI, server: ScriptedModelServer
) -> None:
    inputs: list[Any] = [{"role": "user", "content": "weather in Paris please"}]
    r1 = client.responses.create(model="m", input=inputs, tools=[RESP_WEATHER_TOOL])  # type: ignore[list-item]
    call = r1.output[0]
    assert call.type == "function_call"
    inputs += [
        call.model_dump(exclude_none=True),
        {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"},
    ]
    r2 = client.responses.create(model="m", input=inputs, tools=[RESP_WEATHER_TOOL])  # type: ignore[list-item]
    assert r1.usage is not None and r2.usage is not None
    # The second prompt holds the first: user text + the call + the tool output.
    text2 = f"weather in Paris please\n\nget_weather {call.arguments}\n\nsunny"
    assert r2.usage.input_tokens == tokens(text2)
    assert r1.usage.output_tokens == tokens(call.arguments)
    assert r2.usage.output_tokens == tokens("It is sunny in Paris (turn 1).")


# -------------------------------------------------------------------- Codex-style raw SSE


def codex_body(
    *extra_items: dict[str, Any], prompt: str = "create a file hello.txt containing hi"
) -> dict[str, Any]:
    """A trimmed Codex CLI request (agent-clis.md §2.4): developer + user messages, tools."""
    return {
        "model": "gpt-5.5",
        "stream": True,
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "input": [
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": "You are Codex"}],
            },
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]},
            *extra_items,
        ],
        "tools": CODEX_TOOLS,
    }


def sse_events(server: ScriptedModelServer, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """POST like Codex does and parse the raw frames: (event line, data JSON) pairs."""
    headers = {"authorization": "Bearer dummy", "accept": "text/event-stream", "originator": "codex_exec"}
    frames: list[tuple[str, dict[str, Any]]] = []
    with (
        httpx.Client(timeout=10) as http,
        http.stream("POST", f"{server.base_url}/responses", json=body, headers=headers) as resp,
    ):
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        raw = "".join(resp.iter_text())
    for block in raw.split("\n\n"):
        if not block.strip():
            continue
        lines = block.split("\n")
        assert lines[0].startswith("event: ") and lines[1].startswith("data: "), block
        frames.append((lines[0].removeprefix("event: "), json.loads(lines[1].removeprefix("data: "))))
    for event, data in frames:
        assert event == data["type"]
    return frames


def collapse(names: list[str]) -> list[str]:
    out: list[str] = []
    for n in names:
        if not out or out[-1] != n:
            out.append(n)
    return out


def test_codex_sse_function_call_exact_sequence(server: ScriptedModelServer) -> None:
    frames = sse_events(server, codex_body())
    names = [e for e, _ in frames]
    assert collapse(names) == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    done = frames[names.index("response.output_item.done")][1]["item"]
    assert (
        done["type"] == "function_call" and done["name"] == "exec_command" and done["status"] == "completed"
    )
    assert json.loads(done["arguments"]) == {"cmd": "printf hi > hello.txt"}
    added = frames[names.index("response.output_item.added")][1]["item"]
    assert added["arguments"] == "" and added["call_id"] == done["call_id"] and added["id"] == done["id"]
    deltas = "".join(d["delta"] for e, d in frames if e == "response.function_call_arguments.delta")
    assert deltas == done["arguments"]
    completed = frames[-1][1]["response"]
    assert completed["status"] == "completed"
    assert set(completed["usage"]) >= {
        "input_tokens",
        "output_tokens",
        "total_tokens",
        "input_tokens_details",
    }
    assert completed["output"] == [done]


def test_codex_sse_turns_shell_patch_text(server: ScriptedModelServer) -> None:
    """The Codex loop: exec_command, then apply_patch (custom tool), then the final message."""
    call1 = sse_events(server, codex_body())[-1][1]["response"]["output"][0]
    out1 = {
        "type": "function_call_output",
        "call_id": call1["call_id"],
        "output": "Process exited with code 0",
    }
    frames2 = sse_events(server, codex_body(call1, out1))
    names2 = collapse([e for e, _ in frames2])
    assert "response.custom_tool_call_input.delta" in names2
    patch = frames2[-1][1]["response"]["output"][0]
    assert patch["type"] == "custom_tool_call" and patch["name"] == "apply_patch"
    assert patch["input"].startswith("*** Begin Patch\n*** Add File: greeting.txt")
    out2 = {"type": "custom_tool_call_output", "call_id": patch["call_id"], "output": "Success."}
    frames3 = sse_events(server, codex_body(call1, out1, patch, out2))
    assert collapse([e for e, _ in frames3]) == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    msg = frames3[-1][1]["response"]["output"][0]
    assert msg["type"] == "message" and msg["content"][0]["text"] == "Done: created hello.txt"
    assert [r.turn for r in server.requests[-3:]] == [0, 1, 2]


def test_codex_sse_minimal_mode_matches_verified_sequence(server: ScriptedModelServer) -> None:
    """``sse_mode: minimal`` reproduces agent-clis.md §2.5 event for event."""
    frames = sse_events(server, codex_body(prompt="minimal mode"))
    assert [e for e, _ in frames] == [
        "response.created",
        "response.output_item.added",
        "response.output_item.done",
        "response.completed",
    ]
    call = frames[2][1]["item"]
    out = {"type": "function_call_output", "call_id": call["call_id"], "output": "ok"}
    frames2 = sse_events(server, codex_body(call, out, prompt="minimal mode"))
    assert [e for e, _ in frames2] == [
        "response.created",
        "response.output_item.added",
        "response.output_text.delta",
        "response.output_item.done",
        "response.completed",
    ]
    assert frames2[1][1]["item"] == {
        "type": "message",
        "id": frames2[1][1]["item"]["id"],
        "role": "assistant",
        "status": "in_progress",
        "content": [],
    }
    assert frames2[2][1]["delta"] == "Done"


def test_responses_nocomplete_mode_breaks_sdk_stream_helper(client: openai.OpenAI) -> None:
    with client.responses.stream(model="m", input="broken stream") as stream:
        names = [e.type for e in stream]
        assert "response.completed" not in names
        with pytest.raises(RuntimeError, match=r"response\.completed"):
            stream.get_final_response()


def test_sse_ids_are_deterministic(server: ScriptedModelServer) -> None:
    a = sse_events(server, codex_body())
    b = sse_events(server, codex_body())
    assert a == b
