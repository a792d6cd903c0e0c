"""LiveMathematicianBench's trusted evaluator (reference §5.4): parse the chosen label, score
accuracy (``hard = soft = em = f1``).

Parsing, in order: the answer (last ``<answer>`` tag, else the last non-empty line) as a bare
label (``B``, ``(B)``, ``B.``, ``**B**``, ``Option B``); a choice's exact text
(case-insensitive); a leading label (``B. because ...``); the first token (reference).

Usage::

    grade("<answer>(C)</answer>", labels=["A", "B", "C"], texts=[...], gold="C").hard   # 1.0
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from skillopt.agents.qa import Verdict
from skillopt.envs._qa.text import extract_answer

__all__ = ["grade", "parse_label"]

_WRAP = re.compile(r"^[\s*_`$\"'(\[{]+|[\s*_`$\"')\]}.:;,]+$")
_PREFIX = re.compile(r"^(?:the\s+)?(?:final\s+)?(?:answer|option|choice)\s*(?:is|:|=)?\s*", re.I)
_TEXT_CMD = re.compile(r"\\(?:text|textbf|mathrm)\{([^{}]*)\}")
_LEADING = re.compile(r"^\(?([A-Za-z])\)?[.):]\s")


def _bare(text: str) -> str:
    text = _TEXT_CMD.sub(r"\1", text.strip())
    for _ in range(3):  # "The answer is option (B)." -> "B"
        text = _WRAP.sub("", _PREFIX.sub("", text))
    return text.strip()


def parse_label(response: str, labels: Sequence[str], texts: Sequence[str]) -> str:
    """The label the response chooses, ``""`` when none can be read."""
    answer = extract_answer(response)
    upper = [label.upper() for label in labels]
    bare = _bare(answer)
    if bare.upper() in upper:
        return labels[upper.index(bare.upper())]
    folded = answer.strip().casefold()
    for label, text in zip(labels, texts, strict=True):
        if text.strip() and folded == text.strip().casefold():
            return label
    if (m := _LEADING.match(answer.strip())) and m.group(1).upper() in upper:
        return labels[upper.index(m.group(1).upper())]
    token = answer.strip().split()[0] if answer.strip() else ""
    token = _bare(token).upper()
    return labels[upper.index(token)] if token in upper else ""


def grade(response: str, *, labels: Sequence[str], texts: Sequence[str], gold: str) -> Verdict:
    """Grade a response: 1.0 when the parsed label is the gold label."""
    label = parse_label(response, labels, texts)
    ok = float(label == gold)
    if ok:
        reason = ""
    elif not label:
        reason = f"no-label: could not read one of {', '.join(labels)} from the answer"
    else:
        reason = f"wrong-choice: chose {label} but the answer is {gold}"
    return Verdict(
        hard=ok,
        soft=ok,
        answer=label,
        fail_reason=reason,
        metrics={"em": ok, "f1": ok, "gold": gold, "chosen": label},
        report=f"[EVALUATION RESULT]\nChosen: {label or '(none)'}\nCorrect choice: {gold}\nCorrect={ok:.0f}",
    )
