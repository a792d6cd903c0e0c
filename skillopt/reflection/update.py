"""Update stages of the rewrite modes (reference §7.1): LLM rewrite and full-rewrite pick.

Patch mode needs nothing here (``skillopt.skill.apply_edits`` applies the edits). In the two
rewrite modes the optimizer produces a whole new document, which could silently drop or edit
the machine-managed regions. Every new document is therefore checked against the current
skill with :func:`protect`:

* the **slow-update block** must come back with the same guidance and the same markers;
  otherwise the rewrite is refused (the block is owned by the epoch-level slow update and
  may only change through it);
* the **appendix block** (skill-aware notes) is repaired instead of refused: when it was
  dropped or changed, the original protected blocks are restored verbatim after the new body
  (the reference's docs only warn that rewrites may lose the appendix).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from skillopt.errors import ModelError
from skillopt.jsonx import extract_json_object, extraction_error
from skillopt.models.roles import RoleModel
from skillopt.reflection._common import item_to_dict, safe_text, section, skill_section
from skillopt.reflection.cache import Slot, cache_key, memoized
from skillopt.reflection.prompts import load_prompt
from skillopt.skill import (
    APPENDIX_END,
    APPENDIX_START,
    SLOW_UPDATE_END,
    SLOW_UPDATE_START,
    appendix_notes,
    extract_slow_update_field,
    protected_spans,
    strip_protected_regions,
)

__all__ = ["ProtectionCheck", "RewriteResult", "full_rewrite_candidate", "protect", "rewrite_skill"]

log = structlog.get_logger("skillopt.reflection")

_CACHE_VERSION = 1


@dataclass(frozen=True, kw_only=True, slots=True)
class ProtectionCheck:
    """Outcome of :func:`protect`.

    Attributes:
        text: The document to use (``None`` when refused).
        reason: Why it was refused, or ``""``.
        repaired_appendix: Whether the original appendix block had to be restored.
    """

    text: str | None
    reason: str = ""
    repaired_appendix: bool = False


def _count(text: str, marker: str) -> int:
    return text.count(marker)


def _single_trailing_newline(text: str) -> str:
    return text.rstrip() + "\n"


def protect(old: str, new: str) -> ProtectionCheck:
    """Check a rewritten skill against the current one (see the module docstring).

    Args:
        old: The current skill.
        new: The proposed replacement.

    Returns:
        The document to use, or ``text=None`` with the reason.
    """
    slow_same = (
        _count(old, SLOW_UPDATE_START) == _count(new, SLOW_UPDATE_START)
        and _count(old, SLOW_UPDATE_END) == _count(new, SLOW_UPDATE_END)
        and extract_slow_update_field(old) == extract_slow_update_field(new)
    )
    if not slow_same:
        had = _count(old, SLOW_UPDATE_START) > 0
        reason = (
            "the rewrite dropped or altered the slow-update block"
            if had
            else "the rewrite added a slow-update block"
        )
        return ProtectionCheck(text=None, reason=reason)
    appendix_same = (
        _count(old, APPENDIX_START) == _count(new, APPENDIX_START)
        and _count(old, APPENDIX_END) == _count(new, APPENDIX_END)
        and appendix_notes(old) == appendix_notes(new)
    )
    if appendix_same:
        return ProtectionCheck(text=_single_trailing_newline(new))
    blocks = [old[a:b] for a, b in protected_spans(old)]
    body = strip_protected_regions(new).rstrip()
    rebuilt = "\n\n".join([body, *blocks]) if body else "\n\n".join(blocks)
    return ProtectionCheck(text=_single_trailing_newline(rebuilt), repaired_appendix=True)


@dataclass(frozen=True, kw_only=True, slots=True)
class RewriteResult:
    """Output of :func:`rewrite_skill` (``rewrite_result.json``).

    Attributes:
        new_skill: The rewritten skill, or ``None`` (the trainer records ``skip_no_rewrite``).
        change_summary: What the rewriter says it changed.
        reasoning: Its reasoning.
        error: Why there is no new skill, if so.
        repaired_appendix: Whether the appendix block was restored (see :func:`protect`).
    """

    new_skill: str | None
    change_summary: tuple[str, ...] = ()
    reasoning: str = ""
    error: str = ""
    repaired_appendix: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "new_skill": self.new_skill,
            "change_summary": list(self.change_summary),
            "reasoning": self.reasoning,
            "error": self.error,
            "repaired_appendix": self.repaired_appendix,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RewriteResult:
        """Inverse of :meth:`to_dict`."""
        new = data["new_skill"]
        return cls(
            new_skill=None if new is None else str(new),
            change_summary=tuple(str(c) for c in data.get("change_summary") or ()),
            reasoning=str(data.get("reasoning", "")),
            error=str(data.get("error", "")),
            repaired_appendix=bool(data.get("repaired_appendix")),
        )


def _summary(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return ()
    return tuple(t for t in (safe_text(v, 500).strip() for v in value[:50]) if t)


def rewrite_skill(
    skill: str,
    suggestions: Sequence[Mapping[str, Any]],
    *,
    model: RoleModel,
    step_buffer_text: str = "",
    reasoning_effort: str | None = None,
    max_tokens: int | None = None,
    cache: Slot | None = None,
) -> RewriteResult:
    """Rewrite the whole skill from the selected suggestions (one optimizer call, stage ``rewrite``).

    The answer is ``{"reasoning", "change_summary": [...], "new_skill"}``; ``new_skill`` is
    checked with :func:`protect` and ends with exactly one newline. The meta skill is not
    shown to the rewriter (as in the reference).

    With ``cache`` (``rewrite_result.json``) a rewrite made from the same skill, suggestions and
    step buffer is reused; a failed one is not kept.

    Returns:
        The result; never raises for model or parse failures (``new_skill`` is then ``None``).
    """
    if not suggestions:
        return RewriteResult(new_skill=None, error="no suggestions to apply")
    key = cache_key(
        "rewrite",
        _CACHE_VERSION,
        {"skill": skill, "suggestions": [item_to_dict(s) for s in suggestions], "buffer": step_buffer_text},
    )
    return memoized(
        cache,
        key,
        lambda: _rewrite(
            skill,
            suggestions,
            model=model,
            step_buffer_text=step_buffer_text,
            reasoning_effort=reasoning_effort,
            max_tokens=max_tokens,
        ),
        encode=RewriteResult.to_dict,
        decode=RewriteResult.from_dict,
        keep=lambda r: r.new_skill is not None,
    )


def _rewrite(
    skill: str,
    suggestions: Sequence[Mapping[str, Any]],
    *,
    model: RoleModel,
    step_buffer_text: str,
    reasoning_effort: str | None,
    max_tokens: int | None,
) -> RewriteResult:
    payload = json.dumps([item_to_dict(s) for s in suggestions], ensure_ascii=False, indent=2)
    parts = [
        skill_section(skill),
        f"## Selected Suggestions ({len(suggestions)} total)\n```json\n{payload}\n```",
    ]
    if step_buffer_text.strip():
        parts.append(section("## Previous Steps in This Epoch", step_buffer_text))
    try:
        text = model.ask(
            load_prompt("rewrite_skill"),
            "\n\n".join(parts) + "\n",
            stage="rewrite",
            max_output_tokens=max_tokens,
            reasoning_effort=reasoning_effort,
        )
    except ModelError as exc:
        log.warning("rewrite.failed", reason="model_error", error_type=type(exc).__name__)
        return RewriteResult(new_skill=None, error=f"model error ({type(exc).__name__})")
    obj = extract_json_object(text)
    if obj is None:
        return RewriteResult(new_skill=None, error=f"unparsable answer: {extraction_error(text)}")
    reasoning = safe_text(obj.get("reasoning")).strip()
    summary = _summary(obj.get("change_summary"))
    new = obj.get("new_skill")
    if not isinstance(new, str) or not new.strip():
        return RewriteResult(
            new_skill=None, change_summary=summary, reasoning=reasoning, error="empty new_skill"
        )
    check = protect(skill, new)
    if check.text is None:
        log.warning("rewrite.refused", reason=check.reason)
    return RewriteResult(
        new_skill=check.text,
        change_summary=summary,
        reasoning=reasoning,
        error=check.reason,
        repaired_appendix=check.repaired_appendix,
    )


def full_rewrite_candidate(items: Sequence[Mapping[str, Any]], *, skill: str | None = None) -> str | None:
    """The first merged candidate with a non-empty ``new_skill`` (full-rewrite mode).

    With ``skill`` given, each candidate is checked with :func:`protect` and one that damaged
    the slow-update block is skipped for the next.

    Returns:
        The new skill ending with exactly one newline, or ``None``.
    """
    for item in items:
        new = item.get("new_skill") if isinstance(item, Mapping) else None
        if not isinstance(new, str) or not new.strip():
            continue
        if skill is None:
            return _single_trailing_newline(new)
        check = protect(skill, new)
        if check.text is not None:
            return check.text
        log.warning("full_rewrite.candidate_refused", reason=check.reason)
    return None
