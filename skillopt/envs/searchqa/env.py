"""SearchQA as the sandbox service runs it: the ``qa`` agent (no container) and the Codex exec
variant (question and context as files in the container's workspace)."""

from __future__ import annotations

from pathlib import Path

from skillopt.agents.qa import Verdict
from skillopt.envs._qa.env import QAEnv, fill
from skillopt.envs.searchqa import evaluator
from skillopt.envs.searchqa.items import SearchQAGold, SearchQATask, truncate_context
from skillopt.envs.searchqa.spec import SPEC

__all__ = ["SearchQAEnv"]


class SearchQAEnv(QAEnv):
    """Questions answered from search snippets, graded by EM / token F1."""

    spec = SPEC
    task_model = SearchQATask
    gold_model = SearchQAGold
    prompts_dir = Path(__file__).parent / "prompts"
    skill_description = (
        "Rules for answering Jeopardy!-style questions from search-engine snippets; read it before answering."
    )
    skill_preamble = (
        "You answer trivia questions from search-engine snippets. The question is in `question.md`, "
        "the snippets in `context.md`. Answer with the shortest exact entity, inside <answer></answer>."
    )

    def prompt_fields(self, task: SearchQATask) -> dict[str, str]:
        return {
            "question": task.question.strip(),
            "context": truncate_context(task.context, task.context_chars),
        }

    def grade(self, response: str, task: SearchQATask, gold: SearchQAGold) -> Verdict:
        return evaluator.grade(response, gold.answers)

    def workspace_files(self, task: SearchQATask) -> dict[str, bytes]:
        fields = self.prompt_fields(task)
        return {
            "task.md": (fill(self.prompt("exec_task")).strip() + "\n").encode("utf-8"),
            "question.md": (fields["question"] + "\n").encode("utf-8"),
            "context.md": (fields["context"] + "\n").encode("utf-8"),
        }
