"""Select / clip the merged pool to the step's edit budget (reference §7.3, §7.4).

:func:`rank_and_select` keeps at most ``budget`` items. A pool that already fits is returned
unchanged without a model call; otherwise the optimizer ranks a numbered pool and the valid,
unique, in-range indices it returns are kept in its order up to the budget. An unusable answer
falls back to the first ``budget`` items. A budget of 0 selects nothing (the reference kept one
item when the model returned an index anyway).

:func:`autonomous_budget` is ``lr_control_mode: autonomous``: the optimizer decides how many
items to apply from the step's evidence; its number is coerced and clamped to
``[0, available]``, and an unusable answer means 0 (``fallback=True``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from skillopt.errors import ModelError
from skillopt.jsonx import extract_json_object, extraction_error
from skillopt.models.roles import RoleModel
from skillopt.reflection._common import as_int, item_to_dict, safe_text, section, skill_section
from skillopt.reflection.cache import Slot, cache_key, memoized
from skillopt.reflection.longitudinal import meta_skill_block
from skillopt.reflection.modes import normalize_update_mode
from skillopt.reflection.patches import Item
from skillopt.reflection.prompts import load_prompt
from skillopt.skill import DEFAULT_FILE, Edit

__all__ = ["LRDecision", "Selection", "autonomous_budget", "format_pool", "rank_and_select"]

log = structlog.get_logger("skillopt.reflection")

_CACHE_VERSION = 1


@dataclass(frozen=True, kw_only=True, slots=True)
class Selection:
    """Output of :func:`rank_and_select`.

    Attributes:
        items: The selected items, in priority order.
        reasoning: The ranking reasoning plus ``[optimizer-ranked: selected k/n edits]``, or
            what happened instead.
        ranking_details: ``{pool_size, budget, selected_indices, ...}`` for ``ranked_edits.json``.
        used_model: Whether a ranking call was made.
        fallback: Whether the first ``budget`` items were taken because the answer was unusable.
    """

    items: tuple[Item, ...]
    reasoning: str = ""
    ranking_details: Mapping[str, Any] = field(default_factory=dict)
    used_model: bool = False
    fallback: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "reasoning": self.reasoning,
            "items": [item_to_dict(i) for i in self.items],
            "ranking_details": dict(self.ranking_details),
            "used_model": self.used_model,
            "fallback": self.fallback,
        }


def _quote(text: Any) -> str:
    s = safe_text(text).replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")
    return f"'{s}'"


def _pool_line(i: int, item: Item) -> str:
    if isinstance(item, Edit):
        return (
            f"[{i}] op={item.op}{'' if item.file == DEFAULT_FILE else f' file={item.file}'} "
            f"target={_quote(item.target)} content={_quote(item.content)} "
            f"support={item.support_count}"
        )
    support = item.get("support_count", 1)
    if "new_skill" in item:
        return f"[{i}] title={_quote(item.get('title', ''))} change_summary={_quote(item.get('change_summary', ''))} support={support}"
    return (
        f"[{i}] type={safe_text(item.get('type')) or 'suggestion'} title={_quote(item.get('title', ''))} "
        f"instruction={_quote(item.get('instruction', ''))} priority={safe_text(item.get('priority_hint')) or 'medium'} "
        f"support={support}"
    )


def format_pool(items: Sequence[Item]) -> str:
    """The numbered pool shown to the ranking and autonomous-LR prompts (0-based indices)."""
    return "\n".join(_pool_line(i, item) for i, item in enumerate(items))


def _valid_indices(raw: Any, n: int, budget: int) -> tuple[list[int], list[Any]]:
    """Valid unique in-range indices (in the model's order, up to ``budget``) and the rejects."""
    if not isinstance(raw, list):
        return [], [raw]
    kept: list[int] = []
    rejected: list[Any] = []
    for value in raw:
        index = value if isinstance(value, int) and not isinstance(value, bool) else None
        if index is None and isinstance(value, str) and value.strip().isdigit():
            index = int(value.strip())
        if index is None or not 0 <= index < n or index in kept:
            rejected.append(_json_scalar(value))
            continue
        if len(kept) < budget:
            kept.append(index)
    return kept, rejected


def rank_and_select(
    skill: str,
    items: Sequence[Item],
    *,
    budget: int | None,
    model: RoleModel,
    update_mode: str = "patch",
    meta_skill_text: str = "",
    cache: Slot | None = None,
    max_output_tokens: int = 16384,
) -> Selection:
    """Clip ``items`` to ``budget``, letting the optimizer rank when there are too many.

    Args:
        skill: The current skill.
        items: The merged pool.
        budget: Most items to keep; ``None`` keeps everything (full-rewrite mode).
        model: The optimizer.
        update_mode: ``patch`` uses ``ranking``, the rewrite mode ``ranking_rewrite``.
        meta_skill_text: The active meta skill (bare or wrapped).
        cache: Where the ranking is kept (``ranked_edits.json``); reused when made from the
            same pool and budget.
        max_output_tokens: Completion budget of the call.

    Returns:
        The selection.

    Raises:
        ValueError: ``budget < 0``.
    """
    pool = tuple(items)
    n = len(pool)
    if budget is None or n <= budget:
        return Selection(
            items=pool,
            reasoning=f"[within budget: kept all {n} items]",
            ranking_details={"pool_size": n, "budget": budget, "selected_indices": list(range(n))},
        )
    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget}")
    if budget == 0:
        return Selection(
            items=(),
            reasoning="[budget 0: nothing selected]",
            ranking_details={"pool_size": n, "budget": 0, "selected_indices": []},
        )
    mode = normalize_update_mode(update_mode)
    key = cache_key(
        "ranking",
        _CACHE_VERSION,
        {
            "skill": skill,
            "mode": mode,
            "budget": budget,
            "meta": meta_skill_text,
            "pool": [item_to_dict(i) for i in pool],
        },
    )
    if cache is not None:
        data = cache.load(key)
        if data is not None:
            indices = [
                i for i in data.get("ranking_details", {}).get("selected_indices", []) if isinstance(i, int)
            ]
            if all(0 <= i < n for i in indices):
                return Selection(
                    items=tuple(pool[i] for i in indices),
                    reasoning=str(data.get("reasoning", "")),
                    ranking_details=dict(data.get("ranking_details", {})),
                    used_model=bool(data.get("used_model")),
                    fallback=bool(data.get("fallback")),
                )
    selection = _rank(
        skill, pool, budget, model=model, mode=mode, meta=meta_skill_text, tokens=max_output_tokens
    )
    if cache is not None:
        cache.save(key, selection.to_dict())
    return selection


