"""OpenAI Chat Completions and OpenAI-compatible servers (vLLM/Qwen), over real HTTP."""

from __future__ import annotations

import pytest

from skillopt.errors import ConfigError
from skillopt.models.base import ChatModel, ChatRequest
from skillopt.models.openai_chat import OpenAIChatModel
from skillopt.models.profiles import ProviderProfile, build_model, load_profiles
from skillopt.testing.scripted import ScriptedModelServer
from tests.skillopt.models.conftest import KEY, WEATHER, conversation, with_tool_result


def _compat(srv: ScriptedModelServer, **options) -> ChatModel:
    profile = ProviderProfile(name="vllm", kind="openai_compatible", base_url=srv.base_url, **options)
    return build_model(profile)


def test_chat_tool_round_trip(server):
    profiles = load_profiles(
        specs=[f"oa=openai,base_url={server.base_url},api_key_env=MY_KEY"], environ={"MY_KEY": KEY}
    )
    model = build_model(profiles["oa"])
    assert isinstance(model, ChatModel)
    msgs = conversation()
    first = model.complete(ChatRequest(model="gpt-4o", messages=msgs, tools=(WEATHER,), stage="rollout"))
    assert first.finish_reason == "tool_calls"
    assert first.text == ""
    (call,) = first.tool_calls
    assert call["name"] == "get_weather" and call["arguments"] == '{"city": "Paris"}'
    assert first.usage.calls == 1 and first.usage.prompt_tokens > 0 and first.usage.completion_tokens > 0

    final = model.complete(
        ChatRequest(
            model="gpt-4o", messages=with_tool_result(msgs, first.tool_calls, "sunny, 21C"), tools=(WEATHER,)
        )
    )
    assert final.text == "It is sunny in Paris." and final.finish_reason == "stop"

    first_req, second_req = server.api_requests("chat")
    assert first_req.path == "/v1/chat/completions"
    assert first_req.headers["x-skillopt-stage"] == "rollout"
    assert first_req.body["tools"][0]["function"]["name"] == "get_weather"
    sent = second_req.body["messages"]
    assert sent[2]["tool_calls"][0]["id"] == call["id"]
    assert sent[3] == {"role": "tool", "content": "sunny, 21C", "tool_call_id": call["id"]}


def test_constructor_signature_kept(server):
    """The sandbox service and the controller build it directly."""
    model = OpenAIChatModel("direct", base_url=server.base_url, api_key=KEY, max_retries=0)
    assert model.complete(ChatRequest(model="m", messages=conversation("hi"))).text == "ok"


@pytest.mark.parametrize("param", ["max_tokens", "max_completion_tokens"])
def test_token_param(param):
    with ScriptedModelServer({"default": {"replies": ["ok"]}}) as srv:
        _compat(srv, token_param=param).complete(
            ChatRequest(model="qwen", messages=conversation("hi"), max_output_tokens=77)
        )
        body = srv.api_requests("chat")[0].body
    other = {"max_tokens", "max_completion_tokens"} - {param}
    assert body[param] == 77 and not other & set(body)


@pytest.mark.parametrize(
    ("thinking", "wire"),
    [("server_default", None), ("enabled", True), ("disabled", False)],
)
def test_qwen_thinking_wire_states(thinking, wire):
    with ScriptedModelServer({"default": {"replies": ["ok"]}}) as srv:
        model = _compat(srv, thinking=thinking, extra={"top_k": 20})
        model.complete(ChatRequest(model="Qwen/Qwen3.5-4B", messages=conversation("hi")))
        body = srv.api_requests("chat")[0].body
    assert body["top_k"] == 20  # profile extra fields are sent as body fields
    if wire is None:
        assert "chat_template_kwargs" not in body
    else:
        assert body["chat_template_kwargs"] == {"enable_thinking": wire}


def test_qwen_thinking_merges_other_template_kwargs():
    with ScriptedModelServer({"default": {"replies": ["ok"]}}) as srv:
        model = _compat(srv, thinking="disabled", extra={"chat_template_kwargs": {"custom": 1}})
        model.complete(
            ChatRequest(model="q", messages=conversation("hi"), extra={"chat_template_kwargs": {"other": 2}})
        )
        body = srv.api_requests("chat")[0].body
    assert body["chat_template_kwargs"] == {"custom": 1, "other": 2, "enable_thinking": False}


