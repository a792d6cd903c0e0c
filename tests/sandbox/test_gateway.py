"""The model gateway over real HTTP with the official SDKs: key injection, token auth, forced
model, budgets, retries, usage, and record/replay (replay works with the upstream stopped)."""

from __future__ import annotations

import json

import anthropic
import openai
import pytest

from sandbox.gateway.cache import ExchangeCache, canonical_key
from sandbox.gateway.core import Gateway, GatewayChatModel
from sandbox.gateway.http import GatewayServer
from skillopt.errors import BudgetExceeded, ReplayMiss
from skillopt.models.base import ChatRequest
from skillopt.models.openai_chat import OpenAIChatModel
from skillopt.models.profiles import ProviderProfile
from skillopt.testing.scripted import ScriptedModelServer
from skillopt.types import Message

REAL_KEY = "sk-real-provider-key-0123456789abcdef"
SCENARIO = {
    "rules": [
        {
            "name": "flaky",
            "match": {"contains": "flaky"},
            "replies": [{"error": {"status": 500, "times": 1}}, {"text": "recovered"}],
        },
        {"name": "hello", "match": {"contains": "hello"}, "replies": [{"text": "hi from upstream"}]},
    ],
}


@pytest.fixture
def upstream():
    with ScriptedModelServer(SCENARIO, expect_auth=REAL_KEY) as srv:
        yield srv


def _gateway(upstream, tmp_path, mode="off") -> Gateway:
    profiles = {
        "up": ProviderProfile(
            name="up", kind="openai_compatible", base_url=upstream.base_url, api_key=REAL_KEY
        ),
        "anth": ProviderProfile(
            name="anth", kind="anthropic", base_url=upstream.anthropic_base_url, api_key=REAL_KEY
        ),
    }
    return Gateway(profiles, cache=ExchangeCache(tmp_path / "cache"), default_mode=mode)


@pytest.fixture
def front(upstream, tmp_path):
    gw = _gateway(upstream, tmp_path)
    server = GatewayServer(gw, "127.0.0.1")
    yield gw, server
    server.close()
    gw.close()


def test_the_real_key_is_injected_and_the_rollout_token_is_all_the_agent_has(front, upstream):
    gw, server = front
    session = gw.open_session("r1", provider="up", model="forced-model")
    client = openai.OpenAI(base_url=server.url + "/v1", api_key=session.token, max_retries=0)
    reply = client.chat.completions.create(model="whatever", messages=[{"role": "user", "content": "hello"}])
    assert reply.choices[0].message.content == "hi from upstream"
    seen = upstream.api_requests("chat")[-1]
    assert seen.model == "forced-model"  # the agent cannot pick another model
    assert session.token not in json.dumps(seen.headers)  # the rollout token never leaves
    assert session.used.calls == 1 and session.used.total_tokens > 0
    assert session.exchanges[0]["status"] == 200


def test_a_wrong_or_expired_token_is_refused(front):
    gw, server = front
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="sk-not-a-rollout", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hello"}])
    session = gw.open_session("r2", provider="up", model="m")
    gw.close_session(session)
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(
            base_url=server.url + "/v1", api_key=session.token, max_retries=0
        ).chat.completions.create(model="m", messages=[{"role": "user", "content": "hello"}])


def test_streams_are_relayed_and_usage_counted(front):
    gw, server = front
    session = gw.open_session("r3", provider="up", model="m")
    client = openai.OpenAI(base_url=server.url + "/v1", api_key=session.token, max_retries=0)
    with client.responses.stream(model="m", input="hello") as stream:
        final = stream.get_final_response()
    assert "hi from upstream" in final.output_text
    assert session.used.prompt_tokens > 0 and session.used.completion_tokens > 0
    anth = gw.open_session("r3b", provider="anth", model="claude-x")
    a = anthropic.Anthropic(base_url=server.url, api_key=anth.token, max_retries=0)
    with a.messages.stream(
        model="claude-x", max_tokens=100, messages=[{"role": "user", "content": "hello"}]
    ) as s:
        msg = s.get_final_message()
    assert msg.content[0].text == "hi from upstream"
    assert anth.used.completion_tokens > 0