def _rank(
    skill: str, pool: tuple[Item, ...], budget: int, *, model: RoleModel, mode: str, meta: str, tokens: int
) -> Selection:
    n = len(pool)
    noun = "suggestions" if mode == "rewrite_from_suggestions" else "edits"
    parts = [meta_skill_block(meta)] if meta.strip() else []
    parts += [
        skill_section(skill),
        f"## Candidate {noun.capitalize()} ({n} total)\n{format_pool(pool)}",
        f"## Budget\nSelect at most k={budget} of the {n} {noun} (0-based indices, best first).",
    ]
    prompt = "ranking_rewrite" if mode == "rewrite_from_suggestions" else "ranking"
    details: dict[str, Any] = {"pool_size": n, "budget": budget}
    reason = ""
    obj: dict[str, Any] | None = None
    try:
        text = model.ask(
            load_prompt(prompt), "\n\n".join(parts) + "\n", stage="ranking", max_output_tokens=tokens
        )
        obj = extract_json_object(text)
        if obj is None:
            reason = f"unparsable answer: {extraction_error(text)}"
    except ModelError as exc:
        reason = f"model error ({type(exc).__name__})"
    kept: list[int] = []
    if obj is not None:
        raw = obj.get("selected_indices")
        kept, rejected = _valid_indices(raw, n, budget)
        details["raw_indices"] = (
            [_json_scalar(v) for v in raw[:100]] if isinstance(raw, list) else _json_scalar(raw)
        )
        details["invalid_indices"] = rejected[:100]
        if not kept:
            reason = "no valid indices"
    if not kept:
        log.warning("ranking.fallback", reason=reason, action=f"kept the first {budget} items")
        details.update(selected_indices=list(range(budget)), fallback=True, reason=reason)
        return Selection(
            items=pool[:budget],
            reasoning=f"[ranking fallback: kept the first {budget}/{n} {noun}; {reason}]",
            ranking_details=details,
            used_model=True,
            fallback=True,
        )
    details.update(selected_indices=kept, fallback=False)
    reasoning = safe_text(obj.get("reasoning") if obj else "").strip()
    return Selection(
        items=tuple(pool[i] for i in kept),
        reasoning=f"{reasoning} [optimizer-ranked: selected {len(kept)}/{n} {noun}]".strip(),
        ranking_details=details,
        used_model=True,
    )


