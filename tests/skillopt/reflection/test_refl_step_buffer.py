"""Step buffer: failure patterns, rejected-edit summaries, exact prompt text, JSON round trip."""

from __future__ import annotations

import json

from skillopt.reflection.step_buffer import StepBuffer, failure_patterns, rejected_summaries
from skillopt.skill import Edit

EXPECTED = """\
Earlier steps of this epoch are summarised below: their recurring failure patterns and, for steps whose update was rejected by the validation gate, the edits that were tried. Do not propose those rejected edits again, or close variants of them: they did not improve the held-out score. Address the recurring failure patterns in a different way.

### Step 1 — ACCEPT_NEW_BEST (3/4 failed)
- "data_exploration: assumed header row" (×2, tasks: b, c)
- "exec-error" (×1, tasks: a)

### Step 2 — REJECT (3/4 failed)
- "eval-mismatch" (×2, tasks: b, c)
- "exec-error" (×1, tasks: a)
Rejected edits (score 0.5000 → 0.4500):
  1. [append] target="" → "- check headers"
  2. [replace] target="old" → "new"
  3. [add_rule] title="T" → "I"
"""


def _rows(row):
    return [
        row("a", 0.0, fail_reason="exec-error: NameError"),
        row("b", 0.0, fail_reason="eval-mismatch: x"),
        row("c", 0.0, fail_reason="eval-mismatch: y"),
        row("d", 1.0),
        row("e", 0.0, infra=True),
    ]


def _buffer(row) -> StepBuffer:
    buffer = StepBuffer(epoch=2)
    buffer.record(
        step=1,
        action="accept_new_best",
        rows=_rows(row),
        failure_summaries=[
            {"failure_type": "data_exploration", "count": 2, "description": "assumed header row"}
        ],
        score_before=0.4,
        score_after=0.5,
        rejected_items=[Edit("append", "- not kept")],
    )
    buffer.record(
        step=2,
        action="reject",
        rows=_rows(row),
        score_before=0.5,
        score_after=0.45,
        rejected_items=[
            Edit("append", "- check\nheaders"),
            Edit("replace", "new", target="old"),
            {"type": "add_rule", "title": "T", "instruction": "I"},
        ],
    )
    return buffer


def test_format_for_prompt_exact(row) -> None:
    assert _buffer(row).format_for_prompt() == EXPECTED
    assert StepBuffer().format_for_prompt() == ""


def test_accept_entries_carry_no_scores_or_rejections(row) -> None:
    entry = _buffer(row).entries[0].to_dict()
    assert entry == {
        "step": 1,
        "action": "accept_new_best",
        "n_total": 4,
        "n_fail": 3,
        "failure_patterns": [
            {
                "pattern": "data_exploration: assumed header row",
                "count": 2,
                "task_ids": ["b", "c"],
                "prefix": "eval-mismatch",
            },
            {"pattern": "exec-error", "count": 1, "task_ids": ["a"], "prefix": "exec-error"},
        ],
    }


def test_json_round_trip_and_reset(row) -> None:
    buffer = _buffer(row)
    data = json.loads(json.dumps(buffer.to_json()))
    restored = StepBuffer.from_json(data)
    assert restored == buffer and restored.epoch == 2
    assert restored.format_for_prompt() == EXPECTED
    # The reference's bare-list digest shape is accepted too.
    assert StepBuffer.from_json(data["entries"]).entries == buffer.entries
    restored.reset(epoch=3)
    assert len(restored) == 0 and restored.epoch == 3


def test_failure_patterns_survive_nested_and_huge_values(row) -> None:
    nested: object = "deep"
    for _ in range(5000):
        nested = [nested]
    summaries = [
        "not a dict",
        {"failure_type": 10**5000, "description": nested},
        {"failure_type": {"x": [1, 2]}, "count": 10**5000, "description": "y" * 100_000},
        {"failure_type": "", "description": ""},
        None,
    ]
    rows = [row("a", 0.0, fail_reason="exec-error" + ":" * 3 + "x" * 10_000), row("b", 0.0, fail_reason=" ")]
    patterns = failure_patterns(rows, summaries)
    assert [p.count for p in patterns] == [1, 1]
    assert patterns[0].pattern.startswith("<very large number>: ")
    assert len(patterns[0].pattern) < 400
    assert patterns[1].pattern.startswith('{"x": [1, 2]}: yyy') and len(patterns[1].pattern) < 400
    assert patterns[1].prefix == "unknown"
    # And the buffer built from them still renders and round-trips.
    buffer = StepBuffer()
    buffer.record(step=1, action="reject", rows=rows, failure_summaries=summaries)
    assert StepBuffer.from_json(json.loads(json.dumps(buffer.to_json()))) == buffer
    assert buffer.format_for_prompt()


def test_failure_pattern_ordering_and_long_id_lists(row) -> None:
    rows = [row("x", 0.0, fail_reason="rare: 1")] + [
        row(f"t{i}", 0.0, fail_reason="common: z") for i in range(12)
    ]
    patterns = failure_patterns(rows)
    assert [p.pattern for p in patterns] == ["common", "rare"]
    buffer = StepBuffer()
    buffer.record(step=4, action="accept", rows=rows)
    assert "(×12, tasks: t0, t1, t2, t3, t4, t5, t6, t7, t8, t9 (+2 more))" in buffer.format_for_prompt()


def test_rejected_summaries_shapes() -> None:
    summaries = rejected_summaries(
        [
            Edit("delete", target="x" * 1000),
            {"type": "compress", "title": "t", "instruction": "i", "extra": 1},
            {
                "title": "v2",
                "change_summary": ["a", "b"],
                "new_skill": "# whole skill",
                "source_type": "failure",
            },
        ]
    )
    assert summaries[0]["op"] == "delete" and len(summaries[0]["target"]) == 300
    assert summaries[1] == {"type": "compress", "title": "t", "instruction": "i"}
    assert summaries[2] == {"title": "v2", "change_summary": "a; b", "source_type": "failure"}
