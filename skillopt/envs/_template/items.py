"""The env's one function from a raw item (exactly as in the data files) to a task item, and
the payload models the service checks requests against."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from skillopt.envs._qa.raw import text_field
from skillopt.envs._template.spec import TemplateOptions
from skillopt.envs.base import TaskItem
from skillopt.types import Grading, Task

__all__ = ["CATEGORIES", "TemplateGold", "TemplateTask", "item_from_raw"]

CATEGORIES = ("short", "long")


class TemplateTask(BaseModel):
    """``task.attributes``: what the agent sees."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    question: str = Field(min_length=1, max_length=20_000)


class TemplateGold(BaseModel):
    """``grading.attributes``: gold, trusted side only."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    answer: str = Field(min_length=1)


def item_from_raw(
    raw: Mapping[str, Any], *, options: TemplateOptions, position: int = 0, source: str = ""
) -> TaskItem:
    """The task item of one raw item.

    Raises:
        ValueError: a field is missing or malformed (the message names it).
    """
    question = text_field(raw, "question")
    if len(question) > options.max_question_chars:
        raise ValueError(f"field 'question' is longer than {options.max_question_chars} characters")
    kind = CATEGORIES[0] if len(question) < 80 else CATEGORIES[1]
    task = Task(
        id=text_field(raw, "id"),
        instruction=question,
        attributes=TemplateTask(question=question).model_dump() | {"task_type": kind},
    )
    grading = Grading(attributes=TemplateGold(answer=text_field(raw, "answer")).model_dump())
    return TaskItem(task=task, grading=grading, task_type=kind)
