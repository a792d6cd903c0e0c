"""SearchQA's evaluator on real items (hand-checked): SQuAD normalisation, EM / token F1 /
sub-EM, answer extraction. Graded through ``score_item``, the path of ``skillopt score``."""

from __future__ import annotations

import pytest

from skillopt.envs._qa.scoring import score_item
from skillopt.envs.searchqa.items import truncate_context

from .conftest import by_id

# (id prefix, response, em, f1, sub_em), each worked out by hand from the gold answers.
CASES = [
    ("1758dc50", "<answer>A red cent</answer>", 1, 1.0, 1),  # article dropped
    ("52967b20", "<answer>Seasons in the Sun</answer>", 1, 1.0, 1),  # quotes and case
    ("e77dbfc0", "<answer>Fum.</answer>", 1, 1.0, 1),
    ("675f01b5", "It's the peanut butter.\n<answer>Jif peanut butter</answer>", 0, 0.5, 1),
    ("98773558", "<answer>Grauman's Chinese Theater</answer>", 1, 1.0, 1),  # gold has a stray backslash
    ("e91f1225", "<answer>Puff Daddy</answer>", 0, 0.0, 0),
    ("b68a14a7", "The scientist is:\nCarl Sagan", 1, 1.0, 1),  # no tag: last non-empty line
    ("e2e67998", "<answer>owl</answer>", 1, 1.0, 1),
    ("c51c26c0", "<answer>Give me liberty, or give me death!</answer>", 1, 1.0, 1),
    ("f822cde3", "<answer>East River</answer>", 1, 1.0, 1),
    ("f0375776", "<answer>bee</answer>", 0, 0.0, 1),  # gold 'be/bee' normalises to 'bebee'
    ("32a66c67", "<answer>Nine to Five</answer>", 0, 1 / 3, 0),
    ("b028bea9", "<answer>14 July</answer>", 0, 1.0, 0),  # same bag of tokens, other order
    ("c9f3a971", "<answer>Joseph McCarthy</answer>", 1, 1.0, 1),
    ("d5c48bd6", "<answer>Washington DC</answer>", 1, 1.0, 1),
    ("746806ac", "<answer>oklahoma</answer>", 1, 1.0, 1),
    ("fbaae952", "<answer>Olivia Newton John</answer>", 1, 1.0, 1),  # the second gold
    ("8065f2e8", "<answer>faction and action</answer>", 0, 0.8, 0),
    ("1882f20b", "<answer>one quarter</answer>", 0, 0.0, 0),
    ("9d08ada7", "<answer>Gore</answer>", 0, 2 / 3, 1),
    ("a3a38922", "<answer>London</answer> Hmm, no: <answer>Paris</answer>", 0, 0.0, 0),  # last tag counts
    ("12d5b51c", "<ANSWER> Turkey </ANSWER>", 1, 1.0, 1),
    ("691e3a24", "", 0, 0.0, 1),  # empty: sub-EM is 1 by the reference's definition
    ("940ddc06", "<answer>\nAnimal\nHouse\n</answer>", 1, 1.0, 1),
]


@pytest.mark.parametrize(("prefix", "response", "em", "f1", "sub"), CASES)
def test_real_items(prefix, response, em, f1, sub):
    raw = by_id("searchqa", ("train.json", "val.json"), prefix)
    out = score_item("searchqa", raw, response)
    assert out["em"] == em and out["hard"] == em
    assert out["f1"] == pytest.approx(f1) and out["soft"] == pytest.approx(f1)
    assert out["sub_em"] == sub
    assert out["id"] == raw["id"] and out["gold"] == raw["answers"]
    assert (out["fail_reason"] == "") == bool(em)


def test_context_is_cut_at_doc_boundaries():
    raw = by_id("searchqa", ("train.json",), "221c83e6")
    context = raw["context"]
    cut = truncate_context(context, 1000)
    assert len(cut) <= 1000 and context.startswith(cut) and cut.startswith("[DOC]")
    rest = context[len(cut) :].lstrip()
    assert rest.startswith("[DOC]")  # the next document was dropped whole
    assert truncate_context(context, 0) == context == truncate_context(context, len(context))
    first = context.index("[DOC]", 1)
    assert truncate_context(context, first - 10).endswith("...[truncated]")  # first doc cut hard
