"""HotpotQA items: raw item (``{_id, question, answer, type, level, supporting_facts,
context: [[title, [sentence, ...]], ...]}``) → task + grading payload."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from skillopt.envs._qa.raw import text_field
from skillopt.envs.base import TaskItem
from skillopt.envs.hotpotqa.spec import HotpotQAOptions
from skillopt.types import Grading, Task

__all__ = ["CATEGORIES", "HotpotQAGold", "HotpotQATask", "Paragraph", "item_from_raw"]

#: Per-category breakdown: the question type.
CATEGORIES = ("bridge", "comparison")


class Paragraph(BaseModel):
    """One context paragraph as the agent sees it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    title: str = Field(max_length=1_000)
    sentences: list[str] = Field(max_length=1_000)


class HotpotQATask(BaseModel):
    """``task.attributes`` of a HotpotQA rollout (what the agent sees)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    question: str = Field(min_length=1, max_length=20_000)
    paragraphs: list[Paragraph] = Field(max_length=100)
    context_chars: int = Field(default=0, ge=0, le=1_000_000)


class HotpotQAGold(BaseModel):
    """``grading.attributes`` (trusted side only): the answer and the supporting titles."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    answer: str = Field(min_length=1, max_length=2_000)
    supporting_titles: list[str] = Field(default_factory=list)


def _paragraphs(raw: Mapping[str, Any]) -> list[Paragraph]:
    value = raw.get("context")
    if not isinstance(value, list):
        raise ValueError("field 'context' must be a list of [title, [sentences]] pairs")
    out = []
    for i, pair in enumerate(value):
        if not (isinstance(pair, list | tuple) and len(pair) == 2 and isinstance(pair[1], list)):
            raise ValueError(f"field 'context'[{i}] must be a [title, [sentences]] pair")
        out.append(Paragraph(title=str(pair[0]), sentences=[str(s) for s in pair[1]]))
    return out


def item_from_raw(
    raw: Mapping[str, Any], *, options: HotpotQAOptions, position: int = 0, source: str = ""
) -> TaskItem:
    """The task item of one raw HotpotQA item.

    Raises:
        ValueError: a field is missing or malformed (the message names it).
    """
    kind = text_field(raw, "type", required=False) or "bridge"
    facts = raw.get("supporting_facts") or []
    titles = sorted({str(f[0]) for f in facts if isinstance(f, list | tuple) and f})
    payload = HotpotQATask(
        question=text_field(raw, "question"), paragraphs=_paragraphs(raw), context_chars=options.context_chars
    )
    task = Task(
        id=text_field(raw, "_id" if "_id" in raw else "id"),
        instruction=payload.question,
        attributes=payload.model_dump() | {"task_type": kind},
    )
    grading = Grading(
        attributes=HotpotQAGold(answer=text_field(raw, "answer"), supporting_titles=titles).model_dump()
    )
    return TaskItem(task=task, grading=grading, task_type=kind)
