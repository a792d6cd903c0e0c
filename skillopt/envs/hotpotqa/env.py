"""HotpotQA as the sandbox service runs it (the ``qa`` agent, no container)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from skillopt.agents.qa import Verdict
from skillopt.envs._qa.env import QAEnv
from skillopt.envs.hotpotqa import evaluator
from skillopt.envs.hotpotqa.items import HotpotQAGold, HotpotQATask
from skillopt.envs.hotpotqa.spec import SPEC

__all__ = ["HotpotQAEnv", "format_paragraphs"]


def format_paragraphs(task: HotpotQATask) -> str:
    """The paragraphs as prompt text (``### title`` + the sentences), cut at paragraph
    boundaries to ``task.context_chars`` when set."""
    blocks = [f"### {p.title}\n{''.join(p.sentences).strip()}" for p in task.paragraphs]
    if task.context_chars:
        kept: list[str] = []
        size = 0
        for block in blocks:
            if kept and size + len(block) > task.context_chars:
                break
            kept.append(block[: task.context_chars] if not kept else block)
            size += len(block) + 2
        blocks = kept
    return "\n\n".join(blocks)


class HotpotQAEnv(QAEnv):
    """Multi-hop questions over paragraphs, graded by answer EM / F1."""

    spec = SPEC
    task_model = HotpotQATask
    gold_model = HotpotQAGold
    prompts_dir = Path(__file__).parent / "prompts"

    def prompt_fields(self, task: HotpotQATask) -> dict[str, str]:
        return {"question": task.question.strip(), "paragraphs": format_paragraphs(task)}

    def grade(self, response: str, task: HotpotQATask, gold: HotpotQAGold) -> Verdict:
        verdict = evaluator.grade(response, gold.answer)
        if gold.supporting_titles:
            titles = ", ".join(repr(t) for t in gold.supporting_titles)
            return replace(verdict, report=f"{verdict.report}\nSupporting paragraphs: {titles}")
        return verdict
