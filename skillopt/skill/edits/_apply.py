"""Applying edits to the text of one file, with a report on each edit.

:func:`apply_edits` applies the edits in order to the evolving text (finding targets and
making changes with :mod:`skillopt.skill.edits._text`), rolls back any edit that touched a
protected region, and returns the new text with one :class:`EditReport` per edit and their
counts (:class:`ApplySummary`). The reasons for each status are in :mod:`skillopt.skill.edits`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from skillopt.skill.document import protected_spans, remove_protected_markers
from skillopt.skill.edits._model import DEFAULT_FILE, TEXT_OPS, Edit
from skillopt.skill.edits._text import (
    Located,
    MatchKind,
    Span,
    append_to_body,
    insert_after_line,
    locate,
    remove_span,
    replace_span,
)

__all__ = ["ApplyResult", "ApplySummary", "EditReport", "apply_edits"]

_PREVIEW = 200

# Statuses whose edit named a target that matched nowhere (counted as ``unmatched``).
_NOT_FOUND = frozenset(
    {
        "skipped_replace_target_not_found",
        "skipped_delete_target_not_found",
        "applied_insert_after_fallback_before_protected_region",
        "applied_insert_after_fallback_append",
    }
)


@dataclass(frozen=True, slots=True)
class EditReport:
    """What happened to one edit.

    Attributes:
        index: 1-based position of the edit in the applied sequence (as the reference's
            ``edit_apply_report.json``).
        op: The edit's op.
        target: First 200 characters of the target.
        content_preview: First 200 characters of the cleaned content.
        status: One of the §6.7 statuses, ``skipped_empty_content``, or ``error``.
        matched: ``"exact"``/``"whitespace"`` when a target was located, else ``None``.
        error: ``"Type: message"`` when ``status == "error"``.
        content: the whole cleaned content, and ``full_target`` the whole target (the
            previews are the reference's fields; the WebUI shows these).
        file: The package file the edit named.
    """

    index: int
    op: str
    target: str
    content_preview: str
    status: str
    matched: MatchKind | None = None
    error: str = ""
    content: str = ""
    full_target: str = ""
    file: str = DEFAULT_FILE

    @classmethod
    def of(
        cls,
        index: int,
        op: str,
        target: str,
        content: str,
        status: str,
        *,
        matched: MatchKind | None = None,
        error: str = "",
        file: str = DEFAULT_FILE,
    ) -> EditReport:
        """The report of the edit with the whole ``target`` and cleaned ``content``: the
        previews (the reference's fields) are their first 200 characters."""
        return cls(
            index, op, target[:_PREVIEW], content[:_PREVIEW], status, matched, error,
            content=content, full_target=target, file=file,
        )  # fmt: skip

    @property
    def applied(self) -> bool:
        return self.status.startswith("applied_")

    @property
    def unmatched(self) -> bool:
        """The edit named a target that was found nowhere (fallbacks included)."""
        return self.status in _NOT_FOUND and bool(self.target.strip())

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "index": self.index,
            "op": self.op,
            "target": self.target,
            "content_preview": self.content_preview,
            "status": self.status,
            "matched": self.matched,
            "content": self.content,
            "full_target": self.full_target,
            "file": self.file,
        }
        if self.error:
            out["error"] = self.error
        return out


@dataclass(frozen=True, slots=True)
class ApplySummary:
    """Counts over the reports of one :func:`apply_edits` call (the step's ``edit_apply_summary``)."""

    total: int = 0
    applied: int = 0
    skipped: int = 0
    errors: int = 0
    unmatched: int = 0

    @classmethod
    def of(cls, reports: Sequence[EditReport]) -> ApplySummary:
        return cls(
            total=len(reports),
            applied=sum(r.applied for r in reports),
            skipped=sum(r.status.startswith("skipped_") for r in reports),
            errors=sum(r.status == "error" for r in reports),
            unmatched=sum(r.unmatched for r in reports),
        )

    def to_dict(self) -> dict[str, int]:
        return {
            "total": self.total,
            "applied": self.applied,
            "skipped": self.skipped,
            "errors": self.errors,
            "unmatched": self.unmatched,
        }


@dataclass(frozen=True, slots=True)
class ApplyResult:
    """Output of :func:`apply_edits`.

    Attributes:
        text: The new text (the input is never changed).
        reports: One report per edit, in order.
        summary: Counts over ``reports``.
        changed: Whether the content differs from the input (an unchanged candidate needs
            no selection evaluation).
    """

    text: str
    reports: tuple[EditReport, ...] = ()
    summary: ApplySummary = field(default_factory=ApplySummary)
    changed: bool = False


def _protected_texts(text: str, spans: Sequence[Span]) -> tuple[str, ...]:
    return tuple(text[a:b] for a, b in spans)


def _apply_one(text: str, edit: Edit, whitespace_tolerant: bool) -> tuple[str, str, MatchKind | None]:
    """Apply one edit. Returns ``(new_text, status, matched)``."""
    op = edit.op
    content = remove_protected_markers(edit.content).strip()
    target = edit.target
    spans = protected_spans(text)
    if op not in TEXT_OPS:
        return text, "skipped_unknown_op", None
    if op in ("append", "insert_after") and not content:
        return text, "skipped_empty_content", None

    if op == "append":
        new, before = append_to_body(text, content, spans)
        return new, "applied_append_before_protected_region" if before else "applied_append", None

    located = locate(text, target, spans, whitespace_tolerant) if target.strip() else Located()
    if located.protected:
        return text, "skipped_protected_region", None

    if op == "insert_after":
        if located.span is None:
            new, before = append_to_body(text, content, spans)
            fallback = "before_protected_region" if before else "append"
            return new, f"applied_insert_after_fallback_{fallback}", None
        return insert_after_line(text, content, located.span, spans), "applied_insert_after", located.kind

    if not target.strip():
        return text, f"skipped_{op}_missing_target", None
    if located.span is None:
        return text, f"skipped_{op}_target_not_found", None
    if op == "replace":
        return replace_span(text, content, located.span), "applied_replace", located.kind
    return remove_span(text, located.span), "applied_delete", located.kind


def apply_edits(
    text: str,
    edits: Iterable[Edit | Mapping[str, Any]],
    *,
    whitespace_tolerant: bool = False,
) -> ApplyResult:
    """Apply edits in order to the evolving text, with one report per edit.

    Statuses (reference §6.7): ``applied_append``, ``applied_append_before_protected_region``,
    ``applied_insert_after``, ``applied_insert_after_fallback_append``,
    ``applied_insert_after_fallback_before_protected_region``, ``applied_replace``,
    ``applied_delete``, ``skipped_protected_region``, ``skipped_replace_missing_target``,
    ``skipped_replace_target_not_found``, ``skipped_delete_missing_target``,
    ``skipped_delete_target_not_found``, ``skipped_unknown_op``, plus our
    ``skipped_empty_content``; an exception while applying one edit gives ``error`` and the
    text is left as it was before that edit.

    Args:
        text: The current text of the file (never changed).
        edits: Edits or plain mappings (read with :meth:`Edit.from_dict`).
        whitespace_tolerant: When a target is not found exactly, match it ignoring
            differences in runs of whitespace (reported as ``matched="whitespace"``).

    Returns:
        The new text, the reports and their summary.

    Usage::

        result = apply_edits(text, patch.edits)
        step_record["edit_apply_summary"] = result.summary.to_dict()
    """
    original = text
    reports: list[EditReport] = []
    for index, raw in enumerate(edits, 1):
        op, target, content, file = "", "", "", DEFAULT_FILE
        try:
            edit = raw if isinstance(raw, Edit) else Edit.from_dict(raw)
            op, target, file = str(edit.op), str(edit.target), edit.file
            content = remove_protected_markers(str(edit.content)).strip()
            before = _protected_texts(text, protected_spans(text))
            new, status, matched = _apply_one(text, edit, whitespace_tolerant)
            # Belt and braces: no op may alter a protected region (e.g. a delete that joins
            # two halves into a new marker). Roll back rather than trust the arithmetic.
            if new != text and _protected_texts(new, protected_spans(new)) != before:
                new, status, matched = text, "skipped_protected_region", None
            text = new
            report = EditReport.of(index, op, target, content, status, matched=matched, file=file)
        except Exception as exc:  # one bad edit must not sink the patch (§6.7)
            error = f"{type(exc).__name__}: {exc}"
            report = EditReport.of(index, op, target, content, "error", error=error, file=file)
        reports.append(report)
    return ApplyResult(
        text=text,
        reports=tuple(reports),
        summary=ApplySummary.of(reports),
        changed=text != original,
    )
