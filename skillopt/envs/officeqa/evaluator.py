"""OfficeQA's trusted evaluator.

Two readings of one answer, both reported on every row:

* **normalized** (SkillOpt's metric): lower-case, drop commas, drop punctuation except ``.``,
  ``-`` and ``%``, drop the words million(s), billion(s), dollar(s) and nominal, collapse
  whitespace; ``em`` = exact match of the normalised strings, ``f1`` = token F1 over their
  whitespace tokens.
* **numeric** (the rules of upstream ``reward.py``, ``score_answer``; our own code): the answer
  must be direct (one line, at most 250 characters, exactly as many numbers as the gold once
  incidental years are set aside, no markup); numbers are parsed with thousands commas, the
  Unicode minus, accounting parentheses as negatives, currency symbols and ``%`` dropped; unit
  words near a number (thousand/million/billion/trillion) must agree when both sides have one
  (they are not converted); a number matches when ``|gold - pred| / |gold| <= tolerance``; every
  number of a multi-number gold must match; a gold with words (``March 1977``) also needs its
  words in the answer; a gold without numbers matches case-insensitively once parentheses are
  removed. Not followed: upstream's bracketed ordered-list answers (``[1, 2, 3]`` against a
  bracketed gold list); such answers are matched number by number like any multi-number gold.

``hard`` is the em (``grading: normalized``) or the numeric match (``grading: numeric``);
``soft`` is the token F1 (in numeric mode at least the numeric match).

Usage::

    verdict = grade("<answer>2,602</answer>", "2,602")            # hard 1.0
    numeric_match("2,602", "The answer is 2602.0")[0]            # False: not a direct answer
    numeric_match("2,602", "2602.0")[0]                          # True
"""

from __future__ import annotations

import collections
import re
import string
from dataclasses import dataclass

from skillopt.agents.qa import Verdict
from skillopt.envs._qa.text import answer_tags, extract_answer

__all__ = ["grade", "normalize", "normalized_em", "normalized_f1", "numeric_match", "response_answer"]

_KEEP = {".", "-", "%"}
_DROP_PUNCT = str.maketrans("", "", "".join(c for c in string.punctuation if c not in _KEEP))
_DROP_WORDS = re.compile(r"\b(?:millions?|billions?|dollars?|nominal)\b")
_FINAL = re.compile(r"<FINAL_ANSWER>\s*(.*?)\s*</FINAL_ANSWER>", re.I | re.S)


def normalize(text: str) -> str:
    """SkillOpt's OfficeQA normalisation (see the module docstring)."""
    text = text.lower().strip().replace(",", "").translate(_DROP_PUNCT)
    return " ".join(_DROP_WORDS.sub(" ", text).split())


def normalized_em(answer: str, gold: str) -> float:
    """1.0 when the normalised strings are equal."""
    return float(normalize(answer) == normalize(gold))


