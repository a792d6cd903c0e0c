"""Skill-aware reflection, the reflection side (reference §7.7; off by default).

With skill-aware reflection on, the failure analyst classifies each failure pattern as a
**SKILL_DEFECT** (the skill is wrong, missing or under-specified → a normal body edit) or an
**EXECUTION_LAPSE** (a correct rule exists and was not followed → a one-line reminder in the
top-level ``appendix_notes``, no body edit). The prompt sections live in
``skillopt/prompts/skill_aware_failure.md`` / ``skill_aware_success.md`` and are added by
:func:`skillopt.reflection.prompts.analyst_system_prompt`; with the feature off the prompts are
byte-identical to the baseline.

Here: tolerant note parsing (:func:`parse_notes`) and the consolidation call
(:func:`consolidate_appendix`). Writing notes into the skill's appendix block is the
trainer's job (:func:`skillopt.skill.document.merge_appendix_notes`), after the gate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from skillopt.errors import ModelError
from skillopt.jsonx import extract_json_object, extraction_error
from skillopt.models.roles import RoleModel
from skillopt.reflection.prompts import load_prompt
from skillopt.skill import dedup_notes

__all__ = ["ConsolidationResult", "consolidate_appendix", "parse_notes"]

log = structlog.get_logger("skillopt.reflection")

_MAX_NOTE_CHARS = 500
_MAX_NOTES = 50


def _note_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        for key in ("note", "content", "text"):
            if isinstance(value.get(key), str):
                return value[key]
    return ""


def parse_notes(value: Any) -> tuple[str, ...]:
    """Appendix notes from an analyst answer, read tolerantly.

    Accepts a list of strings, a single string (one note, or one per line), and dicts with a
    ``note`` / ``content`` / ``text`` string; anything else is ignored. Notes are normalised
    (bullets, markers and line breaks removed), deduplicated in order, each cut to 500
    characters, and at most 50 are kept per answer.

    Args:
        value: The ``appendix_notes`` value of a parsed answer (any JSON value).

    Returns:
        The notes, possibly empty.
    """
    if isinstance(value, str):
        raw = [line for line in value.splitlines() if line.strip()]
    elif isinstance(value, Mapping):
        raw = [_note_text(value)]
    elif isinstance(value, list | tuple):
        raw = [_note_text(v) for v in value[: _MAX_NOTES * 4]]
    else:
        raw = []
    notes = dedup_notes(n[: _MAX_NOTE_CHARS * 2] for n in raw if n.strip())
    return tuple(n[:_MAX_NOTE_CHARS] for n in notes[:_MAX_NOTES])


@dataclass(frozen=True, kw_only=True, slots=True)
class ConsolidationResult:
    """Outcome of :func:`consolidate_appendix`.

    Attributes:
        notes: The notes to keep (the input unchanged unless ``consolidated``).
        consolidated: Whether the optimizer's compacted list was accepted.
        called: Whether a model call was made.
        reason: Why the input was kept (empty when consolidated or below threshold).
    """

    notes: tuple[str, ...]
    consolidated: bool = False
    called: bool = False
    reason: str = ""


def consolidate_appendix(
    notes: Sequence[str],
    *,
    model: RoleModel,
    threshold: int,
    max_output_tokens: int = 4096,
) -> ConsolidationResult:
    """Compact the appendix notes with one optimizer call when there are more than ``threshold``.

    The answer (``{"reasoning", "notes": [...]}``) is accepted only if it is non-empty and not
    longer than the input (neither more notes nor more characters in total); otherwise, and on any model or parse failure, the notes are
    kept as they were.

    Args:
        notes: The current appendix notes, in order.
        model: The optimizer.
        threshold: Consolidate only when ``len(notes) > threshold``; ``<= 0`` disables.
        max_output_tokens: Completion budget of the call.

    Returns:
        The notes to keep, and what happened.
    """
    current = tuple(dedup_notes(notes))
    if threshold <= 0 or len(current) <= threshold:
        return ConsolidationResult(notes=current)
    listing = "\n".join(f"{i}. {n}" for i, n in enumerate(current, 1))
    user = f"## Execution Notes ({len(current)} total, consolidate to at most {threshold})\n{listing}\n"
    try:
        text = model.ask(
            load_prompt("appendix_consolidate"),
            user,
            stage="appendix_consolidate",
            max_output_tokens=max_output_tokens,
        )
    except ModelError as exc:
        log.warning("appendix.consolidate_failed", reason="model_error", error_type=type(exc).__name__)
        return ConsolidationResult(notes=current, called=True, reason="model_error")
    obj = extract_json_object(text)
    if obj is None:
        log.warning("appendix.consolidate_failed", reason="unparsable", detail=extraction_error(text))
        return ConsolidationResult(notes=current, called=True, reason="unparsable")
    new = parse_notes(obj.get("notes"))
    if not new:
        return ConsolidationResult(notes=current, called=True, reason="empty")
    if len(new) > len(current) or sum(map(len, new)) > sum(map(len, current)):
        return ConsolidationResult(notes=current, called=True, reason="longer")
    return ConsolidationResult(notes=new, consolidated=True, called=True)
