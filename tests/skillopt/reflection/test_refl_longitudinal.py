"""Epoch comparison pairs, slow update and meta skill."""

from __future__ import annotations

import json

import pytest

from skillopt.errors import ConfigError, ModelError
from skillopt.reflection.longitudinal import (
    comparison_pairs,
    comparison_text,
    filter_pairs,
    meta_skill_block,
    missing_changed_pairs,
    normalize_pair_policy,
    propose_meta_skill,
    propose_slow_update,
)
from skillopt.skill import (
    SLOW_UPDATE_END,
    SLOW_UPDATE_START,
    extract_slow_update_field,
    replace_slow_update_field,
)

PREV = "# Skill v1\n- rule one\n"
CURR = replace_slow_update_field("# Skill v2\n- rule one\n- rule two\n", "Old guidance.")


def _pairs(row):
    prev = [
        row("imp", 0.0),
        row("reg", 1.0),
        row("pf", 0.0),
        row("ss", 0.5),
        row("infra", 1.0),
        row("gone", 0.0),
    ]
    curr = [
        row("ss", 1.0),
        row("reg", 0.0, fail_reason="exec-error: boom"),
        row("pf", 0.0),
        row("imp", 1.0),
        row("infra", 0.0, infra=True),
    ]
    texts = {i: (f"task {i}", "type") for i in ("imp", "reg", "pf", "ss")}
    return comparison_pairs(prev, curr, task_texts=texts, prev_skill=PREV, curr_skill=CURR)


def test_categories_order_and_skips(row) -> None:
    pairs = _pairs(row)
    assert [(p.id, p.category) for p in pairs] == [
        ("imp", "improved"),
        ("reg", "regressed"),
        ("pf", "persistent_fail"),
        ("ss", "stable_success"),
    ]
    reg = pairs[1]
    assert reg.prev.hard == 1.0 and reg.curr.fail_reason == "exec-error: boom" and reg.task == "task reg"
    assert reg.prev_trajectory.startswith("#### Trajectory 1 (id=reg)\n")
    assert "prev_trajectory" not in reg.to_dict()
    assert reg.to_dict(include_trajectories=True)["curr_trajectory"] == reg.curr_trajectory


def test_policies_and_topup(row) -> None:
    pairs = _pairs(row)
    assert [p.id for p in filter_pairs(pairs, "mixed")] == ["imp", "reg", "pf", "ss"]
    assert [p.id for p in filter_pairs(pairs, "changed")] == ["imp", "reg"]
    assert [p.id for p in filter_pairs(pairs, "stable")] == ["pf", "ss"]
    assert normalize_pair_policy("10_01") == "changed" and normalize_pair_policy("Random") == "mixed"
    assert normalize_pair_policy("00-11") == "unchanged"
    with pytest.raises(ConfigError, match="longitudinal_pair_policy"):
        normalize_pair_policy("sometimes")
    assert missing_changed_pairs(pairs, "changed", target=20) == 18
    assert missing_changed_pairs(pairs, "mixed") == 0


def test_comparison_text_order(row) -> None:
    text = comparison_text(_pairs(row))
    assert text.startswith(
        "## Comparison Summary (4 items)\n- regressed: 1\n- persistent_fail: 1\n- improved: 1\n- stable_success: 1"
    )
    heads = [
        "## Regressions",
        "### Item reg",
        "#### Previous-epoch skill run",
        "#### Current skill run",
        "## Persistent failures",
        "### Item pf",
        "## Improvements",
        "### Item imp",
        "## Stable successes",
    ]
    positions = [text.index(h) for h in heads]
    assert positions == sorted(positions)
    assert "HIGHEST PRIORITY" in text
    assert "- ss: task ss" in text and "### Item ss" not in text  # stable successes: no trajectories
    assert "id=ss" not in text


def test_slow_update_candidate_has_exactly_one_block(row, fake) -> None:
    chat, model = fake(
        [
            json.dumps(
                {
                    "reasoning": "old guidance helped",
                    "slow_update_content": f"New guidance.\n{SLOW_UPDATE_END}",
                }
            )
        ]
    )
    broken = CURR + f"\n{SLOW_UPDATE_START}\nstray\n"  # a second, unclosed block
    proposal = propose_slow_update(PREV, broken, _pairs(row), model=model)
    assert proposal.content == "New guidance." and proposal.reasoning == "old guidance helped"
    assert proposal.candidate is not None
    assert proposal.candidate.count(SLOW_UPDATE_START) == 1 and proposal.candidate.count(SLOW_UPDATE_END) == 1
    assert extract_slow_update_field(proposal.candidate) == "New guidance."
    user = chat.user()
    order = [
        "## Previous-Epoch Skill\n# Skill v1",
        "## Current Skill\n# Skill v2",
        "## Existing Slow-Update Guidance\nOld guidance.",
        "## Comparison Summary",
    ]
    assert [user.index(o) for o in order] == sorted(user.index(o) for o in order)
    assert chat.requests[0].stage == "slow_update" and chat.requests[0].max_output_tokens == 16384
    assert chat.system().startswith("You write the slow-update guidance")


def test_slow_update_placeholder_and_failures(row, fake) -> None:
    chat, model = fake(['{"reasoning": "r", "slow_update_content": "  "}', ModelError("x"), "nope"])
    empty = propose_slow_update(PREV, "# plain skill\n", _pairs(row), model=model)
    assert "no previous guidance" in chat.user()
    assert empty.content == "" and empty.candidate is None and empty.error
    assert propose_slow_update(PREV, CURR, [], model=model).error.startswith("model error")
    assert propose_slow_update(PREV, CURR, [], model=model).error.startswith("unparsable")


def test_meta_skill_proposal(row, fake) -> None:
    chat, model = fake([json.dumps({"reasoning": "r", "meta_skill_content": "- concrete edits helped"})])
    proposal = propose_meta_skill(PREV, CURR, _pairs(row), "", model=model)
    assert proposal.content == "- concrete edits helped"
    assert "## Previous Meta Skill\n(no previous meta skill: this is the first update)" in chat.user()
    assert chat.requests[0].stage == "meta_skill"
    assert "never to the target" in chat.system()
    chat2, model2 = fake([json.dumps({"meta_skill_content": "- v2"})])
    propose_meta_skill(PREV, CURR, [], "- v1 lesson", model=model2)
    assert "## Previous Meta Skill\n- v1 lesson" in chat2.user()


def test_meta_skill_block_wrapper() -> None:
    assert meta_skill_block("") == "" and meta_skill_block("  \n") == ""
    block = meta_skill_block("- prefer procedures\n")
    assert block.startswith("## Optimizer Meta Skill\n")
    assert "optimizer's own memory" in block and "never shown to the target" in block
    assert block.endswith("- prefer procedures")
    assert meta_skill_block(block) == block
