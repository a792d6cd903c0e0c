"""Hierarchical, failure-first merge of the analysts' patches (reference §6.5).

Failure patches and success patches are merged separately, level by level: the current list is
cut into groups of ``max(2, merge_batch_size)``, a group of one passes through untouched, the
others are merged by one optimizer call each (in parallel), and the process repeats until one
patch remains. If both sides produced something, a final call merges them with the failure
side as HIGH priority. Every item a merge call produces is stamped with that call's
``merge_level`` (analyst items are level 0).

A merge call whose answer is unusable (model error, no JSON, payload missing, not a list of
objects, or empty although its inputs were not) falls back to the concatenation of its inputs
(the final merge: failure items, then success items). The warning logged names the reason
category and exception type only, never the exception text, which may quote the prompt.

Usage::

    merged = merge_patches(skill, result.failure_patches, result.success_patches,
                           model=optimizer, merge_batch_size=8, cache=Slot(run_cache, "merged_patch.json"))
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import structlog

from skillopt.errors import ModelError
from skillopt.jsonx import extract_json_object
from skillopt.models.roles import RoleModel
from skillopt.reflection._common import item_to_dict, package_guide, safe_text, skill_section
from skillopt.reflection.cache import Slot, cache_key
from skillopt.reflection.longitudinal import meta_skill_block
from skillopt.reflection.modes import PayloadKind, normalize_update_mode, payload_key, prompt_suffix
from skillopt.reflection.patches import AnalystReplyError, Item, RawPatch, parse_items, stamp
from skillopt.reflection.prompts import load_prompt
from skillopt.skill import Edit

__all__ = ["MergeResult", "merge_patches"]

log = structlog.get_logger("skillopt.reflection")

_CACHE_VERSION = 1


@dataclass(frozen=True, kw_only=True, slots=True)
class MergeResult:
    """Output of :func:`merge_patches`.

    Attributes:
        items: The merged update items (Edits, or dicts in the rewrite modes).
        reasoning: The last merge call's reasoning (or a note on what was concatenated).
        n_calls: Merge calls made (cache hits and pass-throughs make none).
        n_fallbacks: Merge calls whose answer was replaced by concatenation.
        levels: Highest ``merge_level`` in the result (0: nothing was merged by a model).
        payload_kind: ``edits`` | ``revise_suggestions`` | ``skill_candidates``.
        fallback_reasons: One reason category per fallback (``model_error``, ``unparsable``,
            ``malformed``, ``empty``, ``internal_error``).
    """

    items: tuple[Item, ...] = ()
    reasoning: str = ""
    n_calls: int = 0
    n_fallbacks: int = 0
    levels: int = 0
    payload_kind: PayloadKind = "edits"
    fallback_reasons: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """``merged_patch.json`` form: the reference's ``{reasoning, <payload>}`` plus counters."""
        return {
            "reasoning": self.reasoning,
            self.payload_kind: [item_to_dict(i) for i in self.items],
            "n_calls": self.n_calls,
            "n_fallbacks": self.n_fallbacks,
            "levels": self.levels,
            "fallback_reasons": list(self.fallback_reasons),
        }


@dataclass(frozen=True, slots=True)
class _Pool:
    """A patch inside the merge tree."""

    items: tuple[Item, ...]
    reasoning: str
    level: int


