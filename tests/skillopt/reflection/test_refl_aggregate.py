"""Hierarchical merge: tree shape, clamping, fallbacks, failure-first final merge, cache."""

from __future__ import annotations

import json
import re

import pytest

from skillopt.errors import ModelError
from skillopt.reflection.aggregate import merge_patches
from skillopt.reflection.analyst import RawPatch
from skillopt.skill import Edit
from skillopt.trainer.rundir import RunDirectory

SKILL = "# Skill\n- a rule\n"


def _patch(tag: str, n: int = 1, source: str = "failure", kind: str = "edits") -> RawPatch:
    if kind == "edits":
        items = tuple(Edit("append", f"- {tag}{i}", support_count=2, source_type=source) for i in range(n))
    else:
        items = tuple(
            {"type": "add_rule", "title": f"{tag}{i}", "instruction": "x", "source_type": source}
            for i in range(n)
        )
    return RawPatch(source_type=source, items=items, reasoning=f"r-{tag}", payload_kind=kind)  # type: ignore[arg-type]


def _merged(req) -> str:
    """A merge answer combining every input edit's content into one edit."""
    user = req.messages[1].content
    contents = re.findall(r'"content": "([^"]+)"', user)
    return json.dumps(
        {
            "reasoning": "merged",
            "edits": [{"op": "append", "content": " + ".join(contents), "support_count": 9}],
        }
    )


def test_zero_and_one_patch_make_no_call(fake) -> None:
    chat, model = fake([])
    empty = merge_patches(SKILL, [], [], model=model)
    assert empty.items == () and empty.n_calls == 0 and empty.levels == 0
    one = merge_patches(SKILL, [_patch("a", 2)], [], model=model)
    assert [e.content for e in one.items] == ["- a0", "- a1"] and one.n_calls == 0
    only_success = merge_patches(SKILL, [], [_patch("s", 1, "success")], model=model)
    assert [e.content for e in only_success.items] == ["- s0"]
    assert chat.calls == 0


def test_empty_patches_are_ignored(fake) -> None:
    chat, model = fake([])
    notes_only = RawPatch(source_type="failure", items=())
    result = merge_patches(SKILL, [notes_only, _patch("a")], [notes_only], model=model)
    assert [e.content for e in result.items] == ["- a0"] and chat.calls == 0


def test_levels_and_parallel_groups(fake) -> None:
    chat, model = fake(_merged)
    patches = [_patch(f"p{i}") for i in range(5)]
    result = merge_patches(SKILL, patches, [], model=model, merge_batch_size=2)
    # level 1: (p0 p1) (p2 p3) p4 → 2 calls; level 2: (m m) p4 → 1 call; level 3: (m p4) → 1 call.
    assert result.n_calls == 4 and result.n_fallbacks == 0
    assert result.levels == 3
    assert [e.merge_level for e in result.items] == [3]
    assert result.items[0].content == "- p00 + - p10 + - p20 + - p30 + - p40"
    assert result.items[0].support_count == 9
    levels = sorted(
        int(m) for r in chat.requests for m in re.findall(r"merge level (\d+)\)", r.messages[1].content)
    )
    assert levels == [1, 1, 2, 3]
    assert all(r.stage == "merge" for r in chat.requests)
    assert all(
        r.messages[0].content.startswith("You merge skill edits proposed by several failure")
        for r in chat.requests
    )


@pytest.mark.parametrize("size", [1, 0, -3])
def test_merge_batch_size_below_two_is_clamped_and_terminates(fake, size: int) -> None:
    _chat, model = fake(_merged)
    result = merge_patches(SKILL, [_patch(f"p{i}") for i in range(4)], [], model=model, merge_batch_size=size)
    assert result.n_calls == 3  # groups of 2: 2 + 1
    assert len(result.items) == 1


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (ModelError("secret prompt text leaked? api_key=sk-abc"), "model_error"),
        ("not json at all", "unparsable"),
        ('{"reasoning": "x", "edits": "all of them"}', "malformed"),
        ('{"reasoning": "x", "edits": ["a string"]}', "malformed"),
        ('{"reasoning": "x", "suggestions": []}', "malformed"),
        ('{"reasoning": "x", "edits": []}', "empty"),
        ('{"reasoning": "x", "edits": [{"op": "frobnicate"}]}', "empty"),
        (RuntimeError("boom: internal detail"), "internal_error"),
    ],
)
def test_fallback_concatenates_and_does_not_leak(fake, reply, reason: str, log_events) -> None:
    _chat, model = fake([reply])
    logs = log_events
    result = merge_patches(SKILL, [_patch("a", 2), _patch("b", 1)], [], model=model)
    assert [e.content for e in result.items] == ["- a0", "- a1", "- b0"]
    assert result.n_fallbacks == 1 and result.fallback_reasons == (reason,)
    warnings = [e for e in logs if e.get("event") == "merge.fallback"]
    assert len(warnings) == 1 and warnings[0]["log_level"] == "warning"
    dumped = json.dumps(warnings, default=str)
    assert "secret prompt" not in dumped and "sk-abc" not in dumped and "internal detail" not in dumped