def normalized_f1(answer: str, gold: str) -> float:
    """Token F1 over the whitespace tokens of the normalised strings."""
    pred, ref = normalize(answer).split(), normalize(gold).split()
    if not pred or not ref:
        return float(pred == ref)
    same = sum((collections.Counter(pred) & collections.Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def response_answer(response: str) -> str:
    """The answer of a reply: the last ``<answer>`` tag, else the last ``<FINAL_ANSWER>`` tag
    (upstream's), else the last non-empty line."""
    if answer_tags(response):
        return extract_answer(response)
    final = _FINAL.findall(response)
    return final[-1].strip() if final else extract_answer(response)


# -- the numeric reading (upstream reward.py's rules) ----------------------------------------------

_CURRENCY = "$£€¥₹¢₩₽"
_BODY = r"\d{1,3}(?:,\d{3})*(?:\.\d+)?|\d+(?:\.\d+)?"
_ACCOUNTING = re.compile(rf"\(\s*([{_CURRENCY}])?\s*({_BODY})\s*\)")
_THOUSANDS = re.compile(r"(?<![\d.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?!\d)")
_NUMBER = re.compile(r"-?\d+\.?\d*%?")
_UNITS = (
    ("trillion", re.compile(r"\btrillions?\b")),
    ("billion", re.compile(r"\bbillions?\b|\bb\b")),
    ("million", re.compile(r"\bmillions?\b|\bm\b")),
    ("thousand", re.compile(r"\bthousands?\b|\bk\b")),
)
_UNIT_WORDS = re.compile(r"\b(?:trillions?|billions?|millions?|thousands?|hundreds?|percent|percentage)\b|%")
_MARKUP = re.compile(r"<[^>]*>")
_PARENS = re.compile(r"\([^)]*\)")


@dataclass(frozen=True)
class _Num:
    value: float
    unit: str | None


def _is_year(value: float) -> bool:
    return 1900 <= value <= 2100 and value == int(value)


def _numbers(text: str) -> list[_Num]:
    """Every number of ``text`` with the unit word within 20 characters of it."""
    text = " ".join(text.replace("\u2212", "-").split())

    def accounting(m: re.Match[str]) -> str:
        if m.group(1) is None and _is_year(float(m.group(2).replace(",", ""))):
            return m.group(0)
        return f"-{m.group(2)}"

    text = _ACCOUNTING.sub(accounting, text)
    text = re.sub(f"[{re.escape(_CURRENCY)}]", "", text)
    text = _THOUSANDS.sub(lambda m: m.group().replace(",", ""), text)
    out = []
    for m in _NUMBER.finditer(text):
        raw = m.group().rstrip("%")
        if raw in ("", "-"):
            continue
        context = text[max(0, m.start() - 20) : m.end() + 20].lower()
        unit = next((name for name, pattern in _UNITS if pattern.search(context)), None)
        out.append(_Num(float(raw), unit))
    return out


def _words(text: str) -> str:
    """What is left of ``text`` without numbers, unit words and punctuation."""
    cleaned = _NUMBER.sub("", " ".join(text.replace("\u2212", "-").split()).lower()).replace(",", "")
    cleaned = _UNIT_WORDS.sub("", cleaned)
    return " ".join(re.sub(r"[^\w\s]", " ", cleaned).split())


def _text_agrees(gold: str, pred: str) -> bool:
    """A gold with words (``March 1977``) needs them in the answer (or the answer's in it)."""
    g, p = _words(gold), _words(pred)
    if len(g) < 2:
        return True
    if len(p) < 2:
        return False
    return g in p or p in g


def _plain(text: str) -> str:
    text = text.strip().lower().strip('"').strip("'")
    return " ".join(_PARENS.sub("", text).split())


def _close(gold: _Num, pred: _Num, tolerance: float) -> bool:
    if gold.unit is not None and pred.unit is not None and gold.unit != pred.unit:
        return False
    if gold.value == 0:
        return pred.value == 0
    return abs(gold.value - pred.value) / abs(gold.value) <= tolerance


def numeric_match(gold: str, answer: str, tolerance: float = 0.0) -> tuple[bool, str]:
    """Whether ``answer`` (already extracted) matches ``gold`` by the numeric rules, and why.

    Raises:
        ValueError: ``tolerance`` outside [0, 1].
    """
    if not 0.0 <= tolerance <= 1.0:
        raise ValueError(f"tolerance must be in [0, 1], got {tolerance}")
    answer = answer.strip()
    if not answer:
        return False, "the answer is empty"
    if len([line for line in answer.splitlines() if line.strip()]) > 1:
        return False, "the answer spans several lines (a direct answer is one line)"
    if len(answer) > 250:
        return False, "the answer is longer than 250 characters (not a direct answer)"
    if "unable to determine" in answer.lower():
        return False, "the answer says it is unable to determine"
    golds, preds = _numbers(gold), _numbers(answer)
    if not golds:
        if preds:
            return False, "the answer has numbers but the gold is text"
        ok = _plain(gold) == _plain(answer)
        return ok, "text match" if ok else f"text differs from the gold {gold!r}"
    keep_years = any(_is_year(g.value) for g in golds) or (len(golds) == 1 and len(_words(gold)) >= 2)
    preds = preds if keep_years else [p for p in preds if not _is_year(p.value)]
    if len(preds) != len(golds):
        return False, f"the answer has {len(preds)} number(s), the gold {len(golds)}"
    if _MARKUP.search(answer):
        return False, "the answer holds markup"
    if not _text_agrees(gold, answer):
        return False, f"the words of the gold {gold!r} are not in the answer"
    missing = [g.value for g in golds if not any(_close(g, p, tolerance) for p in preds)]
    if missing:
        return False, f"no number of the answer matches {missing} within {tolerance:g}"
    return True, "numeric match"


# -- the verdict ---------------------------------------------------------------------------------


def grade(response: str, gold: str, *, mode: str = "normalized", tolerance: float = 0.0) -> Verdict:
    """Grade a response against the gold answer (see the module docstring)."""
    answer = response_answer(response)
    em = normalized_em(answer, gold)
    f1 = normalized_f1(answer, gold)
    numeric, why = numeric_match(gold, answer, tolerance)
    hard = float(numeric) if mode == "numeric" else em
    soft = max(f1, float(numeric)) if mode == "numeric" else f1
    reason = ""
    if hard < 1.0:
        reason = (
            f"{'numeric' if mode == 'numeric' else 'EM'}=0: predicted {answer[:200]!r} but expected "
            f"{gold!r}" + (f" ({why})" if mode == "numeric" else "")
        )
    report = (
        "[EVALUATION RESULT]\n"
        f"Predicted answer: {answer!r}\nGold answer: {gold!r}\n"
        f"EM={em:.0f} F1={f1:.3f} numeric={int(numeric)} ({why}; tolerance {tolerance:g})"
    )
    return Verdict(
        hard=hard,
        soft=soft,
        answer=answer,
        fail_reason=reason,
        metrics={"em": em, "f1": f1, "numeric": float(numeric), "gold": gold, "grading": mode},
        report=report,
    )
