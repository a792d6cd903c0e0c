"""MATH-500 items: raw item (``{question, answer}``, the answer a worked solution with the final
result in ``\\boxed{}``) → task + grading payload. Items have no id: it is derived from the
question text (:func:`skillopt.envs._qa.raw.content_id`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from skillopt.envs._qa.raw import content_id, text_field
from skillopt.envs._qa.text import last_boxed
from skillopt.envs.base import TaskItem
from skillopt.envs.math500.spec import Math500Options
from skillopt.types import Grading, Task

__all__ = ["CATEGORIES", "Math500Gold", "Math500Task", "category", "item_from_raw"]

#: Per-category breakdown by the kind of gold answer (the shared copy has no subject/level).
CATEGORIES = (
    "integer",
    "fraction_or_decimal",
    "radical_or_constant",
    "expression",
    "tuple_interval_set",
    "text",
)


class Math500Task(BaseModel):
    """``task.attributes`` of a MATH-500 rollout (what the agent sees)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    question: str = Field(min_length=1, max_length=20_000)


class Math500Gold(BaseModel):
    """``grading.attributes`` (trusted side only): the boxed gold answer and the solution."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    answer: str = Field(min_length=1, max_length=2_000)
    solution: str = Field(default="", max_length=50_000)
    verify_timeout_s: float = Field(default=10.0, gt=0, le=120)


def category(answer: str) -> str:
    """The breakdown category of a gold answer (see :data:`CATEGORIES`)."""
    a = answer.replace(" ", "").replace("\\!", "").replace("$", "")
    if re.fullmatch(r"-?\d+", a.replace(",", "") if re.fullmatch(r"-?\d{1,3}(,\d{3})+", a) else a):
        return "integer"
    if re.fullmatch(r"-?(\d+\.\d*|\.\d+|\\[dt]?frac\{-?\d+\}\{\d+\}|\d+/\d+|\\frac\d\d)", a):
        return "fraction_or_decimal"
    if "\\text" in a or re.fullmatch(r"[A-Za-z]{2,}", a) or re.fullmatch(r"\(?[A-E]\)?", a):
        return "text"
    if a[:1] in "([{" or a.startswith("\\{") or a.startswith("\\left") or "," in a or "\\cup" in a:
        return "tuple_interval_set"
    if re.search(
        r"[a-zA-Z](?<!\\frac)(?<!\\sqrt)", re.sub(r"\\(?:frac|dfrac|sqrt|pi|circ|cdot|left|right)", "", a)
    ):
        return "expression"
    return "radical_or_constant"


def item_from_raw(
    raw: Mapping[str, Any], *, options: Math500Options, position: int = 0, source: str = ""
) -> TaskItem:
    """The task item of one raw MATH-500 item.

    Raises:
        ValueError: a field is missing, or the solution has no ``\\boxed{}`` answer.
    """
    question = text_field(raw, "question" if "question" in raw else "problem")
    solution = text_field(raw, "answer" if "answer" in raw else "solution")
    gold = last_boxed(solution)
    if not gold:
        raise ValueError("the solution (field 'answer') has no \\boxed{...} final answer")
    kind = category(gold)
    item_id = text_field(raw, "unique_id", required=False) or content_id("math500", question)
    task = Task(
        id=item_id,
        instruction=question,
        attributes=Math500Task(question=question).model_dump() | {"task_type": kind},
    )
    grading = Grading(
        attributes=Math500Gold(
            answer=gold, solution=solution, verify_timeout_s=options.verify_timeout_s
        ).model_dump()
    )
    return TaskItem(task=task, grading=grading, task_type=kind)
