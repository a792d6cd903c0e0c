"""The cacheable prefix share: prompt text in cache order, chained block digests, the meter."""

from __future__ import annotations

import json

import pytest

from skillopt.models.base import ChatRequest, ToolSpec
from skillopt.models.prefix import (
    BLOCK_CHARS,
    PrefixMeter,
    PromptPrefix,
    chained_digests,
    chat_payload,
    prefix_report,
    prompt_prefix,
    prompt_text,
)
from skillopt.models.roles import UsageTracker
from skillopt.types import Message, Usage

SYSTEM = "S" * (4 * BLOCK_CHARS)  # four whole blocks that every request repeats


def chat(system: str, *turns: str) -> dict:
    msgs = [{"role": "system", "content": system}]
    msgs += [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(turns)]
    return {"model": "m", "messages": msgs}


def test_equal_digests_mean_equal_prefixes():
    a, b = chained_digests("x" * 1024 + "y" * 600), chained_digests("x" * 1024 + "z" * 600)
    assert len(a) == 3 and a[:2] == b[:2] and a[2] != b[2]  # the partial tail block is not hashed
    assert chained_digests("abc") == []
    # A block equal to another at a different position has another digest (it is chained).
    assert chained_digests("q" * 1024)[0] != chained_digests("q" * 1024)[1]


def test_prompt_text_puts_stable_parts_first_for_every_api():
    tools = [{"name": "grep", "parameters": {}}]
    anthropic = {
        "messages": [{"role": "user", "content": "task"}],
        "system": "sys",
        "tools": tools,
        "max_tokens": 9,
    }
    text = prompt_text(anthropic)
    assert text.index("grep") < text.index("sys") < text.index("task") and "max_tokens" not in text
    responses = {"input": "task", "instructions": "sys", "tools": tools}
    assert prompt_text(responses).index("sys") < prompt_text(responses).index("task")
    # Key order in the body does not matter; sampling parameters are not prompt input.
    assert prompt_text({**anthropic, "temperature": 0.3}) == prompt_text(dict(reversed(anthropic.items())))


def test_the_meter_counts_the_repeated_prefix_of_each_request():
    meter = PrefixMeter()
    first = prompt_prefix(chat(SYSTEM, "task one " * 100))
    meter.observe("m", first, 1000)
    assert meter.share == 0.0  # nothing was sent before
    second = prompt_prefix(chat(SYSTEM, "task two " * 100))
    meter.observe("m", second, 1000)
    # The second request repeats the first one's four system blocks (the tasks differ after).
    assert meter.cacheable_tokens == pytest.approx(1000 * 4 * BLOCK_CHARS / second.chars)
    # A multi-turn conversation resends everything before its last turn.
    meter2 = PrefixMeter()
    turns = ["ask " * 200, "reply " * 200]
    meter2.observe("m", prompt_prefix(chat(SYSTEM, turns[0])), 500)
    meter2.observe("m", prompt_prefix(chat(SYSTEM, *turns, "feedback " * 60)), 900)
    assert meter2.cacheable_tokens / 900 > 0.5
    # Another model has its own cache: nothing repeats for it.
    meter.observe("other", second, 1000)
    assert meter.input_tokens == 3000 and meter.share < 0.5


def test_unreported_tokens_are_estimated_and_memory_is_bounded():
    meter = PrefixMeter(max_digests=3)
    p = prompt_prefix(chat(SYSTEM, "t"))
    meter.observe("m", p, 0)
    assert meter.input_tokens == -(-p.chars // 4)
    meter.observe("m", p, 0)
    assert meter.cacheable_tokens == 0  # its 4+ digests were over the bound: none remembered
    assert PrefixMeter().share is None


def test_prefix_json_round_trips_and_bad_records_are_skipped():
    p = prompt_prefix(chat(SYSTEM, "t"))
    assert PromptPrefix.from_json(json.loads(json.dumps(p.to_json()))) == p
    for bad in (None, {}, {"chars": 3}, {"chars": "x", "chain": ""}, {"chars": 1, "chain": "***"}, "s"):
        assert PromptPrefix.from_json(bad) is None
    meter = PrefixMeter()
    meter.observe_exchanges(
        [
            {"model": "m", "usage": {"prompt_tokens": 100}, "prefix": p.to_json()},
            {"model": "m", "usage": {"prompt_tokens": 100}},  # an older record: no prefix
            {"model": "m", "usage": {"prompt_tokens": 100}, "prefix": p.to_json()},
        ]
    )
    assert meter.input_tokens == 200 and meter.cacheable_tokens == pytest.approx(
        100 * (len(p.digests()) * BLOCK_CHARS) / p.chars
    )


def test_report_weights_roles_by_their_input_tokens():
    a, b, idle = PrefixMeter(), PrefixMeter(), PrefixMeter()
    a.input_tokens, a.cacheable_tokens = 900, 810.0
    b.input_tokens, b.cacheable_tokens = 100, 0.0
    share, by_role = prefix_report({"target": a, "optimizer": b, "none": idle})
    assert share == 0.81 and set(by_role) == {"target", "optimizer"}
    assert by_role["target"] == {"input_tokens": 900, "cacheable_input_tokens": 810, "share": 0.9}
    assert prefix_report({}) == (None, {})


def test_neutral_requests_and_the_optimizer_ledger_rebuild_the_same_share(tmp_path):
    req = ChatRequest(
        model="m",
        messages=(Message(role="system", content=SYSTEM), Message(role="user", content="u")),
        tools=(ToolSpec(name="t", description="d", parameters={"type": "object"}),),
    )
    payload = chat_payload(req)
    assert [m["role"] for m in payload["messages"]] == ["system", "user"] and payload["tools"][0][
        "name"
    ] == "t"
    tracker = UsageTracker()
    tracker.attach_ledger(tmp_path / "ledger.jsonl")
    for _ in range(3):
        tracker.add("analyst", Usage(calls=1, prompt_tokens=700), model="m", prefix=prompt_prefix(payload))
    tracker.add("merge", Usage(calls=1, prompt_tokens=50))  # a call without a recorded prefix
    live = tracker.prefix.to_json()
    assert live["input_tokens"] == 2100 and live["share"] > 0.5
    resumed = UsageTracker()
    resumed.attach_ledger(tmp_path / "ledger.jsonl")
    assert resumed.prefix.to_json() == live and resumed.total().prompt_tokens == 2150
