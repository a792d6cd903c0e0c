"""The OpenAI Responses API with function tools, over real HTTP."""

from __future__ import annotations

import pytest

from skillopt.models.base import ChatRequest
from skillopt.models.profiles import build_model, load_profiles
from skillopt.models.responses_wire import RESPONSES_ONLY_MODELS, needs_responses_api
from skillopt.testing.scripted import ScriptedModelServer
from skillopt.types import Message
from tests.skillopt.models.conftest import KEY, WEATHER, conversation, with_tool_result


def _model(srv: ScriptedModelServer, spec: str = "openai_responses"):
    profiles = load_profiles(specs=[f"r={spec},base_url={srv.base_url},api_key_env=K"], environ={"K": KEY})
    return build_model(profiles["r"])


@pytest.mark.parametrize("spec", ["openai_responses", "openai,api=responses"])
def test_responses_tool_round_trip(server, spec):
    model = _model(server, spec)
    msgs = conversation()
    first = model.complete(
        ChatRequest(
            model="gpt-5.5",
            messages=msgs,
            tools=(WEATHER,),
            max_output_tokens=300,
            reasoning_effort="high",
            stage="analyst",
        )
    )
    (call,) = first.tool_calls
    assert call["name"] == "get_weather" and call["arguments"] == '{"city": "Paris"}'
    assert first.finish_reason == "tool_calls"
    assert first.usage.calls == 1 and first.usage.prompt_tokens > 0

    final = model.complete(
        ChatRequest(
            model="gpt-5.5", messages=with_tool_result(msgs, first.tool_calls, "sunny"), tools=(WEATHER,)
        )
    )
    assert final.text == "It is sunny in Paris." and final.finish_reason == "stop" and not final.tool_calls

    first_req, second_req = server.api_requests("responses")
    assert first_req.path == "/v1/responses"
    assert first_req.headers["x-skillopt-stage"] == "analyst"
    body = first_req.body
    assert body["instructions"] == "You are terse."
    assert body["input"] == [{"role": "user", "content": "What is the weather in Paris?"}]
    assert body["tools"][0] == {
        "type": "function",
        "name": "get_weather",
        "description": WEATHER.description,
        "parameters": dict(WEATHER.parameters),
        "strict": False,
    }
    assert body["max_output_tokens"] == 300 and body["reasoning"] == {"effort": "high"}
    assert body["store"] is False
    items = second_req.body["input"]
    assert items[1] == {
        "type": "function_call",
        "call_id": call["id"],
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
    }
    assert items[2] == {"type": "function_call_output", "call_id": call["id"], "output": "sunny"}
    assert second_req.turn == 1


def test_responses_usage_and_length():
    scenario = {
        "default": {
            "replies": [
                {
                    "text": "cut",
                    "usage": {"input_tokens": 120, "output_tokens": 7},
                    "stop_reason": "max_output_tokens",
                }
            ]
        }
    }
    with ScriptedModelServer(scenario, expect_auth=KEY) as srv:
        reply = _model(srv).complete(ChatRequest(model="gpt-5.4-pro", messages=conversation("hi")))
    assert reply.text == "cut"
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (120, 7)
    assert reply.finish_reason == "length"


def test_later_system_messages_stay_in_the_input(server):
    msgs = (
        Message(role="system", content="first"),
        Message(role="user", content="hi"),
        Message(role="system", content="later"),
    )
    _model(server).complete(ChatRequest(model="m", messages=msgs))
    body = server.api_requests("responses")[0].body
    assert body["instructions"] == "first"
    assert body["input"][-1] == {"role": "system", "content": "later"}


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-5-codex", True),
        ("gpt-5.1-codex", True),
        ("gpt-5.3-codex", True),
        ("gpt-5.1-codex-mini", True),
        ("codex-mini", True),
        ("codex-mini-latest", True),
        ("gpt-5.4-pro", True),
        ("openai/gpt-5-codex", True),
        ("GPT-5-CODEX", True),
        ("gpt-5.5", False),
        ("gpt-4o", False),
        ("gpt-4o-mini", False),
        ("Qwen/Qwen3.5-4B", False),
    ],
)
def test_responses_only_table(model, expected):
    assert needs_responses_api(model) is expected
    assert RESPONSES_ONLY_MODELS  # the one table