def test_final_merge_is_failure_first(fake) -> None:
    def reply(req):
        user = req.messages[1].content
        if "Failure-driven updates (HIGH priority" in user:
            assert user.index("Failure-driven") < user.index("Success-driven updates (lower priority")
            return json.dumps(
                {
                    "reasoning": "final",
                    "edits": [
                        {
                            "op": "append",
                            "content": "- from failure",
                            "source_type": "failure",
                            "support_count": 4,
                        },
                        {"op": "append", "content": "- from success"},
                    ],
                }
            )
        return _merged(req)

    chat, model = fake(reply)
    result = merge_patches(SKILL, [_patch("f0"), _patch("f1")], [_patch("s0", 1, "success")], model=model)
    assert chat.calls == 2
    assert chat.system().startswith("You make the final merge")
    assert [e.content for e in result.items] == ["- from failure", "- from success"]
    assert [e.merge_level for e in result.items] == [2, 2]
    assert result.items[1].source_type == "failure"  # final-merge default when unstated
    assert result.reasoning == "final"


def test_final_merge_fallback_order(fake) -> None:
    _chat, model = fake([ModelError("x")])
    result = merge_patches(SKILL, [_patch("f", 2)], [_patch("s", 2, "success")], model=model)
    assert [e.content for e in result.items] == ["- f0", "- f1", "- s0", "- s1"]
    assert result.n_fallbacks == 1


def test_success_side_defaults_source_type(fake) -> None:
    chat, model = fake(['{"reasoning": "m", "edits": [{"op": "append", "content": "- s"}]}'])
    result = merge_patches(SKILL, [], [_patch("s0", 1, "success"), _patch("s1", 1, "success")], model=model)
    assert result.items[0].source_type == "success"
    assert chat.system().startswith("You merge skill edits proposed by several success")


def test_meta_skill_prepended_and_rewrite_variant(fake) -> None:
    chat, model = fake(
        ['{"reasoning": "m", "revise_suggestions": [{"type": "clarify", "title": "t", "instruction": "i"}]}']
    )
    result = merge_patches(
        SKILL,
        [_patch("a", kind="revise_suggestions"), _patch("b", kind="revise_suggestions")],
        [],
        model=model,
        update_mode="rewrite",
        meta_skill_text="- lesson",
    )
    assert chat.user().startswith("## Optimizer Meta Skill")
    assert chat.user().index("## Optimizer Meta Skill") < chat.user().index("## Current Skill")
    assert chat.system().startswith("You merge revision suggestions")
    assert result.items == (
        {"type": "clarify", "title": "t", "instruction": "i", "source_type": "failure", "merge_level": 1},
    )
    assert result.payload_kind == "revise_suggestions"


def test_payload_kind_mismatch_raises(fake) -> None:
    _, model = fake([])
    with pytest.raises(ValueError):
        merge_patches(SKILL, [_patch("a", kind="revise_suggestions")], [], model=model, update_mode="patch")


def test_cache_reuse_and_invalidation(fake, tmp_path) -> None:
    path = tmp_path / "merged_patch.json"
    cache = RunDirectory(tmp_path).slot("", "merged_patch.json")
    chat, model = fake(_merged)
    patches = [_patch("a"), _patch("b")]
    first = merge_patches(SKILL, patches, [], model=model, cache=cache)
    assert chat.calls == 1
    stored = json.loads(path.read_text())
    assert stored["edits"][0]["merge_level"] == 1 and "reasoning" in stored
    again_chat, again = fake([])
    second = merge_patches(SKILL, patches, [], model=again, cache=cache)
    assert again_chat.calls == 0 and second.items == first.items and second.n_calls == 0
    other_chat, other = fake(_merged)
    merge_patches(SKILL, [_patch("a"), _patch("c")], [], model=other, cache=cache)
    assert other_chat.calls == 1
