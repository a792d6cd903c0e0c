"""Answer extraction and SQuAD-style answer metrics, shared by the question-answering envs.

* :func:`extract_answer`: the last ``<answer>…</answer>`` (any case, across lines), else the
  last non-empty line, else the stripped text (reference §5.1).
* :func:`normalize_answer` (SQuAD): lower-case → drop ASCII punctuation → drop the whole words
  ``a``/``an``/``the`` → collapse whitespace.
* :func:`exact_match`, :func:`token_f1`, :func:`substring_match` over a list of gold answers
  (the best gold counts).

Usage::

    answer = extract_answer(response)
    em, f1, sub = exact_match(answer, golds), token_f1(answer, golds), substring_match(answer, golds)
"""

from __future__ import annotations

import collections
import re
import string
from collections.abc import Sequence

__all__ = [
    "answer_tags",
    "boxed_contents",
    "exact_match",
    "extract_answer",
    "last_boxed",
    "normalize_answer",
    "substring_match",
    "token_f1",
]

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.I | re.S)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def answer_tags(text: str) -> list[str]:
    """Every ``<answer>…</answer>`` content of ``text``, in order (stripped)."""
    return [m.strip() for m in _ANSWER.findall(text)]


def extract_answer(text: str) -> str:
    """The answer of a reply: the last ``<answer>`` tag's content, else the last non-empty
    line, else the stripped text (reference §5.1)."""
    tags = answer_tags(text)
    if tags:
        return tags[-1]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else text.strip()


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower-case, no ASCII punctuation, no articles, single spaces."""
    text = text.lower().translate(_PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, golds: Sequence[str]) -> float:
    """1.0 when the normalised prediction equals some normalised gold, else 0.0."""
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(g) for g in golds))


def _f1(pred_tokens: list[str], gold_tokens: list[str]) -> float:
    if not pred_tokens or not gold_tokens:
        # Empty against empty is a match; empty against anything else is not.
        return float(pred_tokens == gold_tokens)
    common = collections.Counter(pred_tokens) & collections.Counter(gold_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred_tokens)
    recall = same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, golds: Sequence[str]) -> float:
    """The best token-level F1 (bag of normalised tokens) of the prediction over the golds."""
    pred = normalize_answer(prediction).split()
    return max((_f1(pred, normalize_answer(g).split()) for g in golds), default=0.0)


def substring_match(prediction: str, golds: Sequence[str]) -> float:
    """1.0 when some normalised gold is a substring of the normalised prediction or vice versa.

    As in the reference, an empty prediction is a substring of every gold and scores 1.0;
    ``sub_em`` is reported, never used as a score.
    """
    pred = normalize_answer(prediction)
    for gold in golds:
        g = normalize_answer(gold)
        if g in pred or pred in g:
            return 1.0
    return 0.0


_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")


def boxed_contents(text: str) -> list[str]:
    """The contents of every ``\\boxed{...}`` (and ``\\fbox{...}``) in ``text``, in order,
    with nested braces kept whole (``\\boxed{\\frac{1}{2}}`` → ``\\frac{1}{2}``); an unclosed
    box is ignored."""
    out = []
    for m in _BOXED.finditer(text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            if text[i] == "\\" and i + 1 < len(text) and text[i + 1] in "{}":
                i += 2  # an escaped brace (\\{ \\}) does not nest
                continue
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            out.append(text[m.end() : i - 1].strip())
    return out


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` of ``text``, ``None`` when there is none."""
    found = boxed_contents(text)
    return found[-1] if found else None
