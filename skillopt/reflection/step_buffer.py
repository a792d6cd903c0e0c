"""The step buffer: failure memory and rejected edits within one epoch (reference §1.3).

After every step the trainer records what happened (action, failure count, the step's failure
patterns and, on ``reject``, summaries of the edits that did not pass the gate). Later steps
of the same epoch show the buffer to the analysts and the rewriter so they do not repeat
ineffective edits. The trainer resets it at every epoch start.

Unlike the reference (§14 item 9), the buffer round-trips through JSON
(:meth:`StepBuffer.to_json` / :meth:`StepBuffer.from_json`), so a resumed run restores the
interrupted epoch's memory instead of starting empty.

Usage::

    buffer = StepBuffer(epoch=1)
    buffer.record(step=3, action="reject", rows=rows, failure_summaries=result.failure_summaries,
                  score_before=0.55, score_after=0.5, rejected_items=selection.items)
    prompt_text = buffer.format_for_prompt()
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from skillopt.reflection._common import as_count, safe_text
from skillopt.reflection.trajectory import is_failure, reflectable
from skillopt.skill import Edit
from skillopt.skill.edits import DEFAULT_FILE
from skillopt.types import RolloutResult

__all__ = ["FailurePattern", "StepBuffer", "StepEntry", "failure_patterns", "rejected_summaries"]

_PREFIX_CHARS = 120
_DESCRIPTION_CHARS = 300
_SUMMARY_CHARS = 300
_SHOWN_IDS = 10
_INSTRUCTION = (
    "Earlier steps of this epoch are summarised below: their recurring failure patterns and, "
    "for steps whose update was rejected by the validation gate, the edits that were tried. "
    "Do not propose those rejected edits again, or close variants of them: they did not "
    "improve the held-out score. Address the recurring failure patterns in a different way."
)


@dataclass(frozen=True, kw_only=True, slots=True)
class FailurePattern:
    """Failures of one step sharing a ``fail_reason`` prefix.

    Attributes:
        pattern: The description shown to the optimizer (``"<failure_type>: <description>"``
            from an analyst's failure summary, or the prefix).
        count: How many failed rows share the prefix.
        task_ids: Their ids.
        prefix: The ``fail_reason`` text before the first ``:``.
    """

    pattern: str
    count: int
    task_ids: tuple[str, ...] = ()
    prefix: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "pattern": self.pattern,
            "count": self.count,
            "task_ids": list(self.task_ids),
            "prefix": self.prefix,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FailurePattern:
        return cls(
            pattern=safe_text(data.get("pattern")),
            count=as_count(data.get("count"), 0),
            task_ids=tuple(safe_text(i) for i in data.get("task_ids") or ()),
            prefix=safe_text(data.get("prefix")),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class StepEntry:
    """One step of the buffer (the reference's ``trajectory_digest.json`` entry)."""

    step: int
    action: str
    n_total: int
    n_fail: int
    failure_patterns: tuple[FailurePattern, ...] = ()
    score_before: float | None = None
    score_after: float | None = None
    rejected_edits: tuple[Mapping[str, Any], ...] = ()
    #: Scripts the optimizer wrote that failed their check (``{path, rule, message}``): their
    #: edits were dropped before the gate, whatever the step's action.
    check_failures: tuple[Mapping[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "step": self.step,
            "action": self.action,
            "n_total": self.n_total,
            "n_fail": self.n_fail,
            "failure_patterns": [p.to_dict() for p in self.failure_patterns],
        }
        if self.score_before is not None:
            out["score_before"] = self.score_before
        if self.score_after is not None:
            out["score_after"] = self.score_after
        if self.rejected_edits:
            out["rejected_edits"] = [dict(e) for e in self.rejected_edits]
        if self.check_failures:
            out["check_failures"] = [dict(e) for e in self.check_failures]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StepEntry:
        def score(key: str) -> float | None:
            value = data.get(key)
            return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

        return cls(
            step=as_count(data.get("step"), 0),
            action=safe_text(data.get("action")),
            n_total=as_count(data.get("n_total"), 0),
            n_fail=as_count(data.get("n_fail"), 0),
            failure_patterns=tuple(
                FailurePattern.from_dict(p)
                for p in data.get("failure_patterns") or ()
                if isinstance(p, Mapping)
            ),
            score_before=score("score_before"),
            score_after=score("score_after"),
            rejected_edits=tuple(dict(e) for e in data.get("rejected_edits") or () if isinstance(e, Mapping)),
            check_failures=tuple(dict(e) for e in data.get("check_failures") or () if isinstance(e, Mapping)),
        )


def _prefix(reason: str) -> str:
    head = reason.split(":", 1)[0].strip()
    head = " ".join(head.split())
    return head[:_PREFIX_CHARS] or "unknown"


def _summary_description(entry: Any) -> str | None:
    if not isinstance(entry, Mapping):
        return None
    ftype = safe_text(entry.get("failure_type"), 80).strip()
    desc = safe_text(entry.get("description"), _DESCRIPTION_CHARS).strip()
    if not (ftype or desc):
        return None
    return f"{ftype}: {desc}" if ftype and desc else (ftype or desc)


def failure_patterns(
    rows: Iterable[RolloutResult], failure_summaries: Iterable[Any] = ()
) -> tuple[FailurePattern, ...]:
    """Group a step's failed rows by the ``fail_reason`` prefix before the first ``:``.

    Groups are ordered by size (largest first, ties by first appearance); the i-th group is
    described by the i-th usable analyst failure-summary entry (``"<failure_type>:
    <description>"``, entries taken in the order given) or, when none remain, by its prefix.
    Infra-error rows are not failures of the skill and are left out. Malformed summary
    entries (non-objects, nested or huge values) are skipped or rendered safely; they never
    raise.

    Args:
        rows: The step's result rows.
        failure_summaries: The failure analysts' ``failure_summary`` entries, in chunk order.

    Returns:
        The patterns.
    """
    groups: dict[str, list[str]] = {}
    for row in reflectable(rows):
        if is_failure(row):
            groups.setdefault(_prefix(row.fail_reason), []).append(row.id)
    ordered = sorted(groups.items(), key=lambda kv: -len(kv[1]))  # stable: ties keep first appearance
    descriptions = [d for d in map(_summary_description, failure_summaries) if d]
    out = []
    for i, (prefix, ids) in enumerate(ordered):
        pattern = descriptions[i] if i < len(descriptions) else prefix
        out.append(FailurePattern(pattern=pattern, count=len(ids), task_ids=tuple(ids), prefix=prefix))
    return tuple(out)


def rejected_summaries(items: Iterable[Edit | Mapping[str, Any]]) -> tuple[dict[str, Any], ...]:
    """Short summaries of the items a rejected step tried (content cut to 300 characters).

    Edits → ``{op, content, target}``; rewrite suggestions → ``{type, title, instruction}``;
    full-rewrite candidates → ``{title, change_summary, source_type}``.
    """
    out: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, Edit):
            summary_of_edit = {
                "op": item.op,
                "content": safe_text(item.content, _SUMMARY_CHARS),
                "target": safe_text(item.target, _SUMMARY_CHARS),
            }
            if item.file != DEFAULT_FILE:
                summary_of_edit["file"] = item.file
            out.append(summary_of_edit)
        elif isinstance(item, Mapping) and "new_skill" in item:
            summary = item.get("change_summary")
            if isinstance(summary, list):
                summary = "; ".join(safe_text(s) for s in summary[:20])
            out.append(
                {
                    "title": safe_text(item.get("title"), _SUMMARY_CHARS),
                    "change_summary": safe_text(summary, _SUMMARY_CHARS),
                    "source_type": safe_text(item.get("source_type"), 40),
                }
            )
        elif isinstance(item, Mapping):
            out.append(
                {
                    "type": safe_text(item.get("type"), 40),
                    "title": safe_text(item.get("title"), _SUMMARY_CHARS),
                    "instruction": safe_text(item.get("instruction"), _SUMMARY_CHARS),
                }
            )
    return tuple(out)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _rejected_line(n: int, summary: Mapping[str, Any]) -> str:
    if "op" in summary:
        where = f' file="{summary["file"]}"' if summary.get("file") else ""
        head = f'[{summary.get("op", "")}]{where} target="{_one_line(summary.get("target", ""))}"'
        body = summary.get("content", "")
    elif "change_summary" in summary:
        head = f'[full_rewrite] title="{_one_line(summary.get("title", ""))}"'
        body = summary.get("change_summary", "")
    else:
        head = f'[{summary.get("type", "") or "suggestion"}] title="{_one_line(summary.get("title", ""))}"'
        body = summary.get("instruction", "")
    return f'  {n}. {head} → "{_one_line(body)}"'


def _score(value: float | None) -> str:
    return "?" if value is None else f"{value:.4f}"


@dataclass
class StepBuffer:
    """The in-epoch step memory. Mutable; the trainer owns it and resets it per epoch.

    Attributes:
        epoch: The epoch the entries belong to (lets a resumed trainer check it).
        entries: One entry per executed step, in order.
    """

    epoch: int = 0
    entries: list[StepEntry] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.entries)

    def reset(self, epoch: int | None = None) -> None:
        """Forget every entry (epoch start); optionally set the new epoch."""
        self.entries.clear()
        if epoch is not None:
            self.epoch = epoch

    def add(self, entry: StepEntry) -> None:
        self.entries.append(entry)

    def record(
        self,
        *,
        step: int,
        action: str,
        rows: Sequence[RolloutResult],
        failure_summaries: Iterable[Any] = (),
        score_before: float | None = None,
        score_after: float | None = None,
        rejected_items: Iterable[Edit | Mapping[str, Any]] = (),
        check_failures: Iterable[Mapping[str, Any]] = (),
    ) -> StepEntry:
        """Build a step's entry from its rows and analysts' summaries, append and return it.

        ``n_total``/``n_fail`` count reflectable rows only (infra errors are left out).
        ``rejected_items`` and the scores are kept only for ``reject`` steps.
        """
        usable = reflectable(rows)
        rejected = action == "reject"
        entry = StepEntry(
            step=step,
            action=action,
            n_total=len(usable),
            n_fail=sum(is_failure(r) for r in usable),
            failure_patterns=failure_patterns(usable, failure_summaries),
            score_before=score_before if rejected else None,
            score_after=score_after if rejected else None,
            rejected_edits=rejected_summaries(rejected_items) if rejected else (),
            check_failures=tuple(
                {k: safe_text(c.get(k), _SUMMARY_CHARS) for k in ("path", "rule", "message")}
                for c in check_failures
            ),
        )
        self.add(entry)
        return entry

    def format_for_prompt(self) -> str:
        """The buffer as shown to analysts/rewriter (no section heading), or ``""`` if empty.

        Format::

            <instruction to avoid repeating ineffective edits>

            ### Step N — ACTION (n_fail/n_total failed)
            - "pattern" (×count, tasks: id1, id2)
            Rejected edits (score a → b):
              1. [op] target="…" → "content"
        """
        if not self.entries:
            return ""
        lines = [_INSTRUCTION]
        for e in self.entries:
            lines += ["", f"### Step {e.step} — {e.action.upper()} ({e.n_fail}/{e.n_total} failed)"]
            for p in e.failure_patterns:
                shown = ", ".join(p.task_ids[:_SHOWN_IDS])
                more = f" (+{len(p.task_ids) - _SHOWN_IDS} more)" if len(p.task_ids) > _SHOWN_IDS else ""
                lines.append(f'- "{_one_line(p.pattern)}" (×{p.count}, tasks: {shown}{more})')
            if e.rejected_edits:
                lines.append(f"Rejected edits (score {_score(e.score_before)} → {_score(e.score_after)}):")
                lines += [_rejected_line(i, s) for i, s in enumerate(e.rejected_edits, 1)]
            if e.check_failures:
                lines.append(
                    "Scripts that failed their check in the sandbox (their edits were dropped; fix them):"
                )
                lines += [
                    f"  - {c.get('path', '')} [{c.get('rule', '')}]: {_one_line(c.get('message', ''))}"
                    for c in e.check_failures
                ]
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, Any]:
        """JSON form for the run directory (``{"version", "epoch", "entries"}``)."""
        return {"version": 1, "epoch": self.epoch, "entries": [e.to_dict() for e in self.entries]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | Sequence[Any]) -> StepBuffer:
        """Inverse of :meth:`to_json`; also accepts a bare list of entries (reference digest)."""
        if isinstance(data, Mapping):
            entries = data.get("entries") or []
            epoch = as_count(data.get("epoch"), 0)
        else:
            entries, epoch = list(data), 0
        return cls(epoch=epoch, entries=[StepEntry.from_dict(e) for e in entries if isinstance(e, Mapping)])
