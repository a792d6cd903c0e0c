"""Token accounting per stage and cost, over real calls to the scripted server."""

from __future__ import annotations

import json

import pytest

from skillopt.config.schema import ModelConfig
from skillopt.models.anthropic_messages import AnthropicModel
from skillopt.models.openai_chat import OpenAIChatModel
from skillopt.models.openai_responses import OpenAIResponsesModel
from skillopt.models.roles import PriceTable, RoleModel, UsageTracker
from skillopt.testing.scripted import ScriptedModelServer
from skillopt.types import ModelSpec, Usage

# Each stage's replies report fixed token counts, so the totals are known exactly.
SCENARIO = {
    "rules": [
        {
            "name": "analyst",
            "match": {"contains": "analyse"},
            "reply": {"text": "analysis", "usage": {"prompt_tokens": 1000, "completion_tokens": 200}},
        },
        {
            "name": "merge",
            "match": {"contains": "merge"},
            "reply": {"text": "merged", "usage": {"prompt_tokens": 300, "completion_tokens": 50}},
        },
    ]
}


@pytest.mark.parametrize("kind", ["chat", "responses", "messages"])
def test_usage_per_stage_and_cost_add_up(kind):
    with ScriptedModelServer(SCENARIO) as srv:
        model = {
            "chat": lambda: OpenAIChatModel("p", base_url=srv.base_url, api_key="k", max_retries=0),
            "responses": lambda: OpenAIResponsesModel("p", base_url=srv.base_url, api_key="k", max_retries=0),
            "messages": lambda: AnthropicModel(
                "p", base_url=srv.anthropic_base_url, api_key="k", max_retries=0
            ),
        }[kind]()
        tracker = UsageTracker()
        role = RoleModel(model, ModelSpec(provider="p", model="gpt-5.5"), tracker)
        before = tracker.snapshot()
        for _ in range(3):
            assert role.ask("sys", "please analyse", stage="analyst") == "analysis"
        for _ in range(2):
            assert role.ask("sys", "please merge", stage="merge") == "merged"
        assert {r.headers["x-skillopt-stage"] for r in srv.api_requests()} == {"analyst", "merge"}

    by_stage = tracker.snapshot()
    assert by_stage["analyst"] == Usage(calls=3, prompt_tokens=3000, completion_tokens=600)
    assert by_stage["merge"] == Usage(calls=2, prompt_tokens=600, completion_tokens=100)
    assert tracker.total() == Usage(calls=5, prompt_tokens=3600, completion_tokens=700)
    assert UsageTracker.delta(before, by_stage) == {
        "analyst": {"calls": 3, "prompt_tokens": 3000, "completion_tokens": 600},
        "merge": {"calls": 2, "prompt_tokens": 600, "completion_tokens": 100},
    }

    # The config's `model.prices` shape feeds the price table unchanged.
    cfg = ModelConfig(prices={"gpt-5.5": {"input": 2.0, "output": 10.0}, "*": {"input": 1.0, "output": 1.0}})
    prices = PriceTable(prices=cfg.price_pairs())
    per_stage = {s: prices.cost("gpt-5.5", u) for s, u in by_stage.items()}
    assert per_stage["analyst"] == pytest.approx((3000 * 2.0 + 600 * 10.0) / 1e6)
    assert per_stage["merge"] == pytest.approx((600 * 2.0 + 100 * 10.0) / 1e6)
    assert prices.cost("gpt-5.5", tracker.total()) == pytest.approx(sum(per_stage.values()))
    assert prices.cost("other-model", tracker.total()) == pytest.approx((3600 + 700) / 1e6)  # "*"
    assert PriceTable(prices=ModelConfig().price_pairs()).cost("gpt-5.5", tracker.total()) == 0.0


def test_usage_survives_json_round_trip():
    tracker = UsageTracker()
    tracker.add("rollout", Usage(calls=2, prompt_tokens=10, completion_tokens=4))
    restored = UsageTracker()
    restored.load_json(tracker.to_json())
    assert restored.snapshot() == tracker.snapshot()


@pytest.mark.parametrize("kind", ["chat", "responses"])
def test_cached_tokens_are_read_from_usage_recorded_and_priced(kind, tmp_path):
    """The scripted server caches prompt prefixes as OpenAI does (>= 1024 tokens, 128-token
    steps); the SDK's usage carries the cached count; the ledger keeps it; cost prices it."""
    long_system = "You answer questions about bulletins. " * 200  # ~1900 tokens, the same each call
    with ScriptedModelServer({"rules": [{"name": "any", "match": {}, "reply": {"text": "ok"}}]}) as srv:
        model = {
            "chat": lambda: OpenAIChatModel("p", base_url=srv.base_url, api_key="k", max_retries=0),
            "responses": lambda: OpenAIResponsesModel("p", base_url=srv.base_url, api_key="k", max_retries=0),
        }[kind]()
        tracker = UsageTracker()
        tracker.attach_ledger(tmp_path / "ledger.jsonl")
        role = RoleModel(model, ModelSpec(provider="p", model="gpt-5.5"), tracker)
        role.ask(long_system, "first question", stage="target")
        first = tracker.total()
        role.ask(long_system, "second question, a different one", stage="target")
        role.ask("short system", "no shared prefix", stage="target")
    total = tracker.total()
    assert first.cached_input_tokens == 0  # nothing was cached before the first call
    second = total.cached_input_tokens
    assert second >= 1024 and second % 128 == 0 and second < first.prompt_tokens
    # The ledger keeps the cached count: a resumed run counts the same.
    again = UsageTracker()
    again.load_ledger(tmp_path / "ledger.jsonl")
    assert again.total() == total and total.to_dict()["cached_input_tokens"] == second
    assert Usage.from_dict(total.to_dict()) == total
    # Cached input at its own price; without one it costs what input costs.
    cfg = ModelConfig(prices={"gpt-5.5": {"input": 2.0, "output": 10.0, "cached_input": 0.5}})
    cost = PriceTable(prices=cfg.price_pairs()).cost("gpt-5.5", total)
    uncached = total.prompt_tokens - second
    assert cost == pytest.approx((uncached * 2.0 + second * 0.5 + total.completion_tokens * 10.0) / 1e6)
    plain = PriceTable(prices=ModelConfig(prices={"gpt-5.5": {"input": 2.0, "output": 10.0}}).price_pairs())
    assert plain.cost("gpt-5.5", total) == pytest.approx(
        (total.prompt_tokens * 2.0 + total.completion_tokens * 10.0) / 1e6
    )


