"""What an edit is, and how edits are read from a model's answer.

:class:`Edit` is one change the optimizer proposes (an op, its content and target, the file it
changes, and where it came from); :class:`Patch` is a list of them with the reasoning behind
them. :func:`edits_from_payload` reads edits from the JSON a model wrote, keeping the usable
ones and saying why each other item was skipped. Applying edits to a text is
:mod:`skillopt.skill.edits._apply`'s job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from skillopt.errors import SkillParseError
from skillopt.skill.document import remove_protected_markers

__all__ = [
    "DEFAULT_FILE",
    "EDIT_OPS",
    "TEXT_OPS",
    "Edit",
    "ParsedEdits",
    "Patch",
    "RejectedEdit",
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
