"""MATH-500's trusted evaluator: the model's final answer against the boxed gold answer, by
mathematical equivalence (:mod:`.equivalence`, math-verify).

The answer is read, in order, from: the last ``<answer>`` tag (its last ``\\boxed{}`` if it
has one); the response's last ``\\boxed{}`` (nested braces kept whole); the last non-empty
line. Surrounding ``$``/``\\(``/``\\)`` and a leading "The answer is" are dropped.

Usage::

    grade("... so \\\\boxed{\\\\dfrac{1}{2}}", "\\\\frac12").hard   # 1.0
"""

from __future__ import annotations

import re

from skillopt.agents.qa import Verdict
from skillopt.envs._qa.text import answer_tags, extract_answer, last_boxed
from skillopt.envs.math500.equivalence import equivalent

__all__ = ["extract_final", "grade"]

_LEAD = re.compile(r"^(?:the\s+)?(?:final\s+)?answer\s*(?:is|:)\s*", re.I)


def _clean(text: str) -> str:
    text = _LEAD.sub("", text.strip())
    for open_, close in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
        if text.startswith(open_) and text.endswith(close) and len(text) >= len(open_) + len(close):
            text = text[len(open_) : len(text) - len(close)].strip()
    return text.rstrip(".").strip()


def extract_final(response: str) -> str:
    """The final answer of a response (see the module docstring)."""
    tags = answer_tags(response)
    if tags:
        boxed = last_boxed(tags[-1])
        return _clean(boxed if boxed is not None else tags[-1])
    boxed = last_boxed(response)
    if boxed is not None:
        return _clean(boxed)
    return _clean(extract_answer(response))


def grade(response: str, gold: str, *, timeout_s: float = 10.0) -> Verdict:
    """Grade a response against the gold answer (the content of the solution's ``\\boxed{}``)."""
    answer = extract_final(response)
    same = equivalent(gold, answer, timeout_s=timeout_s) if answer else False
    ok = float(bool(same))
    if ok:
        reason = ""
    elif not answer:
        reason = "no-answer: the response has no final answer"
    elif same is None:
        reason = f"grader-timeout: the equivalence check of {answer[:80]!r} did not finish in {timeout_s:g} s"
    else:
        reason = f"not-equivalent: got {answer[:120]!r} but the answer is {gold!r}"
    return Verdict(
        hard=ok,
        soft=ok,
        answer=answer,
        fail_reason=reason,
        metrics={"em": ok, "gold": gold},
        report=f"[EVALUATION RESULT]\nPredicted answer: {answer!r}\nGold answer: {gold!r}\nEquivalent={ok:.0f}",
    )
