"""SearchQA items: the one function from a raw item (as in the data files) to a task item, and
the payload models the service checks requests against.

Raw item (MRQA format): ``{id, question, context, answers}``; ``context`` holds
``[DOC] [TLE] title [PAR] snippet`` documents, ``answers`` the accepted answer strings.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from skillopt.envs._qa.raw import text_field, text_list
from skillopt.envs._qa.text import normalize_answer
from skillopt.envs.base import TaskItem
from skillopt.envs.searchqa.spec import SearchQAOptions
from skillopt.types import Grading, Task

__all__ = ["CATEGORIES", "SearchQAGold", "SearchQATask", "category", "item_from_raw", "truncate_context"]

#: Per-category breakdown: the length of the (first) gold answer in words.
CATEGORIES = ("answer_1_word", "answer_2_words", "answer_3plus_words")
_TRUNCATED = "...[truncated]"
_DOC = "[DOC]"


class SearchQATask(BaseModel):
    """``task.attributes`` of a SearchQA rollout (what the agent sees)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    question: str = Field(min_length=1, max_length=20_000)
    context: str = Field(default="", max_length=4_000_000)
    context_chars: int = Field(default=6000, ge=0, le=1_000_000)


class SearchQAGold(BaseModel):
    """``grading.attributes`` of a SearchQA rollout (trusted side only)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    answers: list[str] = Field(min_length=1)


def category(answers: list[str]) -> str:
    """The breakdown category of an item from its first gold answer."""
    words = len(normalize_answer(answers[0]).split()) if answers else 0
    return CATEGORIES[min(max(words, 1), 3) - 1]


def truncate_context(context: str, budget: int) -> str:
    """``context`` cut to ``budget`` characters at ``[DOC]`` boundaries (reference §5.1).

    Whole documents are kept while they fit; when even the first one does not, it is cut hard
    and marked ``...[truncated]``. ``budget`` 0 keeps everything.
    """
    if budget <= 0 or len(context) <= budget:
        return context
    starts = [m.start() for m in re.finditer(re.escape(_DOC), context)]
    if not starts or starts[0] != 0:
        starts = [0, *starts]
    bounds = [*starts, len(context)]
    kept = ""
    for begin, end in itertools.pairwise(bounds):
        piece = context[begin:end]
        if len(kept) + len(piece.rstrip()) > budget:
            break
        kept += piece
    if not kept.strip():
        return context[:budget].rstrip() + _TRUNCATED
    return kept.rstrip()


def item_from_raw(
    raw: Mapping[str, Any], *, options: SearchQAOptions, position: int = 0, source: str = ""
) -> TaskItem:
    """The task item of one raw SearchQA item.

    Raises:
        ValueError: a field is missing or malformed (the message names it).
    """
    answers = text_list(raw, "answers")
    task = Task(
        id=text_field(raw, "id"),
        instruction=text_field(raw, "question"),
        attributes=SearchQATask(
            question=text_field(raw, "question"),
            context=text_field(raw, "context", required=False),
            context_chars=options.context_chars,
        ).model_dump()
        | {"task_type": category(answers)},
    )
    grading = Grading(attributes=SearchQAGold(answers=answers).model_dump())
    return TaskItem(task=task, grading=grading, task_type=category(answers))
