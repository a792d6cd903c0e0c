"""The selection cache (skillopt.gate.cache): keys, JSON round trip, later-round draws."""

from __future__ import annotations

import json

import pytest

from skillopt.errors import SkillOptError
from skillopt.gate import (
    GateCache,
    GateCacheEntry,
    gate_key,
    rekey_by_tree,
    round_draws,
    round_key,
)
from skillopt.types import SkillVersion, skill_hash

# ── cache ─────────────────────────────────────────────────────────────────────────────────


def test_cache_keys_carry_the_measurement_protocol_and_round_trip() -> None:
    assert gate_key("abc") == "abc" and gate_key("abc", 3) == "abc/repeats=3"
    cache = GateCache()
    cache.put(gate_key("abc", 3), 0.5, 0.6, {"t1": 2 / 3}, soft_items={"t1": 0.7}, repeats=3, n_infra=1)
    restored = GateCache.from_json(cache.to_json())
    assert restored == cache
    entry = restored.get("abc/repeats=3")
    assert entry is not None and (entry.repeats, entry.soft_items, entry.n_infra) == (3, {"t1": 0.7}, 1)
    assert restored.get("abc") is None  # one rollout per item is another measurement


def test_cache_put_get_and_json_round_trip() -> None:
    key = SkillVersion(content="# Skill\n").tree_sha256
    cache = GateCache()
    assert cache.get(key) is None and key not in cache
    cache.put(key, 0.6, 0.7)
    cache.put("other", 1, 0, items={"t1": 1.0, "t2": 0.0})
    assert cache.get(key) == GateCacheEntry(0.6, 0.7)
    assert len(cache) == 2 and set(cache) == {key, "other"}
    text = cache.to_json()
    assert json.loads(text)["version"] == 1
    restored = GateCache.from_json(text)
    assert restored == cache
    assert restored.get("other") == GateCacheEntry(1.0, 0.0, {"t1": 1.0, "t2": 0.0})


def test_cache_reads_flat_pairs() -> None:
    cache = GateCache.from_json('{"abc": [0.5, 0.25]}')
    assert cache.get("abc") == GateCacheEntry(0.5, 0.25)


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[1, 2]",
        '{"abc": [0.5]}',
        '{"abc": {"hard": "x", "soft": 0}}',
        '{"version": 1, "entries": []}',
    ],
)
def test_cache_rejects_malformed(text: str) -> None:
    with pytest.raises(SkillOptError):
        GateCache.from_json(text)


def test_a_skills_later_round_draws_are_pooled_per_item_in_round_order():
    cache = GateCache()
    assert round_draws(cache, "h") == ({}, {}, 2)
    cache.put(round_key("h", 3), 0.5, 0.5, {"a": 0.0, "b": 1.0}, soft_items={"a": 0.2, "b": 0.9})
    cache.put(round_key("h", 2), 1.0, 1.0, {"a": 1.0}, soft_items={"a": 0.8})
    cache.put(round_key("other", 9), 1.0, 1.0, {"a": 1.0})
    cache.put(gate_key("h"), 0.0, 0.0, {"a": 0.0})  # round 1: the one-rollout measurement
    hard, soft, nxt = round_draws(cache, "h")
    assert hard == {"a": [1.0, 0.0], "b": [1.0]} and soft == {"a": [0.8, 0.2], "b": [0.9]}
    assert nxt == 4


def test_rekeying_turns_text_keys_into_tree_keys_and_drops_what_no_text_made() -> None:
    text = "# Skill\n- a\n"
    tree = SkillVersion(content=text).tree_sha256
    old = GateCache()
    old.put(skill_hash(text), 0.5, 0.6)
    old.put(f"{skill_hash(text)}/round=2", 1.0, 1.0, {"t1": 1.0})
    old.put(skill_hash("# gone\n"), 0.1, 0.1)
    new = rekey_by_tree(old, [text], lambda t: SkillVersion(content=t))
    assert set(new) == {tree, f"{tree}/round=2"}
    assert new.get(tree) == old.get(skill_hash(text))
    assert rekey_by_tree(new, [], lambda t: SkillVersion(content=t)) is new  # keyed by trees already
