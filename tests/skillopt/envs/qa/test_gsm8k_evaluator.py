"""GSM8K's evaluator on real items (hand-checked): the final number through commas, units,
currency, trailing zeros and negative numbers."""

from __future__ import annotations

import pytest

from skillopt.envs._qa.scoring import score_item

from .conftest import shared_file

# (position in test.jsonl, response, extracted number, correct?) - golds: 18, 3, 70000, 540,
# 20, 64, 260, 160, 45, 460, 366, 694, 13, 18, 60, 125, 230, 57500, 7, 6, 15, 14.
CASES = [
    (0, "She sells 9 eggs at $2 each.\n<answer>$18</answer>", "18", 1),
    (1, "<answer>3 bolts</answer>", "3", 1),
    (2, "The profit is <answer>$70,000.00</answer>", "70000", 1),
    (3, "He runs 3 sprints x 3 times x 60 m.\n#### 540", "540", 1),  # GSM8K's own final line
    (4, "<answer>20.0</answer>", "20", 1),  # trailing zeros
    (5, "so the answer is \\boxed{64}", "64", 1),
    (6, "<answer>-260</answer>", "-260", 0),  # a negative number is not the positive gold
    (7, "<answer>160 dollars</answer>", "160", 1),
    (8, "First 15, then 30, so 15 + 30 = 45 in total.", "45", 1),  # no tag: the last number
    (9, "<answer>460 minutes (7 hours 40 minutes)</answer>", "40", 0),  # the last number counts
    (10, "<answer>366</answer>", "366", 1),
    (11, "<answer>694.50</answer>", "694.5", 0),
    (12, "<answer>thirteen</answer>", "", 0),  # words are not read as numbers
    (13, "<answer>18 %</answer>", "18", 1),
    (14, "<answer>\u221260</answer>", "-60", 0),  # a unicode minus is a minus
    (15, "Total: <answer>125.</answer>", "125", 1),
    (16, "<answer>$230.00</answer>", "230", 1),
    (17, "<answer>57,500</answer>", "57500", 1),
    (18, "<answer>7</answer> ... no wait <answer>8</answer>", "8", 0),  # the last tag counts
    (19, "<answer>6 cups</answer>", "6", 1),
    (20, "<answer>15/1</answer>", "15", 1),  # a fraction is its value
    (21, "<answer>1,4</answer>", "4", 0),  # not a thousands separator: two numbers, the last is 4
]


@pytest.mark.parametrize(("position", "response", "number", "ok"), CASES)
def test_real_items(position, response, number, ok):
    raw = shared_file("gsm8k", "test.jsonl")[position]
    out = score_item("gsm8k", raw, response)
    assert out["answer"] == number
    assert out["hard"] == out["soft"] == ok
    assert out["gold"] == raw["answer"].rsplit("####", 1)[1].strip()
    assert out["id"].startswith("gsm8k-") and out["task_type"].startswith("steps_")


def test_gold_with_thousands_separator():
    raw = next(x for x in shared_file("gsm8k", "train.jsonl") if x["answer"].endswith("#### 1,080"))
    assert score_item("gsm8k", raw, "<answer>1080</answer>")["hard"] == 1.0
    assert score_item("gsm8k", raw, "<answer>$1,080</answer>")["hard"] == 1.0
    assert score_item("gsm8k", raw, "<answer>108</answer>")["hard"] == 0.0
