"""LiveMathematicianBench's evaluator on real items (hand-checked): the chosen label in its
many spellings, the choice text, accuracy; and the seeded choice shuffling."""

from __future__ import annotations

import pytest

from skillopt.envs._qa.scoring import score_item
from skillopt.envs.livemathematicianbench.items import item_from_raw
from skillopt.envs.livemathematicianbench.spec import LiveMathOptions
from skillopt.envs.registry import get_env

from .conftest import by_id, shared_file

FILES = ("train.json", "val.json", "test.json")

# (item id, response, the label it chooses, correct?) - in the files the correct choice is A.
CASES = [
    ("202602:12", "<answer>A</answer>", "A", 1),
    ("202601:3", "Reasoning...\n<answer>(A)</answer>", "A", 1),
    ("202511:4", "<answer>A.</answer>", "A", 1),
    ("202601:20", "<answer>**A**</answer>", "A", 1),
    ("202601:42", "<answer>Answer: A</answer>", "A", 1),
    ("202512:38", "<answer>option a</answer>", "A", 1),
    ("202512:4", "<answer>\\text{A}</answer>", "A", 1),
    ("202602:4", "<answer>A) since the constant is sharp</answer>", "A", 1),
    ("202511:15", "no tags at all, final line:\nThe answer is A", "A", 1),
    ("202602:32", "<answer>B</answer>", "B", 0),
    ("202512:51", "<answer>(C)</answer>", "C", 0),
    ("202512:26", "<answer>E.</answer>", "E", 0),
    ("202601:13", "<answer>D</answer> wait, no: <answer>A</answer>", "A", 1),  # last tag
    ("202602:1", "<answer>A</answer> wait, no: <answer>B</answer>", "B", 0),
    ("202511:18", "<answer>F</answer>", "", 0),  # not one of A-E
    ("202512:5", "I cannot decide.", "", 0),
    ("202511:19", "<answer>b) is the one</answer>", "B", 0),
    ("202602:40", "<answer>$A$</answer>", "A", 1),
    ("202602:29", "<answer>[C]</answer>", "C", 0),
    ("202512:35", "<answer>The answer is option D</answer>", "D", 0),
]


@pytest.mark.parametrize(("item_id", "response", "chosen", "ok"), CASES)
def test_real_items(item_id, response, chosen, ok):
    raw = by_id("livemathematicianbench", FILES, item_id, exact=True)
    assert raw["correct_choice"]["label"] == "A"
    out = score_item("livemathematicianbench", raw, response)
    assert out["chosen"] == chosen and out["answer"] == chosen
    assert out["hard"] == out["soft"] == out["em"] == ok
    assert out["task_type"] == (raw["theorem_type"][0] if raw["theorem_type"] else "unknown")


def test_the_exact_text_of_a_choice_counts_as_its_label():
    raw = by_id("livemathematicianbench", FILES, "202512:48", exact=True)
    for choice in raw["choices"]:
        out = score_item("livemathematicianbench", raw, f"<answer>{choice['text']}</answer>")
        assert out["chosen"] == choice["label"]
        assert out["hard"] == float(choice["label"] == "A")


def test_shuffling_moves_the_answer_and_is_seeded():
    env = get_env("livemathematicianbench")
    moved = 0
    for raw in shared_file("livemathematicianbench", "val.json"):
        item = item_from_raw(raw, options=LiveMathOptions(shuffle_seed=7))
        again = item_from_raw(raw, options=LiveMathOptions(shuffle_seed=7))
        assert item == again  # same seed, same order
        task, gold = env.parse_task(item.task.attributes), env.parse_gold(item.grading.attributes)
        assert [c.label for c in task.choices] == list("ABCDE")
        assert gold.text == raw["correct_choice"]["text"]
        shown = {c.label: c.text for c in task.choices}
        assert shown[gold.label] == raw["correct_choice"]["text"]
        assert env.grade(f"<answer>{gold.label}</answer>", task, gold).hard == 1.0
        assert env.grade("<answer>A</answer>", task, gold).hard == float(gold.label == "A")
        moved += gold.label != "A"
    assert moved >= 10  # of 18: "always A" no longer works
    unshuffled = item_from_raw(raw, options=LiveMathOptions(shuffle_choices=False))
    assert unshuffled.grading.attributes["label"] == "A"
