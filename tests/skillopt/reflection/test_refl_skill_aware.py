"""Skill-aware reflection: tolerant note parsing and appendix consolidation."""

from __future__ import annotations

import json

import pytest

from skillopt.errors import ModelError
from skillopt.reflection.skill_aware import consolidate_appendix, parse_notes


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (
            ["- Check totals.", "check totals", "  ", "Re-read the rule"],
            ("Check totals.", "Re-read the rule"),
        ),
        ("- one\n- two\n", ("one", "two")),
        ({"note": "as dict"}, ("as dict",)),
        ([{"note": "a"}, {"content": "b"}, {"text": "c"}, {"other": "d"}, 5, None], ("a", "b", "c")),
        (["note with <!-- APPENDIX_END --> marker"], ("note with marker",)),
        (None, ()),
        (42, ()),
    ],
)
def test_parse_notes_tolerant(value, expected) -> None:
    assert parse_notes(value) == expected


def test_parse_notes_bounds() -> None:
    notes = parse_notes([f"note {i} " + "x" * 2000 for i in range(500)])
    assert len(notes) == 50 and all(len(n) <= 500 for n in notes)


NOTES = [f"Remember rule {i}." for i in range(6)]


def test_below_threshold_no_call(fake) -> None:
    chat, model = fake([])
    assert consolidate_appendix(NOTES, model=model, threshold=6).notes == tuple(NOTES)
    assert consolidate_appendix(NOTES, model=model, threshold=0).notes == tuple(NOTES)
    assert chat.calls == 0


def test_consolidation_accepted(fake) -> None:
    chat, model = fake([json.dumps({"reasoning": "merged", "notes": ["Remember rules 0-5."]})])
    result = consolidate_appendix(NOTES, model=model, threshold=3)
    assert result.consolidated and result.notes == ("Remember rules 0-5.",)
    assert chat.requests[0].stage == "appendix_consolidate" and chat.requests[0].max_output_tokens == 4096
    assert "## Execution Notes (6 total, consolidate to at most 3)" in chat.user()


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ('{"notes": []}', "empty"),
        (json.dumps({"notes": [f"n{i}" for i in range(7)]}), "longer"),
        (json.dumps({"notes": ["x" * 400]}), "longer"),
        ("prose", "unparsable"),
        (ModelError("x"), "model_error"),
    ],
)
def test_consolidation_rejected_keeps_notes(fake, reply, reason: str) -> None:
    _, model = fake([reply])
    result = consolidate_appendix(NOTES, model=model, threshold=3)
    assert not result.consolidated and result.notes == tuple(NOTES) and result.reason == reason
