"""Helpers for the provider tests: every test talks to the real scripted model server over HTTP
with the real SDKs; nothing is mocked."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from skillopt.models.base import ToolSpec
from skillopt.testing.scripted import ScriptedModelServer
from skillopt.types import Message

KEY = "sk-test-0123456789abcdef"  # long enough that a leak is unmistakable

WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather of a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)

WEATHER_SCENARIO = {
    "rules": [
        {
            "name": "weather",
            "match": {"contains": "weather"},
            "replies": [
                {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
                {"text": "It is sunny in Paris."},
            ],
        }
    ],
    "default": {"replies": [{"text": "ok"}]},
}


def conversation(user: str = "What is the weather in Paris?") -> tuple[Message, ...]:
    return (Message(role="system", content="You are terse."), Message(role="user", content=user))


def with_tool_result(messages: tuple[Message, ...], calls, result: str) -> tuple[Message, ...]:
    """The conversation after the model's tool calls and our tool result."""
    return (
        *messages,
        Message(role="assistant", content="", tool_calls=tuple(calls)),
        Message(role="tool", content=result, tool_call_id=calls[0]["id"]),
    )


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    """A scripted server with the weather scenario that demands our test key."""
    with ScriptedModelServer(WEATHER_SCENARIO, expect_auth=KEY) as srv:
        yield srv
