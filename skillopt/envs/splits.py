"""Split helpers shared by every env: split-name aliases, ratio splits, seeded carving.

Usage::

    counts = largest_remainder(256, parse_ratio("2:1:7"))      # [51, 26, 179]
    parts = ratio_split(sorted_ids, "2:1:7", seed=42)           # {"train": [...], "val": [...], "test": [...]}
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = [
    "FILE_ALIASES",
    "RATIO_NAMES",
    "SPLIT_ALIASES",
    "carve",
    "largest_remainder",
    "parse_ratio",
    "pick_split",
    "ratio_split",
]

#: The three splits of a ratio split, in ``train:val:test`` order.
RATIO_NAMES = ("train", "val", "test")

#: Canonical split names and the names other code uses for them (SkillOpt: valid_seen is the
#: selection split, valid_unseen the test split).
SPLIT_ALIASES: Mapping[str, str] = {
    "train": "train",
    "val": "val",
    "valid_seen": "val",
    "selection": "val",
    "test": "test",
    "valid_unseen": "test",
}

#: :data:`SPLIT_ALIASES` plus the names benchmark releases give their split files (HotpotQA's
#: validation file is ``dev``).
FILE_ALIASES: Mapping[str, str] = {**SPLIT_ALIASES, "dev": "val", "valid": "val", "validation": "val"}


def largest_remainder(n: int, weights: Sequence[float | int | Fraction]) -> list[int]:
    """Split ``n`` items by ``weights`` into integer counts that sum to ``n``.

    Each part gets the floor of its exact quota; the leftover items go to the largest
    fractional remainders, ties broken by the larger weight, then by position.

    Raises:
        ValueError: a weight is negative or all are zero.
    """
    exact = [Fraction(w) for w in weights]
    if any(w < 0 for w in exact) or sum(exact) == 0:
        raise ValueError(f"weights must be >= 0 and not all zero, got {list(weights)}")
    total = sum(exact)
    quotas = [n * w / total for w in exact]
    counts = [int(q) for q in quotas]  # floor: quotas are >= 0
    order = sorted(range(len(exact)), key=lambda i: (-(quotas[i] - counts[i]), -exact[i], i))
    for i in order[: n - sum(counts)]:
        counts[i] += 1
    return counts


def parse_ratio(ratio: str | Sequence[float | int]) -> list[Fraction]:
    parts: Sequence[Any] = ratio.split(":") if isinstance(ratio, str) else ratio
    try:
        weights = [Fraction(str(p).strip()) for p in parts]
    except (ValueError, ZeroDivisionError) as exc:
        raise ValueError(f"ratio must look like '2:1:7', got {ratio!r}") from exc
    if len(weights) != len(RATIO_NAMES):
        raise ValueError(f"ratio needs {len(RATIO_NAMES)} parts (train:val:test), got {ratio!r}")
    return weights


def ratio_split(ids: Sequence[str], ratio: str | Sequence[float | int], seed: int) -> dict[str, list[str]]:
    """A seeded train/val/test split of ``ids`` by ``ratio``.

    ``ids`` are sorted, shuffled with ``random.Random(seed)``, then cut into counts from
    :func:`largest_remainder`, so the result does not depend on the order they came in.

    Raises:
        ValueError: ``ratio`` is not three non-negative numbers, not all zero.
    """
    counts = largest_remainder(len(ids), parse_ratio(ratio))
    order = sorted(ids)
    random.Random(seed).shuffle(order)
    out: dict[str, list[str]] = {}
    start = 0
    for name, count in zip(RATIO_NAMES, counts, strict=True):
        out[name] = order[start : start + count]
        start += count
    return out


def carve(ids: Sequence[str], start: float, end: float, *, seed: int, salt: str = "") -> list[str]:
    """The ``[start, end)`` fraction of ``ids`` after a seeded shuffle (``Random(f"{seed}:{salt}")``).

    Carves of the same ``ids``/``seed``/``salt`` with adjacent bounds (``0-0.5``, ``0.5-1``)
    are disjoint and together hold every id; the result keeps the input order.
    """
    if not 0.0 <= start <= end <= 1.0:
        raise ValueError(f"carve bounds must satisfy 0 <= start <= end <= 1, got {start}, {end}")
    order = list(ids)
    random.Random(f"{seed}:{salt}").shuffle(order)
    n = len(order)
    chosen = set(order[round(start * n) : round(end * n)])
    return [i for i in ids if i in chosen]


def pick_split(splits: Mapping[str, list[T]], name: str, *, env: str, root: object) -> list[T]:
    """The items of split ``name`` (an alias such as ``valid_seen``/``selection``/``dev`` names
    val) from an env's ``splits``, as a new list.

    Raises:
        ConfigError: unknown split (the message lists the available ones).
    """
    from skillopt.errors import ConfigError

    canonical = FILE_ALIASES.get(name, name)
    if canonical not in splits:
        raise ConfigError(f"unknown split {name!r} for {env} under {root}; available: {', '.join(splits)}")
    return list(splits[canonical])
