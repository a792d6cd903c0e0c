"""Retries (the SDKs' own), timeouts and error mapping, against scripted errors over real HTTP."""

from __future__ import annotations

import pytest

from skillopt.errors import ModelError, ModelTimeout, RateLimited
from skillopt.models._errors import is_retryable
from skillopt.models.anthropic_messages import AnthropicModel
from skillopt.models.azure_openai import AzureOpenAIModel
from skillopt.models.base import ChatRequest
from skillopt.models.openai_chat import OpenAIChatModel
from skillopt.models.openai_responses import OpenAIResponsesModel
from skillopt.models.roles import RoleModel, UsageTracker
from skillopt.testing.scripted import ScriptedModelServer
from skillopt.types import ModelSpec
from tests.skillopt.models.conftest import KEY, conversation

FLAKY_429 = [{"error": {"status": 429, "times": 1, "retry_after_s": 0.01}}, {"text": "recovered"}]
FLAKY_500 = [{"error": {"status": 500, "times": 1, "retry_after_s": 0.01}}, {"text": "recovered"}]


def _models(srv: ScriptedModelServer, *, max_retries: int, timeout_s: float = 30.0):
    """One model per provider kind, all pointed at ``srv``."""
    kw = {"max_retries": max_retries, "timeout_s": timeout_s}
    return {
        "chat": OpenAIChatModel("chat", base_url=srv.base_url, api_key=KEY, **kw),
        "responses": OpenAIResponsesModel("resp", base_url=srv.base_url, api_key=KEY, **kw),
        "azure": AzureOpenAIModel("az", azure_endpoint=srv.url, api_key=KEY, **kw),
        "messages": AnthropicModel("claude", base_url=srv.anthropic_base_url, api_key=KEY, **kw),
    }


def _ask(model, **kw):
    return model.complete(ChatRequest(model="m", messages=conversation("hi"), **kw))


@pytest.mark.parametrize("replies", [FLAKY_429, FLAKY_500], ids=["429", "500"])
@pytest.mark.parametrize("which", ["chat", "responses", "azure", "messages"])
def test_transient_error_retried_by_the_sdk(which, replies):
    with ScriptedModelServer({"default": {"replies": replies}}, expect_auth=KEY) as srv:
        reply = _ask(_models(srv, max_retries=2)[which])
        seen = srv.api_requests()
    assert reply.text == "recovered"
    assert [r.status for r in seen] == [replies[0]["error"]["status"], 200]  # the server saw 2 requests
    assert seen[1].headers["x-stainless-retry-count"] == "1"


@pytest.mark.parametrize("which", ["chat", "messages"])
def test_permanent_429_is_rate_limited(which):
    scenario = {
        "default": {"replies": [{"error": {"status": 429, "message": "slow down", "retry_after_s": 0.01}}]}
    }
    with ScriptedModelServer(scenario, expect_auth=KEY) as srv:
        with pytest.raises(RateLimited) as info:
            _ask(_models(srv, max_retries=2)[which])
        assert len(srv.api_requests()) == 3  # the first attempt and 2 SDK retries
    msg = info.value.message
    assert "HTTP 429" in msg and "after 2 SDK retries" in msg and "slow down" in msg
    assert "max_retries" in msg  # says what to change
    assert info.value.status == 429 and is_retryable(info.value)


@pytest.mark.parametrize("which", ["chat", "responses", "messages"])
def test_call_timeout_is_model_timeout(which):
    with ScriptedModelServer({"default": {"replies": [{"text": "late", "delay_s": 5}]}}) as srv:
        model = _models(srv, max_retries=0, timeout_s=60)[which]
        with pytest.raises(ModelTimeout, match=r"within 1s per attempt"):
            _ask(model, timeout_s=1.0)  # the call's timeout beats the profile's 60 s


def test_profile_timeout_is_the_default():
    with ScriptedModelServer({"default": {"replies": [{"text": "late", "delay_s": 5}]}}) as srv:
        model = _models(srv, max_retries=0, timeout_s=1.0)["chat"]
        with pytest.raises(ModelTimeout, match="raise timeout_s"):
            _ask(model)


@pytest.mark.parametrize("which", ["chat", "azure", "messages"])
def test_rejected_key_is_not_retried_and_not_shown(which):
    with ScriptedModelServer({"default": {"replies": ["ok"]}}, expect_auth="the-right-key") as srv:
        model = _models(srv, max_retries=3)[which]
        with pytest.raises(ModelError) as info:
            _ask(model)
        assert len(srv.api_requests()) == 1  # 401 is final
    err = info.value
    assert "rejected the credential (HTTP 401)" in err.message and not is_retryable(err)
    assert KEY not in err.message and KEY not in str(err)


def test_error_bodies_echoing_the_key_are_redacted():
    scenario = {
        "default": {"replies": [{"error": {"status": 400, "message": f"bad request from key {KEY}"}}]}
    }
    with ScriptedModelServer(scenario) as srv:
        for model in _models(srv, max_retries=0).values():
            with pytest.raises(ModelError) as info:
                _ask(model)
            assert KEY not in info.value.message and "[redacted]" in info.value.message
            assert "HTTP 400" in info.value.message and not is_retryable(info.value)


def test_unknown_model_says_what_to_check():
    scenario = {"default": {"replies": [{"error": {"status": 404, "message": "no such model"}}]}}
    with ScriptedModelServer(scenario) as srv, pytest.raises(ModelError, match="check the model name"):
        _ask(_models(srv, max_retries=0)["azure"])


def test_connection_refused_names_the_endpoint():
    srv = ScriptedModelServer().start()
    url = srv.base_url
    srv.stop()  # nothing listens there any more
    model = OpenAIChatModel("gone", base_url=url, api_key=KEY, max_retries=0)
    with pytest.raises(ModelError, match="cannot connect to the model endpoint") as info:
        _ask(model)
    assert url in info.value.message and is_retryable(info.value)


def test_role_model_does_not_repeat_a_final_error():
    with ScriptedModelServer({"default": {"replies": [{"error": {"status": 400}}]}}) as srv:
        model = OpenAIChatModel("chat", base_url=srv.base_url, api_key=KEY, max_retries=0)
        role = RoleModel(model, ModelSpec(provider="chat", model="m"), UsageTracker(), retries=2)
        with pytest.raises(ModelError, match="HTTP 400"):
            role.ask("s", "u", stage="merge")
        assert len(srv.api_requests()) == 1


def test_role_model_retries_on_top_of_the_sdk_for_transient_failures():
    scenario = {
        "default": {"replies": [{"error": {"status": 503, "times": 2, "retry_after_s": 0.01}}, "fine"]}
    }
    with ScriptedModelServer(scenario) as srv:
        model = OpenAIChatModel("chat", base_url=srv.base_url, api_key=KEY, max_retries=0)
        tracker = UsageTracker()
        role = RoleModel(model, ModelSpec(provider="chat", model="m"), tracker, retries=2)
        assert role.ask("s", "u", stage="merge") == "fine"
        assert len(srv.api_requests()) == 3
    assert tracker.snapshot()["merge"].calls == 3  # failed attempts count as calls