def test_qwen_thinking_conflicts_are_errors(tmp_path):
    with pytest.raises(ConfigError, match="conflicts"):
        ProviderProfile(
            name="q",
            kind="openai_compatible",
            base_url="http://h/v1",
            thinking="enabled",
            extra={"chat_template_kwargs": {"enable_thinking": False}},
        )
    with ScriptedModelServer({"default": {"replies": ["ok"]}}) as srv:
        model = _compat(srv, thinking="enabled")
        with pytest.raises(ConfigError, match="conflicts"):
            model.complete(
                ChatRequest(
                    model="q",
                    messages=conversation("hi"),
                    extra={"chat_template_kwargs": {"enable_thinking": False}},
                )
            )
        assert srv.api_requests() == []  # refused before anything was sent
    # YAML reads `thinking: false` as a boolean: refused, not guessed.
    file = tmp_path / "providers.yaml"
    file.write_text("providers:\n  q: {kind: openai_compatible, base_url: 'http://h/v1', thinking: false}\n")
    with pytest.raises(ConfigError, match="ambiguous"):
        load_profiles(file=file, environ={})
    with pytest.raises(ConfigError, match="only Chat Completions"):
        ProviderProfile(
            name="q", kind="openai_compatible", base_url="http://h/v1", api="responses", thinking="enabled"
        )


def test_reasoning_effort_only_without_tools():
    with ScriptedModelServer({"default": {"replies": ["ok"]}}) as srv:
        model = _compat(srv)
        model.complete(ChatRequest(model="o", messages=conversation("hi"), reasoning_effort="low"))
        model.complete(
            ChatRequest(model="o", messages=conversation("hi"), reasoning_effort="low", tools=(WEATHER,))
        )
        with_effort, with_tools = (r.body for r in srv.api_requests("chat"))
    assert with_effort["reasoning_effort"] == "low"
    assert "reasoning_effort" not in with_tools


def test_auto_routes_codex_models_to_responses(server):
    model = OpenAIChatModel("oa", base_url=server.base_url, api_key=KEY, api="auto", max_retries=0)
    assert model.complete(ChatRequest(model="gpt-4o", messages=conversation("hi"))).text == "ok"
    assert model.complete(ChatRequest(model="gpt-5.3-codex", messages=conversation("hi"))).text == "ok"
    assert [r.api for r in server.api_requests()] == ["chat", "responses"]


def test_openai_kind_defaults_to_auto_and_requires_a_key():
    assert ProviderProfile(name="o", kind="openai").api == "auto"
    assert ProviderProfile(name="c", kind="openai_compatible", base_url="http://h/v1").api == "chat"
    with pytest.raises(ConfigError, match="needs a key"):
        load_profiles(specs=["o=openai"], environ={})


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_bulk_fields_reach_the_wire_unchanged(api):
    """Messages/input and tools skip the SDK's per-parameter walk (``_sent_as_is``): the body on
    the wire is still exactly what we built, with the profile's extra fields beside it."""
    from skillopt.models.openai_chat import to_openai_messages
    from skillopt.models.responses_wire import to_responses_input

    msgs = conversation("hi")
    with ScriptedModelServer({"default": {"replies": ["ok"]}}) as srv:
        model = _compat(srv, api=api, extra={"top_k": 20})
        assert model.complete(ChatRequest(model="m", messages=msgs, tools=(WEATHER,))).text == "ok"
        (req,) = srv.api_requests(api)
    assert req.body["model"] == "m" and req.body["top_k"] == 20
    if api == "chat":
        assert req.body["messages"] == to_openai_messages(msgs)
        assert req.body["tools"][0]["function"]["name"] == "get_weather"
    else:
        instructions, items = to_responses_input(msgs)
        assert req.body["input"] == items and req.body.get("instructions") == (instructions or None)
        assert req.body["tools"][0]["name"] == "get_weather"
