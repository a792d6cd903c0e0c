"""SearchQA's trusted evaluator (reference §5.1): the answer from the last ``<answer>`` tag
(else the last non-empty line), SQuAD normalisation, EM = hard, token F1 = soft, sub-EM
reported.

Usage::

    verdict = grade("... <answer>Tom Clancy</answer>", ["Tom Clancy"])
    verdict.hard, verdict.soft, verdict.metrics["sub_em"]     # 1.0, 1.0, 1.0
"""

from __future__ import annotations

from collections.abc import Sequence

from skillopt.agents.qa import Verdict
from skillopt.envs._qa.text import exact_match, extract_answer, substring_match, token_f1

__all__ = ["evaluation_report", "grade"]


def evaluation_report(answer: str, golds: Sequence[str], em: float, f1: float) -> str:
    """The ``[EVALUATION RESULT]`` block the analyst sees (holds the gold answers)."""
    return (
        "[EVALUATION RESULT]\n"
        f"Predicted answer: {answer!r}\n"
        f"Gold answers: {list(golds)!r}\n"
        f"EM={em:.0f} F1={f1:.3f}"
    )


def grade(response: str, golds: Sequence[str]) -> Verdict:
    """Grade a response against the accepted answers (any gold counts)."""
    answer = extract_answer(response)
    em = exact_match(answer, golds)
    f1 = token_f1(answer, golds)
    sub = substring_match(answer, golds)
    reason = "" if em else f"EM=0: predicted {answer[:200]!r} but expected {list(golds)[:5]!r}"
    return Verdict(
        hard=em,
        soft=f1,
        answer=answer,
        fail_reason=reason,
        metrics={"em": em, "f1": f1, "sub_em": sub, "gold": list(golds)},
        report=evaluation_report(answer, golds, em, f1),
    )
