"""GSM8K as the sandbox service runs it (the ``qa`` agent, no container)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from skillopt.agents.qa import Verdict
from skillopt.envs._qa.env import QAEnv
from skillopt.envs.gsm8k import evaluator
from skillopt.envs.gsm8k.items import GSM8KGold, GSM8KTask
from skillopt.envs.gsm8k.spec import SPEC

__all__ = ["GSM8KEnv"]


class GSM8KEnv(QAEnv):
    """Math word problems, graded by the exact final number."""

    spec = SPEC
    task_model = GSM8KTask
    gold_model = GSM8KGold
    prompts_dir = Path(__file__).parent / "prompts"

    def prompt_fields(self, task: GSM8KTask) -> dict[str, str]:
        return {"question": task.question.strip()}

    def grade(self, response: str, task: GSM8KTask, gold: GSM8KGold) -> Verdict:
        verdict = evaluator.grade(response, gold.answer)
        if gold.solution and not verdict.hard:
            report = f"{verdict.report}\nReference solution:\n{gold.solution}"
            return replace(verdict, report=report)
        return verdict