def test_anthropic_cache_reads_and_writes_are_their_own_counts():
    from types import SimpleNamespace

    from skillopt.models.anthropic_messages import parse_message

    usage = SimpleNamespace(
        input_tokens=100, cache_read_input_tokens=2000, cache_creation_input_tokens=500, output_tokens=7
    )
    resp = SimpleNamespace(
        content=[SimpleNamespace(type="text", text="hi")], usage=usage, stop_reason="end_turn", model="m"
    )
    got = parse_message(resp).usage
    assert got == Usage(
        calls=1,
        prompt_tokens=2600,
        completion_tokens=7,
        cached_input_tokens=2000,
        cache_write_input_tokens=500,
    )
    prices = PriceTable(prices={"m": (3.0, 15.0, 0.3, 3.75)})
    assert prices.cost("m", got) == pytest.approx((100 * 3.0 + 2000 * 0.3 + 500 * 3.75 + 7 * 15.0) / 1e6)


@pytest.mark.parametrize("caching", [True, False])
def test_prompt_caching_hints_per_provider(caching):
    """On: OpenAI calls carry prompt_cache_key (the key routes the scripted cache too);
    Anthropic calls get cache_control after the system prompt and the tools, and the scripted
    server reports the cache write, then reads. Off: no hint, no cache."""
    system = "You are the failure analyst of a skill optimizer. " * 120  # ~1600 tokens
    with ScriptedModelServer({"rules": [{"name": "any", "match": {}, "reply": {"text": "ok"}}]}) as srv:
        chat = OpenAIChatModel("p", base_url=srv.base_url, api_key="k", max_retries=0)
        claude = AnthropicModel("p", base_url=srv.anthropic_base_url, api_key="k", max_retries=0)
        for model, name in ((chat, "gpt-5.5"), (claude, "claude-sonnet-4-6")):
            tracker = UsageTracker()
            role = RoleModel(model, ModelSpec(provider="p", model=name), tracker)
            role.cache_key = "run1:optimizer" if caching else ""
            for question in ("one", "two", "three"):
                role.ask(system, question, stage="analyst")
            calls = tracker.total()
            if name.startswith("claude"):
                bodies = [r.body for r in srv.api_requests("messages")]
                assert all(isinstance(b["system"], list) == caching for b in bodies)
                if caching:
                    assert bodies[0]["system"][0]["cache_control"] == {"type": "ephemeral"}
                    assert (
                        calls.cache_write_input_tokens > 0
                        and calls.cached_input_tokens == 2 * calls.cache_write_input_tokens
                    )
                else:
                    assert calls.cached_input_tokens == calls.cache_write_input_tokens == 0
            else:
                bodies = [r.body for r in srv.api_requests("chat")]
                assert [b.get("prompt_cache_key") for b in bodies] == (
                    ["run1:optimizer:analyst"] * 3 if caching else [None] * 3
                )
                assert calls.cached_input_tokens >= 2 * 1024  # OpenAI caches automatically either way


def test_the_gateway_counts_cached_tokens_of_every_api():
    from sandbox.gateway.usage import parse_usage

    chat = {
        "usage": {
            "prompt_tokens": 3000,
            "completion_tokens": 5,
            "prompt_tokens_details": {"cached_tokens": 2048},
        }
    }
    assert parse_usage("application/json", json.dumps(chat).encode()) == Usage(
        calls=1, prompt_tokens=3000, completion_tokens=5, cached_input_tokens=2048
    )
    start = {"type": "message_start", "message": {"usage": {"input_tokens": 100, "cache_read_input_tokens": 2000,
                                                             "cache_creation_input_tokens": 500, "output_tokens": 1}}}  # fmt: skip
    delta = {"type": "message_delta", "usage": {"output_tokens": 42}}
    sse = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in (start, delta)).encode()
    assert parse_usage("text/event-stream", sse) == Usage(
        calls=1,
        prompt_tokens=2600,
        completion_tokens=42,
        cached_input_tokens=2000,
        cache_write_input_tokens=500,
    )
    done = {"type": "response.completed", "response": {"usage": {"input_tokens": 1500, "output_tokens": 9,
                                                                 "input_tokens_details": {"cached_tokens": 1024}}}}  # fmt: skip
    assert parse_usage("text/event-stream", f"data: {json.dumps(done)}\n\n".encode()) == Usage(
        calls=1, prompt_tokens=1500, completion_tokens=9, cached_input_tokens=1024
    )