class _Counter:
    """Thread-safe call / fallback bookkeeping of one merge run."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = 0
        self.reasons: list[str] = []

    def call(self) -> None:
        with self._lock:
            self.calls += 1

    def fallback(self, reason: str) -> None:
        with self._lock:
            self.reasons.append(reason)


def _level_of(item: Item) -> int:
    if isinstance(item, Edit):
        return item.merge_level
    value = item.get("merge_level", 0)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _with_default_source(raw: list[Any], source: str) -> list[Any]:
    return [
        {**i, "source_type": source} if isinstance(i, Mapping) and not i.get("source_type") else i
        for i in raw
    ]


class _Merger:
    """One :func:`merge_patches` call: the merge tree of each side, then the final merge of the
    two. Its counter counts the calls and the fallbacks of every thread."""

    def __init__(
        self, skill: str, *, model: RoleModel, mode: str, meta: str, workers: int, max_output_tokens: int
    ) -> None:
        self.skill = skill
        self.model = model
        self.mode = mode
        self.kind = payload_key(mode)
        self.meta = meta_skill_block(meta)
        self.workers = max(1, workers)
        self.tokens = max_output_tokens
        self.counter = _Counter()

    # one call ----------------------------------------------------------------------------

    def _header(self) -> list[str]:
        head = [self.meta] if self.meta else []
        return [*head, skill_section(self.skill), *package_guide(self.skill, self.mode)]

    def _dump(self, pools: Sequence[_Pool]) -> str:
        data = [{"reasoning": p.reasoning, self.kind: [item_to_dict(i) for i in p.items]} for p in pools]
        return json.dumps(data, ensure_ascii=False, indent=2)

    def _call(
        self, prompt: str, user: str, level: int, default_source: str, fallback: Callable[[], _Pool]
    ) -> _Pool:
        self.counter.call()
        reason = ""
        try:
            text = self.model.ask(load_prompt(prompt), user, stage="merge", max_output_tokens=self.tokens)
            obj = extract_json_object(text)
            if obj is None:
                reason = "unparsable"
            elif not isinstance(obj.get(self.kind), list) or not all(
                isinstance(i, Mapping) for i in obj[self.kind]
            ):
                reason = "malformed"
            else:
                items, _dropped = parse_items(_with_default_source(obj[self.kind], default_source), self.kind)
                if not items:
                    reason = "empty"
                else:
                    stamped = tuple(stamp(i, merge_level=level) for i in items)
                    return _Pool(stamped, safe_text(obj.get("reasoning")).strip(), level)
        except ModelError as exc:
            reason = f"model_error ({type(exc).__name__})"
        except AnalystReplyError:
            reason = "malformed"
        except Exception as exc:  # never let a merge sink the step; keep the text out of logs
            reason = f"internal_error ({type(exc).__name__})"
        log.warning("merge.fallback", prompt=prompt, level=level, reason=reason, action="concatenated inputs")
        self.counter.fallback(reason.split(" ", 1)[0])
        return fallback()

    # the tree ----------------------------------------------------------------------------

    def _merge_group(self, group: Sequence[_Pool], level: int, source: str) -> _Pool:
        if len(group) == 1:
            return group[0]
        user = (
            "\n\n".join(
                [
                    *self._header(),
                    f"## Patches to merge ({len(group)} total, merge level {level})\n```json\n{self._dump(group)}\n```",
                ]
            )
            + "\n"
        )
        prompt = f"merge_{source}{prompt_suffix(self.mode)}"

        def concat() -> _Pool:
            items = tuple(i for p in group for i in p.items)
            return _Pool(
                items, f"[fallback: concatenated {len(group)} {source} patches]", max(p.level for p in group)
            )

        return self._call(prompt, user, level, source, concat)

    def hierarchical(self, pools: list[_Pool], source: str, group_size: int) -> _Pool | None:
        if not pools:
            return None
        level = 0
        with ThreadPoolExecutor(max_workers=self.workers) as executor:
            while len(pools) > 1:
                level += 1
                groups = [pools[i : i + group_size] for i in range(0, len(pools), group_size)]
                pools = list(executor.map(lambda g, lv=level: self._merge_group(g, lv, source), groups))
        return pools[0]

    def both_sides(self, fail_pools: list[_Pool], succ_pools: list[_Pool], group_size: int) -> _Pool:
        """Each side merged down to one patch, then the two merged, failures first."""
        # The two sides are independent until the final merge: build both trees at once.
        with ThreadPoolExecutor(max_workers=2) as sides:
            fail_future = sides.submit(self.hierarchical, fail_pools, "failure", group_size)
            succ_future = sides.submit(self.hierarchical, succ_pools, "success", group_size)
            fail, succ = fail_future.result(), succ_future.result()
        if fail is not None and succ is not None:
            return self.final(fail, succ)
        return fail if fail is not None else succ if succ is not None else _Pool((), "no patches to merge", 0)

    def final(self, fail: _Pool, succ: _Pool) -> _Pool:
        level = max(fail.level, succ.level) + 1
        user = (
            "\n\n".join(
                [
                    *self._header(),
                    f"## Failure-driven updates (HIGH priority, {len(fail.items)} items, merge level {fail.level})\n"
                    f"```json\n{self._dump([fail])}\n```",
                    f"## Success-driven updates (lower priority, {len(succ.items)} items, merge level {succ.level})\n"
                    f"```json\n{self._dump([succ])}\n```",
                ]
            )
            + "\n"
        )

        def concat() -> _Pool:
            return _Pool(fail.items + succ.items, "[fallback: failure items, then success items]", level - 1)

        return self._call(f"merge_final{prompt_suffix(self.mode)}", user, level, "failure", concat)


def _pools(patches: Sequence[RawPatch], kind: PayloadKind) -> list[_Pool]:
    out = []
    for p in patches:
        if p.payload_kind != kind:
            raise ValueError(f"patch payload {p.payload_kind!r} does not match the update mode ({kind!r})")
        if p.items:  # notes-only placeholder patches carry no body edits
            out.append(_Pool(tuple(p.items), p.reasoning, max((_level_of(i) for i in p.items), default=0)))
    return out


def merge_patches(
    skill: str,
    failure_patches: Sequence[RawPatch],
    success_patches: Sequence[RawPatch],
    *,
    model: RoleModel,
    update_mode: str = "patch",
    merge_batch_size: int = 8,
    workers: int = 16,
    meta_skill_text: str = "",
    cache: Slot | None = None,
    max_output_tokens: int | None = None,
) -> MergeResult:
    """Merge the step's raw patches into one list of update items.

    Args:
        skill: The current skill.
        failure_patches: Failure-analyst patches (a probe patch belongs here too).
        success_patches: Success-analyst patches.
        model: The optimizer.
        update_mode: The skill update mode (selects the ``merge_*`` prompt variant).
        merge_batch_size: Patches per merge call; values below 2 are clamped to 2 (a group
            of one can never shrink the list: the reference looped forever, issue #194).
        workers: Concurrent merge calls within a level.
        meta_skill_text: The active meta skill (bare or wrapped), prepended to every call.
        cache: Where the result is kept (``merged_patch.json``); reused when it was made from
            the same inputs.
        max_output_tokens: Completion budget per call (16384; 64000 in full-rewrite mode).

    Returns:
        The merged items and counters. Patches without items are ignored.

    Raises:
        ValueError: a patch's payload kind does not match ``update_mode``.
    """
    mode = normalize_update_mode(update_mode)
    kind = payload_key(mode)
    group_size = max(2, int(merge_batch_size))
    fail_pools, succ_pools = _pools(failure_patches, kind), _pools(success_patches, kind)
    key = cache_key(
        "merge",
        _CACHE_VERSION,
        {
            "skill": skill,
            "mode": mode,
            "group": group_size,
            "meta": meta_skill_text,
            "fail": [[item_to_dict(i) for i in p.items] for p in fail_pools],
            "succ": [[item_to_dict(i) for i in p.items] for p in succ_pools],
        },
    )
    cached = _load(cache.load(key), kind) if cache is not None else None
    if cached is not None:
        return cached
    tokens = max_output_tokens or (64000 if mode == "full_rewrite_minibatch" else 16384)
    merger = _Merger(
        skill, model=model, mode=mode, meta=meta_skill_text, workers=workers, max_output_tokens=tokens
    )
    merged = merger.both_sides(fail_pools, succ_pools, group_size)
    result = MergeResult(
        items=merged.items,
        reasoning=merged.reasoning,
        n_calls=merger.counter.calls,
        n_fallbacks=len(merger.counter.reasons),
        levels=max((_level_of(i) for i in merged.items), default=0),
        payload_kind=kind,
        fallback_reasons=tuple(merger.counter.reasons),
    )
    if cache is not None:
        cache.save(key, result.to_dict())
    return result


def _load(data: Mapping[str, Any] | None, kind: PayloadKind) -> MergeResult | None:
    if data is None:
        return None
    raw = data.get(kind)
    if not isinstance(raw, list):
        return None
    items: tuple[Item, ...] = (
        tuple(Edit.from_dict(i) for i in raw) if kind == "edits" else tuple(dict(i) for i in raw)
    )
    return MergeResult(
        items=items,
        reasoning=str(data.get("reasoning", "")),
        n_calls=0,
        n_fallbacks=int(data.get("n_fallbacks", 0)),
        levels=int(data.get("levels", 0)),
        payload_kind=kind,
        fallback_reasons=tuple(str(r) for r in data.get("fallback_reasons", ())),
    )
