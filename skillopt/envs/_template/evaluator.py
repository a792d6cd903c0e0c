"""The env's trusted evaluator: a response → a :class:`~skillopt.agents.qa.Verdict`."""

from __future__ import annotations

from skillopt.agents.qa import Verdict
from skillopt.envs._qa.text import exact_match, extract_answer, token_f1

__all__ = ["grade"]


def grade(response: str, gold: str) -> Verdict:
    """Exact match (hard) and token F1 (soft) of the extracted answer."""
    answer = extract_answer(response)
    em, f1 = exact_match(answer, [gold]), token_f1(answer, [gold])
    return Verdict(
        hard=em,
        soft=f1,
        answer=answer,
        fail_reason="" if em else f"EM=0: predicted {answer[:200]!r} but expected {gold!r}",
        metrics={"em": em, "f1": f1, "gold": gold},
        report=f"[EVALUATION RESULT]\nPredicted answer: {answer!r}\nGold answer: {gold!r}\nEM={em:.0f}",
    )
