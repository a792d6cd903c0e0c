"""MATH-500 as the sandbox service runs it (the ``qa`` agent, no container)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from skillopt.agents.qa import Verdict
from skillopt.envs._qa.env import QAEnv
from skillopt.envs.math500 import evaluator
from skillopt.envs.math500.items import Math500Gold, Math500Task
from skillopt.envs.math500.spec import SPEC

__all__ = ["Math500Env"]


class Math500Env(QAEnv):
    """Competition math, graded by equivalence of the boxed answer."""

    spec = SPEC
    task_model = Math500Task
    gold_model = Math500Gold
    prompts_dir = Path(__file__).parent / "prompts"

    def prompt_fields(self, task: Math500Task) -> dict[str, str]:
        return {"question": task.question.strip()}

    def grade(self, response: str, task: Math500Task, gold: Math500Gold) -> Verdict:
        verdict = evaluator.grade(response, gold.answer, timeout_s=gold.verify_timeout_s)
        if gold.solution and not verdict.hard:
            return replace(verdict, report=f"{verdict.report}\nReference solution:\n{gold.solution}")
        return verdict