# ── autonomous learning rate ──────────────────────────────────────────────────────────────


@dataclass(frozen=True, kw_only=True, slots=True)
class LRDecision:
    """The optimizer's own edit budget for one step (``lr_decision.json``).

    Attributes:
        learning_rate: The count to apply, in ``[0, available_update_items]``.
        raw_learning_rate: What the model answered (before coercion), JSON-safe.
        available_update_items: Size of the merged pool.
        clamped: Whether the coerced number was outside ``[0, available]``.
        fallback: Whether the answer was unusable (``learning_rate`` is then 0).
        reasoning, confidence, risk_notes: The model's justification.
        raw_response: The model's full answer text (``""`` when no call was made).
        error: What went wrong, when ``fallback``.
    """

    learning_rate: int
    raw_learning_rate: Any = None
    available_update_items: int = 0
    clamped: bool = False
    fallback: bool = False
    reasoning: str = ""
    confidence: Any = None
    risk_notes: tuple[str, ...] = ()
    raw_response: str = ""
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        out = {
            "learning_rate": self.learning_rate,
            "raw_learning_rate": self.raw_learning_rate,
            "available_update_items": self.available_update_items,
            "clamped": self.clamped,
            "fallback": self.fallback,
            "reasoning": self.reasoning,
            "confidence": self.confidence,
            "risk_notes": list(self.risk_notes),
            "raw_response": self.raw_response,
        }
        if self.error:
            out["error"] = self.error
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LRDecision:
        """Inverse of :meth:`to_dict`.

        Raises:
            KeyError, TypeError, ValueError: not a decision's JSON form.
        """
        return cls(
            learning_rate=int(data["learning_rate"]),
            raw_learning_rate=data.get("raw_learning_rate"),
            available_update_items=int(data.get("available_update_items", 0)),
            clamped=bool(data.get("clamped")),
            fallback=bool(data.get("fallback")),
            reasoning=str(data.get("reasoning", "")),
            confidence=data.get("confidence"),
            risk_notes=tuple(str(n) for n in data.get("risk_notes") or ()),
            raw_response=str(data.get("raw_response", "")),
            error=str(data.get("error", "")),
        )


def _json_scalar(value: Any) -> Any:
    if isinstance(value, str):
        return safe_text(value, 200)
    if value is None or isinstance(value, bool) or (isinstance(value, int) and value.bit_length() <= 60):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    return safe_text(value, 200)


