"""Rewrite-mode update: protected blocks survive or the rewrite is refused."""

from __future__ import annotations

import json

from skillopt.errors import ModelError
from skillopt.reflection.update import full_rewrite_candidate, protect, rewrite_skill
from skillopt.skill import (
    appendix_notes,
    extract_slow_update_field,
    merge_appendix_notes,
    protected_spans,
    replace_slow_update_field,
    strip_protected_regions,
)

BODY = "# Skill\n- old rule\n"
SKILL = replace_slow_update_field(merge_appendix_notes(BODY, ["Check totals."]), "Keep headers.")


def _answer(new_skill: str) -> str:
    return json.dumps({"reasoning": "applied", "change_summary": ["added X"], "new_skill": new_skill})


SUGGESTIONS = [{"type": "add_rule", "title": "X", "instruction": "add X"}]


def test_rewrite_keeps_protected_blocks(fake) -> None:
    new = SKILL.replace("- old rule", "- new rule")
    chat, model = fake([_answer(new + "\n\n\n")])
    result = rewrite_skill(
        SKILL, SUGGESTIONS, model=model, step_buffer_text="Avoid Y.", reasoning_effort="high", max_tokens=999
    )
    assert result.new_skill == new.rstrip() + "\n"
    assert result.change_summary == ("added X",) and result.reasoning == "applied" and not result.error
    req = chat.requests[0]
    assert req.stage == "rewrite" and req.reasoning_effort == "high" and req.max_output_tokens == 999
    user = chat.user()
    assert (
        user.index("## Current Skill")
        < user.index("## Selected Suggestions (1 total)")
        < user.index("## Previous Steps in This Epoch\nAvoid Y.")
    )
    assert '"instruction": "add X"' in user
    assert "Optimizer Meta Skill" not in user


def test_rewrite_refuses_damaged_slow_update_block(fake) -> None:
    for damaged in (
        SKILL.replace("Keep headers.", "Keep headers and footers."),  # altered guidance
        SKILL.replace("<!-- SLOW_UPDATE_END -->", ""),  # broken block
        strip_protected_regions(SKILL),  # dropped entirely
    ):
        _chat, model = fake([_answer(damaged)])
        result = rewrite_skill(SKILL, SUGGESTIONS, model=model)
        assert result.new_skill is None
        assert "slow-update block" in result.error


def test_rewrite_may_not_add_a_slow_update_block(fake) -> None:
    _chat, model = fake([_answer(replace_slow_update_field(BODY, "sneaky"))])
    result = rewrite_skill(BODY, SUGGESTIONS, model=model)
    assert result.new_skill is None and "added a slow-update block" in result.error


def test_dropped_appendix_is_restored() -> None:
    rewritten = "# Skill\n- new rule\n\n<!-- SLOW_UPDATE_START -->\nKeep headers.\n<!-- SLOW_UPDATE_END -->\n"
    check = protect(SKILL, rewritten)
    assert check.repaired_appendix and check.text is not None
    text = check.text
    assert appendix_notes(text) == ["Check totals."] and extract_slow_update_field(text) == "Keep headers."
    assert "- new rule" in strip_protected_regions(text)
    # The original protected blocks come back byte for byte.
    original = [SKILL[a:b] for a, b in protected_spans(SKILL)]
    assert [text[a:b] for a, b in protected_spans(text)] == original


def test_rewrite_failures_return_none(fake) -> None:
    for reply, error in (
        (ModelError("x"), "model error"),
        ("prose", "unparsable"),
        ('{"new_skill": "  "}', "empty"),
    ):
        _, model = fake([reply])
        result = rewrite_skill(SKILL, SUGGESTIONS, model=model)
        assert result.new_skill is None and error in result.error
    chat, model = fake([])
    assert rewrite_skill(SKILL, [], model=model).new_skill is None and chat.calls == 0


def test_full_rewrite_candidate() -> None:
    assert full_rewrite_candidate([]) is None
    items = [{"title": "a", "new_skill": "  "}, {"title": "b", "new_skill": "# B\n\n"}, {"new_skill": "# C"}]
    assert full_rewrite_candidate(items) == "# B\n"
    # With the current skill given, a candidate that damaged the slow-update block is skipped.
    good = SKILL.replace("- old rule", "- better rule")
    bad = strip_protected_regions(SKILL)
    assert full_rewrite_candidate([{"new_skill": bad}, {"new_skill": good}], skill=SKILL) == good
    assert full_rewrite_candidate([{"new_skill": bad}], skill=SKILL) is None
