"""GSM8K items: raw item (``{question, answer}``, the answer a worked solution ending in
``#### <number>``) → task + grading payload. Items have no id: it is derived from the question
text (:func:`skillopt.envs._qa.raw.content_id`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from skillopt.envs._qa.raw import content_id, text_field
from skillopt.envs.base import TaskItem
from skillopt.envs.gsm8k.spec import GSM8KOptions
from skillopt.types import Grading, Task

__all__ = ["CATEGORIES", "GSM8KGold", "GSM8KTask", "category", "item_from_raw", "split_solution"]

#: Per-category breakdown: the length of the reference solution (reasoning steps).
CATEGORIES = ("steps_1_2", "steps_3_4", "steps_5plus")


class GSM8KTask(BaseModel):
    """``task.attributes`` of a GSM8K rollout (what the agent sees)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    question: str = Field(min_length=1, max_length=20_000)


class GSM8KGold(BaseModel):
    """``grading.attributes`` (trusted side only): the final number and the worked solution."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    answer: str = Field(min_length=1, max_length=200)
    solution: str = Field(default="", max_length=50_000)


def split_solution(answer: str) -> tuple[str, str]:
    """``(worked solution, final number text)`` of a GSM8K answer field.

    Raises:
        ValueError: no ``####`` line.
    """
    if "####" not in answer:
        raise ValueError("field 'answer' has no '#### <number>' final line")
    steps, _, final = answer.rpartition("####")
    final = final.strip()
    if not final:
        raise ValueError("field 'answer' has an empty '####' final line")
    return steps.strip(), final


def category(solution: str) -> str:
    """``steps_1_2`` / ``steps_3_4`` / ``steps_5plus`` from the solution's non-empty lines."""
    steps = sum(1 for line in solution.splitlines() if line.strip())
    return CATEGORIES[0] if steps <= 2 else CATEGORIES[1] if steps <= 4 else CATEGORIES[2]


def item_from_raw(
    raw: Mapping[str, Any], *, options: GSM8KOptions, position: int = 0, source: str = ""
) -> TaskItem:
    """The task item of one raw GSM8K item.

    Raises:
        ValueError: a field is missing or malformed (the message names it).
    """
    question = text_field(raw, "question")
    solution, final = split_solution(text_field(raw, "answer"))
    kind = category(solution)
    item_id = text_field(raw, "id", required=False) or content_id("gsm8k", question)
    task = Task(
        id=item_id,
        instruction=question,
        attributes=GSM8KTask(question=question).model_dump() | {"task_type": kind},
    )
    grading = Grading(attributes=GSM8KGold(answer=final, solution=solution).model_dump())
    return TaskItem(task=task, grading=grading, task_type=kind)