def autonomous_budget(
    skill: str,
    items: Sequence[Item],
    *,
    model: RoleModel,
    rollout_n: int,
    rollout_hard: float,
    rollout_soft: float,
    step_buffer_text: str = "",
    meta_skill_text: str = "",
    update_mode: str = "patch",
    max_output_tokens: int = 4096,
    cache: Slot | None = None,
) -> LRDecision:
    """Let the optimizer decide how many of the merged items to apply this step.

    The answer is ``{learning_rate, reasoning, confidence, risk_notes}``. ``learning_rate`` is
    coerced (bools rejected; ints, integral floats, or the first integer in a string) and
    clamped to ``[0, len(items)]``; anything unusable gives 0 with ``fallback=True``. An empty
    pool needs no call (0, not a fallback). With ``cache`` (``lr_decision.json``) a decision
    made from the same inputs is reused; a fallback is not kept.
    """
    key = cache_key(
        "lr_autonomous",
        _CACHE_VERSION,
        {
            "skill": skill,
            "pool": [item_to_dict(i) for i in items],
            "rollout": [rollout_n, rollout_hard, rollout_soft],
            "buffer": step_buffer_text,
            "meta": meta_skill_text,
            "mode": update_mode,
        },
    )
    return memoized(
        cache,
        key,
        lambda: _ask_budget(
            skill,
            items,
            model=model,
            rollout_n=rollout_n,
            rollout_hard=rollout_hard,
            rollout_soft=rollout_soft,
            step_buffer_text=step_buffer_text,
            meta_skill_text=meta_skill_text,
            update_mode=update_mode,
            max_output_tokens=max_output_tokens,
        ),
        encode=LRDecision.to_dict,
        decode=LRDecision.from_dict,
        keep=lambda d: not d.fallback,
    )


def _ask_budget(
    skill: str,
    items: Sequence[Item],
    *,
    model: RoleModel,
    rollout_n: int,
    rollout_hard: float,
    rollout_soft: float,
    step_buffer_text: str,
    meta_skill_text: str,
    update_mode: str,
    max_output_tokens: int,
) -> LRDecision:
    pool = tuple(items)
    available = len(pool)
    if not available:
        return LRDecision(learning_rate=0, available_update_items=0, reasoning="empty pool: nothing to apply")
    mode = normalize_update_mode(update_mode)
    kinds: dict[str, int] = {}
    for item in pool:
        label = (
            item.op
            if isinstance(item, Edit)
            else safe_text(item.get("type") or ("candidate" if "new_skill" in item else "suggestion"), 40)
        )
        kinds[label] = kinds.get(label, 0) + 1
    evidence = (
        f"- rollout_n: {rollout_n}\n- rollout_hard: {rollout_hard:.4f}\n- rollout_soft: {rollout_soft:.4f}\n"
        f"- update mode: {mode}\n- available update items: {available}\n"
        f"- item types: {', '.join(f'{k}={v}' for k, v in sorted(kinds.items()))}"
    )
    parts = [meta_skill_block(meta_skill_text)] if meta_skill_text.strip() else []
    parts += [
        skill_section(skill),
        f"## Step Evidence\n{evidence}",
        f"## Proposed Update Items ({available} total)\n{format_pool(pool)}",
    ]
    if step_buffer_text.strip():
        parts.append(section("## Previous Steps in This Epoch", step_buffer_text))
    try:
        text = model.ask(
            load_prompt("lr_autonomous"),
            "\n\n".join(parts) + "\n",
            stage="lr_autonomous",
            max_output_tokens=max_output_tokens,
        )
    except ModelError as exc:
        return LRDecision(
            learning_rate=0,
            available_update_items=available,
            fallback=True,
            error=f"model error ({type(exc).__name__})",
        )
    obj = extract_json_object(text)
    if obj is None:
        return LRDecision(
            learning_rate=0,
            available_update_items=available,
            fallback=True,
            raw_response=text,
            error=f"unparsable answer: {extraction_error(text)}",
        )
    raw = obj.get("learning_rate")
    number = as_int(raw)
    notes = obj.get("risk_notes")
    risk = tuple(safe_text(n, 500) for n in (notes if isinstance(notes, list) else [notes] if notes else []))
    common = {
        "raw_learning_rate": _json_scalar(raw),
        "available_update_items": available,
        "reasoning": safe_text(obj.get("reasoning")).strip(),
        "confidence": _json_scalar(obj.get("confidence")),
        "risk_notes": risk,
        "raw_response": text,
    }
    if number is None:
        return LRDecision(learning_rate=0, fallback=True, error="learning_rate is not an integer", **common)
    clamped = min(max(number, 0), available)
    return LRDecision(learning_rate=clamped, clamped=clamped != number, **common)
