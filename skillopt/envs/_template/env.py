"""The env as the sandbox service runs it."""

from __future__ import annotations

from pathlib import Path

from skillopt.agents.qa import Verdict
from skillopt.envs._qa.env import QAEnv
from skillopt.envs._template import evaluator
from skillopt.envs._template.items import TemplateGold, TemplateTask
from skillopt.envs._template.spec import SPEC

__all__ = ["TemplateEnv"]


class TemplateEnv(QAEnv):
    """Questions graded by exact match."""

    spec = SPEC
    task_model = TemplateTask
    gold_model = TemplateGold
    prompts_dir = Path(__file__).parent / "prompts"

    def prompt_fields(self, task: TemplateTask) -> dict[str, str]:
        return {"question": task.question.strip()}

    def grade(self, response: str, task: TemplateTask, gold: TemplateGold) -> Verdict:
        return evaluator.grade(response, gold.answer)
