"""HotpotQA's evaluator on real items (hand-checked): answer EM / F1 with the official
normalisation and the yes/no rule."""

from __future__ import annotations

import pytest

from skillopt.envs._qa.scoring import score_item

from .conftest import by_id

FILES = ("dev.jsonl", "test.jsonl")

# (id prefix, response, em, f1), worked out by hand from the gold answers.
CASES = [
    ("5a85355a", "<answer>Beer and whisky</answer>", 1, 1.0),
    ("5a8c62", "<answer>San Juan, San Luis, and Mendoza</answer>", 1, 1.0),  # commas are punctuation
    ("5ae2a0", "<answer>No.</answer>", 1, 1.0),
    ("5ae2a0", "<answer>yes</answer>", 0, 0.0),  # yes/no: all or nothing
    ("5a84bd", "<answer>Pistol Pete</answer>", 1, 1.0),
    ("5ae3eb", "<answer>the Brunswick Executive Airport</answer>", 1, 1.0),
    ("5a731b", "<answer>Stella</answer>", 0, 2 / 3),
    ("5ac38977", "<answer>Cameron Todd Willingham</answer>", 1, 1.0),
    ("5ab6a7", "<answer>Computers.</answer>", 1, 1.0),
    ("5add0f", "<answer>David Platt (footballer)</answer>", 0, 0.8),
    ("5a7e58", "<answer>Renaissance Technologies LLC</answer>", 0, 0.8),
    ("5a79fd", "<answer>Jenna-Louise Coleman</answer>", 0, 0.5),
    ("5ab1ee", "<answer>two ships of the British Royal Navy</answer>", 1, 1.0),
    ("5a7753", "<answer>Margaret Wilson</answer>", 1, 1.0),
    ("5add11", "<answer>Glasgow</answer>", 0, 0.0),
    ("5adde5", "<answer>Marion</answer>", 0, 0.5),
    ("5ac197", "<answer>Statesboro Georgia</answer>", 1, 1.0),
    ("5ab999", "A silversmith, per the second paragraph.", 0, 0.4),  # no tag: the last line
    ("5adec6d7", "<answer>Gilbert Taylor</answer>", 1, 1.0),
    ("5ab666", "<answer>SCHWEPPES</answer>", 1, 1.0),
    ("5ae2d1", "<answer>October 10, 1927</answer>", 0, 1.0),  # same tokens, other format
    ("5a8556", "<answer>53 days</answer>", 0, 0.8),
]


@pytest.mark.parametrize(("prefix", "response", "em", "f1"), CASES)
def test_real_items(prefix, response, em, f1):
    raw = by_id("hotpotqa", FILES, prefix, key="_id")
    out = score_item("hotpotqa", raw, response)
    assert out["em"] == out["hard"] == em
    assert out["f1"] == pytest.approx(f1) and out["soft"] == pytest.approx(f1)
    assert out["gold"] == raw["answer"] and out["task_type"] == raw["type"]