def test_upstream_failures_are_retried_by_the_gateway(front, upstream):
    gw, server = front
    session = gw.open_session("r4", provider="up", model="m")
    client = openai.OpenAI(base_url=server.url + "/v1", api_key=session.token, max_retries=0)
    reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "flaky"}])
    assert reply.choices[0].message.content == "recovered"
    assert [r.status for r in upstream.api_requests("chat")][-2:] == [500, 200]


def test_the_token_budget_ends_the_conversation(front):
    gw, server = front
    session = gw.open_session("r5", provider="up", model="m", budget_tokens=5)
    client = openai.OpenAI(base_url=server.url + "/v1", api_key=session.token, max_retries=0)
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hello"}])
    with pytest.raises(openai.RateLimitError, match="budget"):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hello again"}])
    assert isinstance(session.error, BudgetExceeded)


def test_record_then_replay_with_the_upstream_stopped(upstream, tmp_path):
    request = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
    gw = _gateway(upstream, tmp_path)
    server = GatewayServer(gw, "127.0.0.1")
    try:
        rec = gw.open_session("rec", provider="up", model="m", cache_mode="record")
        client = openai.OpenAI(base_url=server.url + "/v1", api_key=rec.token, max_retries=0)
        first = client.chat.completions.create(**request)
        upstream.stop()  # nothing answers upstream any more
        rep = gw.open_session("rep", provider="up", model="m", cache_mode="replay")
        client = openai.OpenAI(base_url=server.url + "/v1", api_key=rep.token, max_retries=0)
        again = client.chat.completions.create(**request)
        assert again.model_dump() == first.model_dump()
        assert rep.exchanges[0]["replayed"] is True and rep.used.calls == 1
        with pytest.raises(openai.BadRequestError, match="replay"):
            client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "never recorded"}]
            )
        assert isinstance(rep.error, ReplayMiss)
    finally:
        server.close()
        gw.close()


def test_in_service_agents_use_the_same_record_and_replay(upstream, tmp_path):
    gw = _gateway(upstream, tmp_path)
    inner = OpenAIChatModel("up", base_url=upstream.base_url, api_key=REAL_KEY, max_retries=0)
    req = ChatRequest(model="m", messages=(Message(role="user", content="hello"),))
    rec = GatewayChatModel(gw, gw.open_session("a", provider="up", model="m", cache_mode="record"), inner)
    first = rec.complete(req)
    upstream.stop()
    rep_session = gw.open_session("b", provider="up", model="m", cache_mode="replay")
    again = GatewayChatModel(gw, rep_session, inner).complete(req)
    assert (again.text, again.usage) == (first.text, first.usage)
    with pytest.raises(ReplayMiss):
        GatewayChatModel(gw, rep_session, inner).complete(
            ChatRequest(model="m", messages=(Message(role="user", content="other"),))
        )
    gw.close()


def test_the_cache_key_ignores_volatile_fields():
    a = {
        "model": "m",
        "prompt_cache_key": "x1",
        "input": [{"role": "developer", "content": "<current_date>2026-12-01</current_date> rules"}],
    }
    b = {
        "model": "m",
        "prompt_cache_key": "x2",
        "input": [{"role": "developer", "content": "<current_date>2027-01-09</current_date> rules"}],
    }
    c = {
        "model": "m",
        "input": [{"role": "user", "content": "<current_date>2027-01-09</current_date> rules"}],
    }
    assert canonical_key("responses", a) == canonical_key("responses", b)
    # Dates in user content are data: they stay in the key.
    assert canonical_key("responses", c) != canonical_key(
        "responses", {**c, "input": [{"role": "user", "content": "other"}]}
    )
