"""MATH-500's evaluator on real items (hand-checked): ``\\boxed{}`` extraction with nested
braces, and mathematical equivalence (math-verify) of fractions, radicals, intervals,
``\\left``/``\\right``, spacing and units."""

from __future__ import annotations

import pytest

from skillopt.envs._qa.scoring import score_item
from skillopt.envs._qa.text import boxed_contents, last_boxed
from skillopt.envs.math500.equivalence import equivalent

from .conftest import shared_file


def item_with_gold(gold: str) -> dict:
    hits = [x for x in shared_file("math500", "test.jsonl") if last_boxed(x["answer"]) == gold]
    assert hits, gold
    return hits[0]


# (gold as boxed in the reference solution, response, correct?)
CASES = [
    ("\\left( 3, \\frac{\\pi}{2} \\right)", "So \\boxed{(3,\\frac{\\pi}{2})}.", 1),  # \left/\right, spacing
    ("p - q", "<answer>\\boxed{-q+p}</answer>", 1),
    ("\\frac{14}{3}", "<answer>\\boxed{\\dfrac{14}{3}}</answer>", 1),
    ("\\frac{14}{3}", "<answer>\\boxed{4.67}</answer>", 0),  # an approximation is not the value
    ("\\text{Evelyn}", "<answer>\\boxed{\\text{Evelyn}}</answer>", 1),
    ("90^\\circ", "<answer>\\boxed{90}</answer>", 1),  # degrees
    ("3\\sqrt{13}", "<answer>\\boxed{\\sqrt{117}}</answer>", 1),  # radicals
    ("\\frac{3}{56}", "<answer>3/56</answer>", 1),  # no box: the tag's content
    ("\\sqrt{51}", "$\\boxed{\\sqrt{51}}$", 1),
    ("6 - 5i", "<answer>\\boxed{6-5i}</answer>", 1),
    ("-50", "<answer>\\boxed{50}</answer>", 0),  # the sign matters
    ("\\pi", "<answer>\\boxed{\\pi}</answer>", 1),
    ("\\frac{243}{625}", "<answer>\\boxed{0.3888}</answer>", 1),  # an exact decimal equals the fraction
    ("11\\sqrt2", "<answer>\\boxed{11\\sqrt{2}}</answer>", 1),
    ("1,-2", "<answer>\\boxed{-2, 1}</answer>", 1),  # a list of solutions in any order
    ("(3,4]", "<answer>\\boxed{(3, 4]}</answer>", 1),  # an interval
    ("(3,4]", "<answer>\\boxed{[3, 4]}</answer>", 0),  # ... with the other bracket is another interval
    ("(-\\infty, 0]", "<answer>\\boxed{\\left(-\\infty,0\\right]}</answer>", 1),
    ("x^3+3x-6", "<answer>\\boxed{3x + x^3 - 6}</answer>", 1),  # polynomial identity
    ("864 \\mbox{ inches}^2", "<answer>\\boxed{864}</answer>", 1),  # units
    (
        "\\begin{pmatrix} -2 \\\\ -14 \\\\ -7 \\end{pmatrix}",
        "\\boxed{\\begin{pmatrix}-2\\\\-14\\\\-7\\end{pmatrix}}",
        1,
    ),
    ("\\frac{3\\sqrt{3}}{4}", "\\boxed{\\frac{3}{4}\\sqrt{3}}", 1),
    ("2220", "The answer is 2220", 1),  # no tag, no box: the last line
]


@pytest.mark.parametrize(("gold", "response", "ok"), CASES)
def test_real_items(gold, response, ok):
    raw = item_with_gold(gold)
    out = score_item("math500", raw, response)
    assert out["gold"] == gold
    assert out["hard"] == out["soft"] == ok, out


def test_boxed_extraction_keeps_nested_braces():
    assert boxed_contents("a \\boxed{\\frac{1}{2}} b \\boxed{\\{1, 2\\}}") == ["\\frac{1}{2}", "\\{1, 2\\}"]
    assert last_boxed("\\boxed{x^{2^{3}}} then \\boxed {\\sqrt{\\frac{a}{b}}}") == "\\sqrt{\\frac{a}{b}}"
    assert last_boxed("\\boxed{unclosed") is None and last_boxed("no box") is None
    # The gold of every MATH-500 item is found (the last box of its solution).
    assert all(last_boxed(x["answer"]) for x in shared_file("math500", "test.jsonl"))


def test_a_pathological_answer_times_out_instead_of_hanging():
    assert equivalent("1", "10^{10^{10^{10}}}", timeout_s=1.0) in (False, None)
    assert equivalent("\\frac{1}{2}", "0.5", timeout_s=10.0) is True  # the worker is back
