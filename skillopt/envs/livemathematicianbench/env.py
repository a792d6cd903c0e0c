"""LiveMathematicianBench as the sandbox service runs it (the ``qa`` agent, no container)."""

from __future__ import annotations

from pathlib import Path

from skillopt.agents.qa import Verdict
from skillopt.envs._qa.env import QAEnv
from skillopt.envs.livemathematicianbench import evaluator
from skillopt.envs.livemathematicianbench.items import LiveMathGold, LiveMathTask
from skillopt.envs.livemathematicianbench.spec import SPEC

__all__ = ["LiveMathEnv"]


class LiveMathEnv(QAEnv):
    """Multiple-choice theorem questions, graded by the chosen label."""

    spec = SPEC
    task_model = LiveMathTask
    gold_model = LiveMathGold
    prompts_dir = Path(__file__).parent / "prompts"

    def prompt_fields(self, task: LiveMathTask) -> dict[str, str]:
        choices = "\n\n".join(f"{c.label}. {c.text.strip()}" for c in task.choices)
        extra = ""
        if task.theorem.strip():
            extra += f"\n\n## Source theorem\n{task.theorem.strip()}"
        if task.sketch.strip():
            extra += f"\n\n## Proof sketch\n{task.sketch.strip()}"
        return {
            "question": task.question.strip(),
            "choices": choices,
            "labels": ", ".join(c.label for c in task.choices),
            "extra": extra,
        }

    def grade(self, response: str, task: LiveMathTask, gold: LiveMathGold) -> Verdict:
        return evaluator.grade(
            response,
            labels=[c.label for c in task.choices],
            texts=[c.text for c in task.choices],
            gold=gold.label,
        )
