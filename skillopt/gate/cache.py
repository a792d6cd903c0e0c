"""The selection cache: a skill version's selection measurements by its tree hash
(:attr:`~skillopt.types.SkillVersion.tree_sha256`) and the protocol that took them, so an
unchanged version is never rolled out again.

* :func:`gate_key`: ``<hash>`` for one rollout per item, ``<hash>/repeats=k`` for the
  ``repeat`` gate's ``k``; :func:`round_key`: ``<hash>/round=k``, the ``sequential`` gate's
  later rounds; :func:`round_draws`: a skill's later-round draws pooled per item.
* :class:`GateCache`: the entries, and their JSON form (kept in the run
  state, ``gate_cache``); :class:`GateCacheEntry`: one measurement.
* :func:`rekey_by_tree`: a cache written before versions (keyed by the hash of each skill's
  packed text, 16 hex digits) keyed by tree hashes, when such a run resumes.

Usage::

    cache = GateCache()
    cache.put(gate_key(skill.tree_sha256), 0.6, 0.7)
    cache.get(gate_key(skill.tree_sha256))       # GateCacheEntry(hard=0.6, soft=0.7, items={})
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from skillopt.errors import SkillOptError
from skillopt.types import SkillVersion, skill_hash

__all__ = ["GateCache", "GateCacheEntry", "gate_key", "rekey_by_tree", "round_draws", "round_key"]


def gate_key(skill_hash: str, repeats: int = 1) -> str:
    """The gate cache's key of a skill measured with ``repeats`` rollouts per item (a
    measurement with another protocol is another measurement)."""
    return skill_hash if repeats <= 1 else f"{skill_hash}/repeats={repeats}"


def round_key(skill_hash: str, round_no: int) -> str:
    """The gate cache's key of round ``round_no`` of the ``sequential`` gate (one rollout per
    item): round 1 is the one-rollout measurement every mode shares (:func:`gate_key`), round
    ``k`` another independent one (``<hash>/round=k``)."""
    return gate_key(skill_hash) if round_no <= 1 else f"{skill_hash}/round={round_no}"


def round_draws(
    cache: GateCache, skill_hash: str
) -> tuple[dict[str, list[float]], dict[str, list[float]], int]:
    """A skill's later-round draws of the ``sequential`` gate, per item in the order they were
    taken (hard scores, soft scores), and the next free round number: every ``round_key``
    entry of the skill, by its number (round 2 first). Any decision may use them, each once:
    they are independent rollouts of the skill on the item, whichever decision took them."""
    prefix = f"{skill_hash}/round="
    batches = sorted(
        int(k[len(prefix) :]) for k in cache if k.startswith(prefix) and k[len(prefix) :].isdigit()
    )
    hard: dict[str, list[float]] = {}
    soft: dict[str, list[float]] = {}
    for b in batches:
        entry = cache.get(round_key(skill_hash, b))
        assert entry is not None
        for item, h in entry.items.items():
            hard.setdefault(item, []).append(float(h))
            soft.setdefault(item, []).append(float(entry.soft_items.get(item, h)))
    return hard, soft, (batches[-1] + 1 if batches else 2)


@dataclass(frozen=True, slots=True)
class GateCacheEntry:
    """Selection scores of one skill; ``items`` and ``soft_items`` map item id → its hard and
    soft score (the mean over ``repeats`` rollouts) when recorded, and ``n_infra`` counts the
    rows lost to infrastructure (left out of the means; a cache hit must carry it, or it
    would bypass the gate's infrastructure guard)."""

    hard: float
    soft: float
    items: Mapping[str, float] = field(default_factory=dict)
    n_infra: int = 0
    soft_items: Mapping[str, float] = field(default_factory=dict)
    repeats: int = 1


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(float(value)):
        raise SkillOptError(f"gate cache: {what} must be a number, got {value!r}")
    return float(value)


class GateCache:
    """Selection scores by key (:func:`gate_key` of a version's tree hash).

    Usage::

        cache = GateCache()
        cache.put(gate_key(skill.tree_sha256), 0.6, 0.7)
        cache.get(gate_key(skill.tree_sha256))     # GateCacheEntry(hard=0.6, soft=0.7, items={})
        GateCache.from_json(cache.to_json()) == cache
    """

    __slots__ = ("_entries",)

    def __init__(self, entries: Mapping[str, GateCacheEntry] | None = None) -> None:
        self._entries: dict[str, GateCacheEntry] = dict(entries or {})

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GateCache) and self._entries == other._entries

    __hash__ = None  # type: ignore[assignment]  # mutable

    def get(self, key: str) -> GateCacheEntry | None:
        """The entry for a skill hash, or ``None``."""
        return self._entries.get(key)

    def put(
        self,
        key: str,
        hard: float,
        soft: float,
        items: Mapping[str, float] | None = None,
        *,
        n_infra: int = 0,
        soft_items: Mapping[str, float] | None = None,
        repeats: int = 1,
    ) -> None:
        """Record (or overwrite) the scores under a :func:`gate_key`."""
        self._entries[key] = GateCacheEntry(
            float(hard), float(soft), dict(items or {}), int(n_infra), dict(soft_items or {}), int(repeats)
        )

    def put_entry(self, key: str, entry: GateCacheEntry) -> None:
        """Record a measurement taken under another key (the same skill behind a new hash)."""
        self._entries[key] = entry

    def to_json(self) -> str:
        """Serialise as ``{"version": 1, "entries": {key: {"hard", "soft", "items"?,
        "soft_items"?, "n_infra"?, "repeats"?}}}``."""
        entries: dict[str, Any] = {}
        for key, e in sorted(self._entries.items()):
            row: dict[str, Any] = {"hard": e.hard, "soft": e.soft}
            if e.items:
                row["items"] = dict(e.items)
            if e.soft_items:
                row["soft_items"] = dict(e.soft_items)
            if e.n_infra:
                row["n_infra"] = e.n_infra
            if e.repeats != 1:
                row["repeats"] = e.repeats
            entries[key] = row
        return json.dumps({"version": 1, "entries": entries}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> GateCache:
        """Parse :meth:`to_json` output; a flat ``{hash: [hard, soft]}`` map is accepted too.

        Raises:
            SkillOptError: Not JSON, or an entry without numeric hard/soft.
        """
        try:
            data = json.loads(text)
        except (TypeError, ValueError) as exc:
            raise SkillOptError(f"gate cache is not valid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise SkillOptError("gate cache must be a JSON object")
        raw = data.get("entries", {}) if "version" in data else data
        if not isinstance(raw, dict):
            raise SkillOptError("gate cache 'entries' must be an object")
        cache = cls()
        for key, row in raw.items():
            if isinstance(row, list | tuple) and len(row) == 2:
                cache.put(str(key), _number(row[0], "hard"), _number(row[1], "soft"))
            elif isinstance(row, dict):
                items, soft_items = row.get("items") or {}, row.get("soft_items") or {}
                if not isinstance(items, dict) or not isinstance(soft_items, dict):
                    raise SkillOptError(f"gate cache: items and soft_items of {key} must be objects")
                cache.put(
                    str(key),
                    _number(row.get("hard"), "hard"),
                    _number(row.get("soft"), "soft"),
                    {str(k): _number(v, f"item {k}") for k, v in items.items()},
                    n_infra=int(_number(row.get("n_infra", 0), "n_infra")),
                    soft_items={str(k): _number(v, f"item {k}") for k, v in soft_items.items()},
                    repeats=int(_number(row.get("repeats", 1), "repeats")),
                )
            else:
                raise SkillOptError(f"gate cache: entry {key} must be [hard, soft] or an object")
        return cache


#: A key of a selection cache written before versions: a packed text's 16-hex hash, then the
#: protocol (``/repeats=N``, ``/round=K``) if any.
_TEXT_KEY = re.compile(r"^([0-9a-f]{16})(/.*)?$")


def rekey_by_tree(
    cache: GateCache, texts: Iterable[str], version_of: Callable[[str], SkillVersion]
) -> GateCache:
    """``cache`` with the keys of a cache written before versions (the hash of a packed text)
    turned into the tree hash of the version each text stands for (``version_of``); ``texts``
    are the texts the run stored (read only when a key needs them). A key made from none of
    them is dropped: no version of the run can hit it. A cache keyed by tree hashes is returned
    as it is."""
    if not any(_TEXT_KEY.match(k) for k in cache):
        return cache
    trees: dict[str, str] = {}
    for text in texts:
        trees.setdefault(skill_hash(text), version_of(text).tree_sha256)
    out = GateCache()
    for key in cache:
        match = _TEXT_KEY.match(key)
        entry = cache.get(key)
        assert entry is not None
        if match is None:
            out.put_entry(key, entry)
        elif match.group(1) in trees:
            out.put_entry(trees[match.group(1)] + (match.group(2) or ""), entry)
    return out
