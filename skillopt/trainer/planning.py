"""Epoch and batch planning (reference §1.2): deterministic given the seed."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from skillopt.envs.base import TaskItem
from skillopt.errors import ConfigError

__all__ = ["Batch", "plan_epoch", "sample_items", "steps_per_epoch"]


@dataclass(frozen=True)
class Batch:
    index: int  # batch index within the epoch
    seed: int
    items: tuple[TaskItem, ...]


def steps_per_epoch(train_size: int, batch_size: int, accumulation: int) -> int:
    if train_size <= 0:
        raise ConfigError("the train split is empty; check env.data_root and the split settings")
    return math.ceil(train_size / (batch_size * accumulation))


def plan_epoch(
    items: Sequence[TaskItem], *, epoch: int, seed: int, batch_size: int, n_batches: int
) -> list[Batch]:
    """Shuffle the train items with ``Random(seed + epoch*1000)`` and cut consecutive batches;
    when slices run out (small sets with accumulation) a batch is refilled from a reshuffled
    copy. Batch seed = ``seed + epoch*1000 + index + 1``."""
    order = list(items)
    random.Random(seed + epoch * 1000).shuffle(order)
    batches = []
    for b in range(n_batches):
        chunk = order[b * batch_size : (b + 1) * batch_size]
        if not chunk:
            refill = list(items)
            random.Random(seed + epoch * 1000 + b + 1).shuffle(refill)
            chunk = refill[:batch_size]
        batches.append(Batch(index=b, seed=seed + epoch * 1000 + b + 1, items=tuple(chunk)))
    return batches


def sample_items(
    items: Sequence[TaskItem], n: int, seed: int, *, exclude: set[str] | None = None
) -> list[TaskItem]:
    """The first ``n`` items of a ``Random(seed)`` shuffle (optionally skipping some ids)."""
    order = [it for it in items if not exclude or it.id not in exclude]
    random.Random(seed).shuffle(order)
    return order[:n]
