"""Token accounting per stage and cost, over real calls to the scripted server."""

from __future__ import annotations

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
