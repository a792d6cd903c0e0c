"""LiveMathematicianBench items: raw item → task + grading payload, with choice shuffling.

Raw item: ``{id, question, choices: [{label, text}], correct_choice: {label, text},
theorem_type: [..], theorem, sketch, paper_link, month, no}``.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from skillopt.envs._qa.raw import text_field
from skillopt.envs.base import TaskItem
from skillopt.envs.livemathematicianbench.spec import LiveMathOptions
from skillopt.types import Grading, Task

__all__ = ["Choice", "LiveMathGold", "LiveMathTask", "category", "item_from_raw", "shuffled"]

LABELS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


class Choice(BaseModel):
    """One option as the agent sees it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    label: str = Field(min_length=1, max_length=4)
    text: str = Field(max_length=50_000)


class LiveMathTask(BaseModel):
    """``task.attributes`` of a LiveMathematicianBench rollout (what the agent sees)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    question: str = Field(min_length=1, max_length=100_000)
    choices: list[Choice] = Field(min_length=2, max_length=26)
    theorem: str = Field(default="", max_length=200_000)
    sketch: str = Field(default="", max_length=200_000)


class LiveMathGold(BaseModel):
    """``grading.attributes`` (trusted side only): the correct label in the order shown."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    label: str = Field(min_length=1, max_length=4)
    text: str = ""


def category(raw: Mapping[str, Any]) -> str:
    """The breakdown category: the item's first ``theorem_type`` (``unknown`` when none)."""
    types = raw.get("theorem_type")
    if isinstance(types, str):
        types = [types]
    first = types[0] if isinstance(types, list) and types and isinstance(types[0], str) else ""
    return first.strip() or "unknown"


def shuffled(choices: list[dict[str, str]], item_id: str, seed: int) -> list[dict[str, str]]:
    """``choices`` in a seeded order (``sha256("<seed>:<id>")``), relabelled A, B, C..."""
    order = list(choices)
    random.Random(int(hashlib.sha256(f"{seed}:{item_id}".encode()).hexdigest(), 16)).shuffle(order)
    return [{"label": LABELS[i], "text": c["text"], "original": c["label"]} for i, c in enumerate(order)]


def _choices(raw: Mapping[str, Any]) -> list[dict[str, str]]:
    value = raw.get("choices")
    if not isinstance(value, list) or len(value) < 2:
        raise ValueError(
            f"field 'choices' must be a list of at least two {{label, text}} objects, got {value!r:.80}"
        )
    out = []
    for i, c in enumerate(value):
        if not isinstance(c, dict):
            raise ValueError(f"field 'choices'[{i}] must be an object with label and text")
        out.append({"label": text_field(c, "label"), "text": text_field(c, "text", required=False)})
    return out


def item_from_raw(
    raw: Mapping[str, Any], *, options: LiveMathOptions, position: int = 0, source: str = ""
) -> TaskItem:
    """The task item of one raw item; choices shuffled when ``options.shuffle_choices``.

    Raises:
        ValueError: a field is missing or malformed, or ``correct_choice`` matches no choice.
    """
    item_id = text_field(raw, "id")
    choices = _choices(raw)
    correct = raw.get("correct_choice")
    if not isinstance(correct, dict):
        raise ValueError("field 'correct_choice' must be an object {label, text}")
    shown = (
        shuffled(choices, item_id, options.shuffle_seed)
        if options.shuffle_choices
        else [{**c, "original": c["label"]} for c in choices]
    )
    want_label = str(correct.get("label", ""))
    want_text = str(correct.get("text", ""))
    hit = next((c for c in shown if c["original"] == want_label), None) or next(
        (c for c in shown if want_text and c["text"] == want_text), None
    )
    if hit is None:
        raise ValueError(f"field 'correct_choice' ({want_label!r}) matches none of the choices")
    payload = LiveMathTask(
        question=text_field(raw, "question"),
        choices=[Choice(label=c["label"], text=c["text"]) for c in shown],
        theorem=text_field(raw, "theorem", required=False) if options.use_theorem else "",
        sketch=text_field(raw, "sketch", required=False) if options.use_sketch else "",
    )
    kind = category(raw)
    task = Task(
        id=item_id, instruction=payload.question, attributes=payload.model_dump() | {"task_type": kind}
    )
    grading = Grading(attributes=LiveMathGold(label=hit["label"], text=hit["text"]).model_dump())
    return TaskItem(task=task, grading=grading, task_type=kind)
