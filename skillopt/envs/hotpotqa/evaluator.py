"""HotpotQA's trusted evaluator: answer EM (hard) and F1 (soft) as in the official
``hotpot_evaluate_v1.py``: SQuAD normalisation, and an F1 of 0 when either side is ``yes``,
``no`` or ``noanswer`` and the two differ (a yes/no question is all or nothing).

Usage::

    grade("<answer>the Beer Hunter</answer>", "Beer Hunter").hard    # 1.0
"""

from __future__ import annotations

from skillopt.agents.qa import Verdict
from skillopt.envs._qa.text import exact_match, extract_answer, normalize_answer, substring_match, token_f1

__all__ = ["grade", "hotpot_f1"]

_SPECIAL = ("yes", "no", "noanswer")


def hotpot_f1(prediction: str, gold: str) -> float:
    """The official answer F1 (with the yes/no/noanswer rule)."""
    pred, ref = normalize_answer(prediction), normalize_answer(gold)
    if (pred in _SPECIAL or ref in _SPECIAL) and pred != ref:
        return 0.0
    return token_f1(prediction, [gold])


def grade(response: str, gold: str) -> Verdict:
    """Grade a response against the gold answer."""
    answer = extract_answer(response)
    em = exact_match(answer, [gold])
    f1 = hotpot_f1(answer, gold)
    reason = "" if em else f"EM=0: predicted {answer[:200]!r} but expected {gold!r}"
    return Verdict(
        hard=em,
        soft=f1,
        answer=answer,
        fail_reason=reason,
        metrics={"em": em, "f1": f1, "sub_em": substring_match(answer, [gold]), "gold": gold},
        report=f"[EVALUATION RESULT]\nPredicted answer: {answer!r}\nGold answer: {gold!r}\nEM={em:.0f} F1={f1:.3f}",
    )
