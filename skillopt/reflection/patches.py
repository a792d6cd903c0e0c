"""Analyst answers as data: the :class:`RawPatch` and the tolerant parser that builds it.

Shared by the minibatch analysts (:mod:`~skillopt.reflection.analyst`), the merge (which
reuses the item validation) and the probe analyst.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from skillopt.jsonx import extract_json_object, extraction_error
from skillopt.reflection._common import as_count, safe_text
from skillopt.reflection.modes import PayloadKind, normalize_update_mode, payload_key
from skillopt.reflection.skill_aware import parse_notes
from skillopt.skill import Edit, dedup_notes, edits_from_payload
from skillopt.skill.edits import RejectedEdit

__all__ = [
    "AnalystReplyError",
    "Item",
    "RawPatch",
    "SourceType",
    "parse_analyst_reply",
    "parse_items",
    "stamp",
]

SourceType = Literal["failure", "success", "probe"]
Item = Edit | Mapping[str, Any]
_MAX_SUMMARY_CHARS = 500
_MAX_LIST = 100


class AnalystReplyError(ValueError):
    """An analyst answer that cannot be used; the message says why (safe to log)."""


# ── the raw patch ─────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True, kw_only=True, slots=True)
class RawPatch:
    """One analyst's answer for one minibatch.

    Attributes:
        source_type: ``failure`` | ``success`` | ``probe``.
        minibatch: Index of the chunk within its kind (0-based).
        ids: Row ids of the chunk, in prompt order.
        batch_size: Trajectories the analyst says it drew on (clamped to ``[1, len(ids)]``;
            default the chunk size). Every item's ``support_count`` is ``batch_size``.
        payload_kind: ``edits`` | ``revise_suggestions`` | ``skill_candidates``.
        items: :class:`Edit` objects (``edits``) or plain dicts (the other kinds), each stamped
            with ``source_type``, ``support_count`` and ``merge_level = 0``.
        reasoning: The analyst's reasoning.
        failure_summary: ``{failure_type, count, description}`` per failure pattern.
        success_patterns: Behaviours shared by the successful trajectories.
        appendix_notes: Execution-lapse reminders (skill-aware reflection only).
        dropped_items: Payload items that were malformed (index + reason) or over the budget.
    """

    source_type: SourceType
    minibatch: int = 0
    ids: tuple[str, ...] = ()
    batch_size: int = 1
    payload_kind: PayloadKind = "edits"
    items: tuple[Item, ...] = ()
    reasoning: str = ""
    failure_summary: tuple[Mapping[str, Any], ...] = ()
    success_patterns: tuple[str, ...] = ()
    appendix_notes: tuple[str, ...] = ()
    dropped_items: tuple[RejectedEdit, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON form (the reference's raw-patch shape plus our provenance fields)."""
        items = [i.to_dict() if isinstance(i, Edit) else dict(i) for i in self.items]
        return {
            "source_type": self.source_type,
            "minibatch": self.minibatch,
            "ids": list(self.ids),
            "batch_size": self.batch_size,
            "failure_summary": [dict(s) for s in self.failure_summary],
            "success_patterns": list(self.success_patterns),
            "appendix_notes": list(self.appendix_notes),
            "patch": {"reasoning": self.reasoning, self.payload_kind: items},
            "dropped_items": [{"index": d.index, "reason": d.reason} for d in self.dropped_items],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RawPatch:
        """Inverse of :meth:`to_dict`.

        Raises:
            AnalystReplyError: ``data`` does not have the shape :meth:`to_dict` writes.
        """
        try:
            patch = data["patch"]
            kinds: tuple[PayloadKind, ...] = ("edits", "revise_suggestions", "skill_candidates")
            kind = next(k for k in kinds if k in patch)
            raw_items = patch[kind]
            items: tuple[Item, ...] = (
                tuple(Edit.from_dict(i) for i in raw_items)
                if kind == "edits"
                else tuple(dict(i) for i in raw_items)
            )
            return cls(
                source_type=data["source_type"],
                minibatch=int(data.get("minibatch", 0)),
                ids=tuple(str(i) for i in data.get("ids", ())),
                batch_size=int(data.get("batch_size", 1)),
                payload_kind=kind,
                items=items,
                reasoning=str(patch.get("reasoning", "")),
                failure_summary=tuple(dict(s) for s in data.get("failure_summary", ())),
                success_patterns=tuple(str(s) for s in data.get("success_patterns", ())),
                appendix_notes=tuple(str(s) for s in data.get("appendix_notes", ())),
                dropped_items=tuple(
                    RejectedEdit(index=int(d["index"]), reason=str(d["reason"]))
                    for d in data.get("dropped_items", ())
                ),
            )
        except (KeyError, TypeError, ValueError, StopIteration, AttributeError) as exc:
            raise AnalystReplyError(f"not a stored raw patch ({type(exc).__name__})") from exc


# ── parsing ───────────────────────────────────────────────────────────────────────────────


def _failure_summary(value: Any) -> tuple[dict[str, Any], ...]:
    if not isinstance(value, list):
        return ()
    out = []
    for entry in value[:_MAX_LIST]:
        if not isinstance(entry, Mapping):
            continue
        out.append(
            {
                "failure_type": safe_text(entry.get("failure_type"), 80).strip() or "other",
                "count": as_count(entry.get("count"), 1, minimum=0),
                "description": safe_text(entry.get("description"), _MAX_SUMMARY_CHARS).strip(),
            }
        )
    return tuple(out)


def _string_list(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return ()
    texts = (safe_text(v, _MAX_SUMMARY_CHARS).strip() for v in value[:_MAX_LIST])
    return tuple(t for t in texts if t)


def _dict_items(payload: list[Any], kind: PayloadKind) -> tuple[list[dict[str, Any]], list[RejectedEdit]]:
    """Validate suggestion / candidate items (plain dicts)."""
    items: list[dict[str, Any]] = []
    dropped: list[RejectedEdit] = []
    for index, item in enumerate(payload):
        if not isinstance(item, Mapping):
            dropped.append(RejectedEdit(index, f"not an object ({type(item).__name__})"))
        elif kind == "skill_candidates":
            if isinstance(item.get("new_skill"), str) and item["new_skill"].strip():
                items.append(dict(item))
            else:
                dropped.append(RejectedEdit(index, "candidate without new_skill"))
        elif any(isinstance(item.get(k), str) and item[k].strip() for k in ("instruction", "title")):
            items.append(dict(item))
        else:
            dropped.append(RejectedEdit(index, "suggestion without instruction or title"))
    return items, dropped


def parse_items(
    payload: Any, kind: PayloadKind
) -> tuple[list[Edit] | list[dict[str, Any]], list[RejectedEdit]]:
    """Usable update items of ``payload`` (a list) for ``kind``, and the dropped ones.

    Raises:
        AnalystReplyError: ``payload`` is not a list.
    """
    if payload is None:
        payload = []
    if not isinstance(payload, list):
        raise AnalystReplyError(f"'{kind}' is not a list ({type(payload).__name__})")
    if kind == "edits":
        parsed = edits_from_payload(payload)
        return list(parsed.edits), list(parsed.rejected)
    return _dict_items(payload, kind)


def stamp(item: Item, **fields: Any) -> Item:
    """A copy of ``item`` with provenance fields set (Edit attributes or dict keys)."""
    if isinstance(item, Edit):
        return dataclasses.replace(item, **fields)
    return {**item, **fields}


def parse_analyst_reply(
    text: str,
    *,
    source_type: SourceType,
    update_mode: str = "patch",
    budget: int | None,
    chunk_ids: Sequence[str] = (),
    minibatch: int = 0,
    skill_aware: bool = False,
) -> RawPatch:
    """Turn an analyst's answer into a :class:`RawPatch`.

    The answer needs a ``patch`` object (a top-level payload list is accepted too). Malformed
    items are dropped with a reason; in patch and rewrite modes the payload is cut to
    ``budget`` items (never in full-rewrite mode). With ``skill_aware`` the top-level
    ``appendix_notes`` are read tolerantly, and an answer with notes but no items is still a
    patch (its notes must reach the trainer).

    Raises:
        AnalystReplyError: no JSON object, no ``patch`` object, or a payload that is not a list.
    """
    mode = normalize_update_mode(update_mode)
    kind = payload_key(mode)
    obj = extract_json_object(text)
    if obj is None:
        raise AnalystReplyError(f"no usable JSON object: {extraction_error(text)}")
    holder = obj.get("patch")
    if not isinstance(holder, Mapping):
        if kind not in obj:
            raise AnalystReplyError("the answer has no 'patch' object")
        holder = obj
    items, dropped = parse_items(holder.get(kind), kind)
    if budget is not None and mode != "full_rewrite_minibatch" and len(items) > budget:
        cut = max(0, budget)
        dropped += [RejectedEdit(i, "over the edit budget") for i in range(cut, len(items))]
        items = items[:cut]
    n = len(chunk_ids)
    batch_size = as_count(obj.get("batch_size"), n or 1, minimum=1, maximum=max(n, 1))
    stamped = tuple(stamp(i, support_count=batch_size, source_type=source_type, merge_level=0) for i in items)
    notes: tuple[str, ...] = ()
    if skill_aware:
        notes = tuple(
            dedup_notes([*parse_notes(obj.get("appendix_notes")), *parse_notes(holder.get("appendix_notes"))])
        )
    return RawPatch(
        source_type=source_type,
        minibatch=minibatch,
        ids=tuple(chunk_ids),
        batch_size=batch_size,
        payload_kind=kind,
        items=stamped,
        reasoning=safe_text(holder.get("reasoning")).strip(),
        failure_summary=_failure_summary(obj.get("failure_summary")),
        success_patterns=_string_list(obj.get("success_patterns")),
        appendix_notes=notes,
        dropped_items=tuple(dropped),
    )
