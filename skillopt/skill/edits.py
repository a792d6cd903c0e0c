"""Edit operations on the text of a skill file: the model, payload parsing and application.

An edit is one of four ops (reference §6.4): ``append`` (content at the end of the body),
``insert_after`` (content on a new line after the line holding ``target``), ``replace`` (first
occurrence of ``target`` becomes ``content``) and ``delete`` (first occurrence removed).
:func:`apply_edits` applies them in order to the evolving text and reports one status per edit
with the reference's status strings (§6.7), so run directories stay comparable.

Deliberate differences from the reference, each for a reason given where it is implemented:

* a target is matched at its first occurrence *outside* protected regions (the reference
  refuses the edit when the first occurrence overall is protected);
* ``append`` ignores any ``target`` (the reference skips an append whose stray target points
  into a protected region);
* ``append`` (and the ``insert_after`` fallback) goes before the protected regions that *end*
  the text, not before the earliest marker: identical for the usual layout, but a block at
  the top of a hand-edited skill no longer pulls appended text above the body;
* ``append``/``insert_after`` with empty content are skipped (``skipped_empty_content``): they
  would change only whitespace, i.e. the skill hash, and cost a selection evaluation;
* ``insert_after`` inserts exactly one new line (no blank line) and handles targets that end
  with a newline; ``replace`` keeps the whitespace framing the target; ``delete`` of a whole
  line also removes its line break;
* optional whitespace-tolerant matching (off by default) for paraphrase-free but re-wrapped
  targets (§14 item 8);
* after every edit the protected regions are verified byte-for-byte; an edit that changed
  them anyway is rolled back.

Usage::

    result = apply_edits("# Skill\\n- a\\n", [Edit("insert_after", "- b", "- a")])
    assert result.text == "# Skill\\n- a\\n- b\\n"
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from skillopt.errors import SkillParseError
from skillopt.skill.document import protected_spans, remove_protected_markers

__all__ = [
    "DEFAULT_FILE",
    "EDIT_OPS",
    "TEXT_OPS",
    "ApplyResult",
    "ApplySummary",
    "Edit",
    "EditReport",
    "ParsedEdits",
    "Patch",
    "RejectedEdit",
    "apply_edits",
    "edits_from_payload",
    "normalize_file",
]

#: Ops on the text of one file (SKILL.md unless the edit names another).
TEXT_OPS: tuple[str, ...] = ("append", "insert_after", "replace", "delete")
#: Every op: the text ops, plus creating and deleting a package file
#: (:func:`skillopt.skill.package_edits.apply_package_edits`).
EDIT_OPS: tuple[str, ...] = (*TEXT_OPS, "create_file", "delete_file")
#: The file an edit without a ``file`` changes.
DEFAULT_FILE = "SKILL.md"
_PREVIEW = 200

MatchKind = Literal["exact", "whitespace"]
Span = tuple[int, int]

# Statuses whose edit named a target that matched nowhere (counted as ``unmatched``).
_NOT_FOUND = frozenset(
    {
        "skipped_replace_target_not_found",
        "skipped_delete_target_not_found",
        "applied_insert_after_fallback_before_protected_region",
        "applied_insert_after_fallback_append",
    }
)


# ── the edit model ────────────────────────────────────────────────────────────────────────


def _as_int(value: Any, default: int, minimum: int) -> int:
    """Lenient int: bools and junk give ``default``; numbers and numeric strings are floored."""
    if isinstance(value, bool) or value is None:
        return default
    try:
        number = int(float(value)) if isinstance(value, str) else int(value)
    except (TypeError, ValueError, OverflowError):
        return default
    return max(minimum, number)


def _as_str(value: Any) -> str:
    return "" if value is None else str(value)


@dataclass(frozen=True, slots=True)
class Edit:
    """One edit of a skill document.

    Attributes:
        op: ``append`` | ``insert_after`` | ``replace`` | ``delete`` (stored lower-case, stripped;
            other values are kept and reported as ``skipped_unknown_op`` when applied).
        content: Markdown to add, or the replacement text.
        target: Existing text the op anchors on (unused by ``append``).
        support_count: How many trajectories support the edit (stamped by reflection/merge).
        source_type: ``failure`` or ``success`` analyst.
        merge_level: Level of the hierarchical merge that produced the edit (0 = analyst).
        update_origin: Free-form provenance (e.g. ``step_0003``).
        update_target: Free-form provenance of what the edit was meant to change.
        file: The package file the edit changes (``SKILL.md``; ``references/…``,
            ``scripts/…``, ``assets/…``); ``create_file`` writes ``content`` as a new file,
            ``delete_file`` removes one.
    """

    op: str
    content: str = ""
    target: str = ""
    support_count: int = 1
    source_type: str = "failure"
    merge_level: int = 0
    update_origin: str = ""
    update_target: str = ""
    file: str = DEFAULT_FILE

    def __post_init__(self) -> None:
        if isinstance(self.op, str):
            object.__setattr__(self, "op", self.op.strip().lower())
        object.__setattr__(self, "file", normalize_file(self.file))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Edit:
        """Build an edit from a plain mapping, tolerating missing and extra keys.

        Missing strings become ``""``, bad counts fall back to their defaults, ``op`` is
        lower-cased. Validation beyond that is :func:`edits_from_payload`'s job.

        Args:
            data: A mapping such as one item of an analyst's ``edits`` list.

        Returns:
            The edit.

        Raises:
            SkillParseError: ``data`` is not a mapping.
        """
        if not isinstance(data, Mapping):
            raise SkillParseError(f"an edit must be a JSON object, got {type(data).__name__}")
        source = _as_str(data.get("source_type")).strip().lower() or "failure"
        return cls(
            op=_as_str(data.get("op")),
            content=_as_str(data.get("content")),
            target=_as_str(data.get("target")),
            support_count=_as_int(data.get("support_count"), 1, 0),
            source_type=source,
            merge_level=_as_int(data.get("merge_level"), 0, 0),
            update_origin=_as_str(data.get("update_origin")),
            update_target=_as_str(data.get("update_target")),
            file=_as_str(data.get("file") or data.get("path")),
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form; empty ``target`` and provenance strings are omitted."""
        out: dict[str, Any] = {"op": self.op, "content": self.content}
        if self.file != DEFAULT_FILE:
            out["file"] = self.file
        if self.target:
            out["target"] = self.target
        out["support_count"] = self.support_count
        out["source_type"] = self.source_type
        out["merge_level"] = self.merge_level
        if self.update_origin:
            out["update_origin"] = self.update_origin
        if self.update_target:
            out["update_target"] = self.update_target
        return out


