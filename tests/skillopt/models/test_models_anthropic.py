"""The Anthropic Messages API through the official anthropic SDK, over real HTTP."""

from __future__ import annotations

import json

from skillopt.models.anthropic_messages import THINKING_KEY, to_anthropic_messages
from skillopt.models.base import ChatRequest
from skillopt.models.profiles import build_model, load_profiles
from skillopt.testing.scripted import ScriptedModelServer
from skillopt.types import Message
from tests.skillopt.models.conftest import KEY, WEATHER, conversation, with_tool_result


def _model(srv: ScriptedModelServer, **options):
    env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": srv.anthropic_base_url}
    profiles = load_profiles(environ=env)  # the automatic profile
    profile = profiles["anthropic"]
    if options:
        from dataclasses import replace

        profile = replace(profile, **options)
    return build_model(profile)


def test_tool_use_round_trip(server):
    model = _model(server)
    msgs = conversation()
    first = model.complete(
        ChatRequest(model="claude-sonnet-4-6", messages=msgs, tools=(WEATHER,), stage="rollout")
    )
    (call,) = first.tool_calls
    assert call["id"].startswith("toolu_") and call["name"] == "get_weather"
    assert json.loads(call["arguments"]) == {"city": "Paris"}
    assert first.finish_reason == "tool_calls"

    final = model.complete(
        ChatRequest(
            model="claude-sonnet-4-6",
            messages=with_tool_result(msgs, first.tool_calls, "sunny"),
            tools=(WEATHER,),
        )
    )
    assert final.text == "It is sunny in Paris." and final.finish_reason == "stop"
    assert final.usage.calls == 1 and final.usage.prompt_tokens > 0 and final.usage.completion_tokens > 0

    first_req, second_req = server.api_requests("messages")
    assert first_req.path == "/v1/messages"
    assert first_req.headers["x-skillopt-stage"] == "rollout"
    body = first_req.body
    assert body["system"] == "You are terse."
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "What is the weather in Paris?"}]}
    ]
    assert body["max_tokens"] == 8192  # the profile default: the API requires one
    assert body["tools"] == [
        {"name": "get_weather", "description": WEATHER.description, "input_schema": dict(WEATHER.parameters)}
    ]
    assistant, tool_result = second_req.body["messages"][1:]
    assert assistant == {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": call["id"], "name": "get_weather", "input": {"city": "Paris"}}
        ],
    }
    assert tool_result == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": "sunny"}],
    }
    assert second_req.turn == 1


def test_usage_max_tokens_and_effort():
    scenario = {"default": {"replies": [{"text": "hi", "usage": {"input_tokens": 40, "output_tokens": 9}}]}}
    with ScriptedModelServer(scenario, expect_auth=KEY) as srv:
        model = _model(srv, max_tokens=2048)
        reply = model.complete(
            ChatRequest(
                model="claude-x", messages=conversation("hi"), temperature=0.2, reasoning_effort="high"
            )
        )
        model.complete(ChatRequest(model="claude-x", messages=conversation("hi"), reasoning_effort="none"))
        body, no_effort = (r.body for r in srv.api_requests())
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (40, 9)
    assert body["max_tokens"] == 2048
    assert body["output_config"] == {"effort": "high"}
    assert "temperature" not in body  # the Messages API of anthropic 2.x has no temperature
    assert "output_config" not in no_effort


def test_thinking_budget_on_the_wire():
    with ScriptedModelServer({"default": {"replies": ["hi"]}}, expect_auth=KEY) as srv:
        _model(srv, thinking_budget_tokens=2048).complete(
            ChatRequest(
                model="claude-x", messages=conversation("hi"), max_output_tokens=1000, temperature=0.5
            )
        )
        body = srv.api_requests()[0].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] == 1000 + 2048  # the answer keeps its 1000 on top of the budget


def test_thinking_blocks_go_back_with_their_tool_use():
    thinking = [{"type": "thinking", "thinking": "look it up", "signature": "sig"}]
    calls = (
        {"id": "toolu_1", "name": "get_weather", "arguments": '{"city": "Oslo"}', THINKING_KEY: thinking},
    )
    msgs = (
        Message(role="system", content="s1"),
        Message(role="user", content="weather?"),
        Message(role="assistant", content="Checking.", tool_calls=calls),
        Message(role="tool", content="rain", tool_call_id="toolu_1"),
        Message(role="user", content="and tomorrow?"),
        Message(role="system", content="s2"),
    )
    system, messages = to_anthropic_messages(msgs)
    assert system == "s1\n\ns2"
    assert messages[1]["content"] == [
        *thinking,
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}},
    ]
    # The tool result and the next user text merge into one user message, result first.
    assert messages[2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "rain"},
            {"type": "text", "text": "and tomorrow?"},
        ],
    }
