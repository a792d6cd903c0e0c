"""GSM8K's trusted evaluator: the final number of the response, compared exactly.

Where the answer is taken from, in order: the last ``<answer>`` tag; a ``#### <n>`` line; the
last ``\\boxed{}``; the whole response. Of that text the **last number** counts, read after
dropping thousands separators (``1,080``), currency (``$``, ``€``, ``£``), units and words
(``18 dollars``), percent signs, and with a unicode minus (``−5``) as a minus sign. Numbers
compare as decimals, so trailing zeros do not matter (``18.00`` = ``18``; ``.5`` = ``0.5``);
a plain fraction ``a/b`` is its value.

Usage::

    grade("... so she earns <answer>$1,080.00</answer>", "1080").hard   # 1.0
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from skillopt.agents.qa import Verdict
from skillopt.envs._qa.text import answer_tags, last_boxed

__all__ = ["grade", "parse_number", "response_number"]

_NUMBER = re.compile(r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:\s*/\s*\d+)?")
_HASHES = re.compile(r"####\s*([^\n]*)")


def parse_number(text: str) -> Decimal | None:
    """The last number in ``text`` as a decimal, ``None`` when it holds none."""
    cleaned = text.replace("\u2212", "-").replace("\u2013", "-")
    cleaned = re.sub(r"[$€£¥]", "", cleaned)
    cleaned = cleaned.replace("\\,", "").replace("\\!", "")
    found = [m.group(0) for m in _NUMBER.finditer(cleaned) if re.search(r"\d", m.group(0))]
    if not found:
        return None
    raw = found[-1].replace(",", "").replace(" ", "")
    try:
        if "/" in raw:
            num, den = raw.split("/", 1)
            return Decimal(num) / Decimal(den) if Decimal(den) != 0 else None
        return Decimal(raw)
    except (InvalidOperation, ValueError):
        return None


def response_number(response: str) -> tuple[str, Decimal | None]:
    """``(the answer text, its number)`` of a response (see the module docstring)."""
    tags = answer_tags(response)
    if tags:
        text = tags[-1]
    elif m := list(_HASHES.finditer(response)):
        text = m[-1].group(1)
    elif (boxed := last_boxed(response)) is not None:
        text = boxed
    else:
        text = response
    return text.strip(), parse_number(text)


def _same(a: Decimal, b: Decimal) -> bool:
    return a == b or abs(a - b) <= Decimal("1e-9") * max(Decimal(1), abs(b))


def grade(response: str, gold: str) -> Verdict:
    """Grade a response against the gold final number (``gold`` as in the data, e.g. ``1,080``)."""
    text, number = response_number(response)
    target = parse_number(gold)
    ok = float(number is not None and target is not None and _same(number, target))
    shown = format(number.normalize(), "f") if number is not None else ""
    if ok:
        reason = ""
    elif number is None:
        reason = f"no-number: found no number in the answer {text[:120]!r}"
    else:
        reason = f"wrong-number: got {shown} but the answer is {gold}"
    return Verdict(
        hard=ok,
        soft=ok,
        answer=shown,
        fail_reason=reason,
        metrics={"em": ok, "gold": gold, "answer_text": text[:500]},
        report=f"[EVALUATION RESULT]\nPredicted number: {shown or '(none)'}\nGold answer: {gold}\nCorrect={ok:.0f}",
    )