@dataclass(frozen=True, slots=True)
class Patch:
    """A set of edits with the optimizer's reasoning (merge / select output, update input).

    Attributes:
        edits: The edits, in application order.
        reasoning: Why these edits.
        ranking_details: What the select stage recorded, if it ran.
    """

    edits: tuple[Edit, ...] = ()
    reasoning: str = ""
    ranking_details: Mapping[str, Any] | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Patch:
        """Build a patch from ``{"reasoning", "edits", "ranking_details"?}``.

        Malformed edit items are dropped (use :func:`edits_from_payload` to see why).

        Args:
            data: The patch mapping.

        Returns:
            The patch.

        Raises:
            SkillParseError: ``data`` is not a mapping or ``edits`` is not a list.
        """
        if not isinstance(data, Mapping):
            raise SkillParseError(f"a patch must be a JSON object, got {type(data).__name__}")
        parsed = edits_from_payload({"edits": data.get("edits") or []})
        details = data.get("ranking_details")
        return cls(
            edits=parsed.edits,
            reasoning=_as_str(data.get("reasoning")),
            ranking_details=dict(details) if isinstance(details, Mapping) else None,
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form; ``ranking_details`` only when set."""
        out: dict[str, Any] = {"reasoning": self.reasoning, "edits": [e.to_dict() for e in self.edits]}
        if self.ranking_details is not None:
            out["ranking_details"] = dict(self.ranking_details)
        return out


@dataclass(frozen=True, slots=True)
class RejectedEdit:
    """A payload item :func:`edits_from_payload` skipped, and why."""

    index: int
    reason: str


@dataclass(frozen=True, slots=True)
class ParsedEdits:
    """Result of :func:`edits_from_payload`: the usable edits and the skipped items."""

    edits: tuple[Edit, ...] = ()
    rejected: tuple[RejectedEdit, ...] = ()


def normalize_file(value: Any) -> str:
    """The package path an edit names: ``SKILL.md`` when it names none; a leading ``./`` or
    ``/skill/`` (where the package is mounted) is dropped. The path's rules are checked
    when the edit is applied."""
    path = "" if value is None else str(value).strip()
    for prefix in ("/skill/", "./"):
        if path.startswith(prefix):
            path = path[len(prefix) :]
    return path or DEFAULT_FILE


def _item_problem(item: Any) -> str | None:
    """Why a payload item cannot be an edit, or ``None`` when it can."""
    if not isinstance(item, Mapping):
        return f"not an object ({type(item).__name__})"
    op = item.get("op")
    if not isinstance(op, str) or not op.strip():
        return "missing op"
    op = op.strip().lower()
    if op not in EDIT_OPS:
        return f"unknown op {op!r} (expected one of {', '.join(EDIT_OPS)})"
    for key in ("content", "target", "file"):
        value = item.get(key)
        if value is not None and not isinstance(value, str):
            return f"{key} is not a string ({type(value).__name__})"
    if op in ("create_file", "delete_file"):
        if normalize_file(item.get("file") or item.get("path")) == DEFAULT_FILE:
            return f"{op} needs a file other than SKILL.md"
        return None
    content = remove_protected_markers(item.get("content") or "").strip()
    target = item.get("target") or ""
    if op in ("replace", "delete") and not target.strip():
        return f"{op} without a target"
    if op in ("append", "insert_after") and not content:
        return f"{op} without content"
    return None


def edits_from_payload(obj: Any) -> ParsedEdits:
    """Read edits from parsed model output, skipping malformed items with a reason.

    Accepted shapes: a list of edit objects, ``{"edits": [...]}``, or an analyst answer
    ``{"patch": {"edits": [...]}}``. An item is skipped when it is not an object, has no or an
    unknown ``op``, a non-string ``content``/``target``, is a ``replace``/``delete`` without a
    target, or an ``append``/``insert_after`` without content.

    Args:
        obj: The decoded JSON value.

    Returns:
        The edits in payload order and the rejected items (0-based payload index + reason).

    Raises:
        SkillParseError: ``obj`` has none of the accepted shapes.
    """
    items: Any = obj
    if isinstance(obj, Mapping):
        patch = obj.get("patch")
        holder = patch if isinstance(patch, Mapping) and "edits" not in obj else obj
        if "edits" not in holder:
            raise SkillParseError("edit payload has no 'edits' key")
        items = holder["edits"]
    if not isinstance(items, list | tuple):
        raise SkillParseError(f"edit payload must be a list of edits, got {type(items).__name__}")
    edits: list[Edit] = []
    rejected: list[RejectedEdit] = []
    for index, item in enumerate(items):
        problem = _item_problem(item)
        if problem is None:
            edits.append(Edit.from_dict(item))
        else:
            rejected.append(RejectedEdit(index=index, reason=problem))
    return ParsedEdits(edits=tuple(edits), rejected=tuple(rejected))


# ── reports ───────────────────────────────────────────────────────────────────────────────


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


# ── matching ──────────────────────────────────────────────────────────────────────────────


def _segments(length: int, spans: Sequence[Span]) -> list[Span]:
    """The complement of ``spans`` in ``[0, length)``: where edits may match."""
    out: list[Span] = []
    pos = 0
    for a, b in spans:
        if a > pos:
            out.append((pos, a))
        pos = max(pos, b)
    if pos < length:
        out.append((pos, length))
    return out


_NONSPACE_RE = re.compile(r"\S+")


def _find_whitespace_tolerant(text: str, target: str, lo: int, hi: int) -> Span | None:
    """First match of ``target`` in ``text[lo:hi]`` ignoring differences in whitespace runs.

    Both sides are reduced to their non-space tokens joined by single spaces, searched with
    ``str.find`` and mapped back to exact spans of ``text``. This is linear in the segment;
    the obvious regex (tokens joined by ``\\s+``) backtracks to O(n·m) on repetitive text.
    """
    tokens = target.split()
    if not tokens:
        return None
    needle = " ".join(tokens)
    starts_norm: list[int] = []  # normalised start of each token
    starts_orig: list[int] = []  # original start of each token
    parts: list[str] = []
    pos = 0
    for m in _NONSPACE_RE.finditer(text, lo, hi):
        starts_norm.append(pos)
        starts_orig.append(m.start())
        parts.append(m.group(0))
        pos += len(m.group(0)) + 1
    found = " ".join(parts).find(needle)
    if found == -1:
        return None
    last = found + len(needle) - 1  # normalised index of the match's last character (non-space)
    i = bisect.bisect_right(starts_norm, found) - 1
    j = bisect.bisect_right(starts_norm, last) - 1
    return starts_orig[i] + (found - starts_norm[i]), starts_orig[j] + (last - starts_norm[j]) + 1


@dataclass(frozen=True, slots=True)
class _Located:
    span: Span | None = None
    kind: MatchKind | None = None
    protected: bool = False  # found, but only where edits may not go


def _locate(text: str, target: str, spans: Sequence[Span], whitespace_tolerant: bool) -> _Located:
    """First occurrence of ``target`` outside protected regions, exact first.

    We search the unprotected segments only, so an occurrence inside (or straddling) a
    protected block never shadows a later editable one. The reference refuses the edit
    whenever the *first* occurrence is protected, which loses valid edits of text that the
    slow update happened to quote.
    """
    segments = _segments(len(text), spans)
    for lo, hi in segments:
        at = text.find(target, lo, hi)
        if at != -1:
            return _Located(span=(at, at + len(target)), kind="exact")
    if whitespace_tolerant:
        for lo, hi in segments:
            found = _find_whitespace_tolerant(text, target, lo, hi)
            if found is not None:
                return _Located(span=found, kind="whitespace")
    anywhere = target in text or (
        whitespace_tolerant and _find_whitespace_tolerant(text, target, 0, len(text)) is not None
    )
    return _Located(protected=anywhere)


# ── text operations ───────────────────────────────────────────────────────────────────────


def _append(text: str, content: str, spans: Sequence[Span]) -> tuple[str, bool]:
    """Append at the end of the body, i.e. before the protected regions that end the text.

    With the usual layout (body, then the slow-update and appendix blocks) this is the
    reference's "before the earliest protected marker, blank lines around". We anchor on the
    trailing run of protected regions instead of the earliest marker so that a block sitting
    at the top or in the middle of a hand-edited skill does not pull appended text away from
    the end of the body.

    Returns:
        The new text and whether it went before a protected region.
    """
    tail = len(text)
    for a, b in reversed(spans):
        if text[b:tail].strip():
            break
        tail = a
    if tail < len(text) and spans:
        before = text[:tail].rstrip()
        head = f"{before}\n\n" if before else ""
        return f"{head}{content}\n\n{text[tail:]}", True
    base = text.rstrip()
    return (f"{base}\n\n{content}\n" if base else f"{content}\n"), False


def _insert_after(text: str, content: str, span: Span, spans: Sequence[Span]) -> str:
    """Insert ``content`` as new line(s) right after the line holding the end of ``span``."""
    start, end = span
    if end > start and text[end - 1] == "\n":
        at = end  # the target already ends its line; the reference would skip a whole line
    else:
        newline = text.find("\n", end)
        at = newline + 1 if newline != -1 else len(text)
    for a, b in spans:
        # The line runs on into a protected marker: insert before the region, not inside it.
        if a < at <= b:
            at = a
            break
    lead = "" if at == 0 or text[at - 1] == "\n" else "\n"
    return f"{text[:at]}{lead}{content}\n{text[at:]}"


def _remove(text: str, span: Span) -> str:
    """Remove ``span``; a removed whole line takes its line break, and blank lines collapse."""
    start, end = span
    left, right = text[:start], text[end:]
    line_start = left.rfind("\n") + 1
    line_end = right.find("\n")
    rest_of_line = right if line_end == -1 else right[:line_end]
    if not left[line_start:].strip() and not rest_of_line.strip() and not text[start:end].endswith("\n"):
        # The match was the whole line (up to indentation): drop the line, not just its text.
        left = left[:line_start]
        right = "" if line_end == -1 else right[line_end + 1 :]
    if not left:
        right = right.lstrip("\n")  # no blank lines left dangling at the top
    newlines = (len(left) - len(left.rstrip("\n"))) + (len(right) - len(right.lstrip("\n")))
    if newlines > 2:
        # Keep one blank line at the seam instead of the 2+ the removal left behind.
        left, right = left.rstrip("\n"), right.lstrip("\n")
        if left and right:
            return f"{left}\n\n{right}"
        return f"{left}\n" if left else right
    return left + right


def _replace(text: str, content: str, span: Span) -> str:
    """Replace ``span`` with ``content``, keeping the whitespace that framed the target.

    Content arrives stripped, so without this a target ending in a line break would glue the
    replacement onto the next line.
    """
    if not content:
        return _remove(text, span)
    matched = text[span[0] : span[1]]
    lead = matched[: len(matched) - len(matched.lstrip())]
    trail = matched[len(matched.rstrip()) :] if matched.strip() else ""
    return f"{text[: span[0]]}{lead}{content}{trail}{text[span[1] :]}"


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
        new, before = _append(text, content, spans)
        return new, "applied_append_before_protected_region" if before else "applied_append", None

    located = _locate(text, target, spans, whitespace_tolerant) if target.strip() else _Located()
    if located.protected:
        return text, "skipped_protected_region", None

    if op == "insert_after":
        if located.span is None:
            new, before = _append(text, content, spans)
            fallback = "before_protected_region" if before else "append"
            return new, f"applied_insert_after_fallback_{fallback}", None
        return _insert_after(text, content, located.span, spans), "applied_insert_after", located.kind

    if not target.strip():
        return text, f"skipped_{op}_missing_target", None
    if located.span is None:
        return text, f"skipped_{op}_target_not_found", None
    if op == "replace":
        return _replace(text, content, located.span), "applied_replace", located.kind
    return _remove(text, located.span), "applied_delete", located.kind


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
            report = EditReport(
                index, op, target[:_PREVIEW], content[:_PREVIEW], status, matched,
                content=content, full_target=target, file=file,
            )  # fmt: skip
        except Exception as exc:  # one bad edit must not sink the patch (§6.7)
            error = f"{type(exc).__name__}: {exc}"
            report = EditReport(
                index, op, target[:_PREVIEW], content[:_PREVIEW], "error", None, error,
                content=content, full_target=target, file=file,
            )  # fmt: skip
        reports.append(report)
    return ApplyResult(
        text=text,
        reports=tuple(reports),
        summary=ApplySummary.of(reports),
        changed=text != original,
    )
