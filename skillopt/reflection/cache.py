"""The stage cache seam: where an optimizer stage keeps what it must not ask for twice.

A resumed run must reach the decisions it would have reached uninterrupted, but a real model
answers differently each time it is asked. So every optimizer answer a stage builds on is kept
once it succeeded, and a rerun of the stage (after a crash, a stop, ``--resume``) reuses it.
The stages here never touch files: the trainer hands them a :class:`StageCache` (its run
directory, ``skillopt.trainer.rundir``), and :class:`NoCache` when nothing is to be kept.

Entries are *named* (a file under the stage's folder: ``merged_patch.json``,
``patches/minibatch_fail_000.json``) and *keyed* by a fingerprint of everything the answer
was made from (:func:`cache_key`): an entry made from other inputs (another skill, another
pool, an older format) is a miss, never a wrong answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from skillopt.reflection._common import fingerprint

__all__ = ["NoCache", "Slot", "StageCache", "cache_key", "memoized"]

T = TypeVar("T")


class StageCache(Protocol):
    """Named, keyed JSON entries of one stage (implemented by the trainer's run directory)."""

    def load(self, name: str, key: str) -> Mapping[str, Any] | None:
        """The entry ``name`` when it was saved with ``key``; ``None`` otherwise (missing,
        unreadable, made from other inputs)."""
        ...

    def save(self, name: str, key: str, payload: Mapping[str, Any]) -> None:
        """Keep ``payload`` as entry ``name`` under ``key`` (atomically: a crash leaves the old
        entry or the new one)."""
        ...


class NoCache:
    """Keeps nothing: every call computes."""

    def load(self, name: str, key: str) -> Mapping[str, Any] | None:
        return None

    def save(self, name: str, key: str, payload: Mapping[str, Any]) -> None:
        return None


@dataclass(frozen=True, slots=True)
class Slot:
    """One named entry of a :class:`StageCache` (the stages with a single cached answer take
    one, so the trainer's run directory decides the file name)."""

    cache: StageCache
    name: str

    def load(self, key: str) -> Mapping[str, Any] | None:
        return self.cache.load(self.name, key)

    def save(self, key: str, payload: Mapping[str, Any]) -> None:
        self.cache.save(self.name, key, payload)


def cache_key(kind: str, version: int, inputs: Any) -> str:
    """The key of an entry: the stage kind, its format version and a fingerprint of its inputs
    (bump ``version`` when the payload's shape changes: older entries then miss)."""
    return f"{kind}/v{version}/{fingerprint(inputs)}"


def memoized(
    slot: Slot | None,
    key: str,
    compute: Callable[[], T],
    *,
    encode: Callable[[T], Mapping[str, Any]],
    decode: Callable[[Mapping[str, Any]], T],
    keep: Callable[[T], bool] = lambda _: True,
) -> T:
    """``decode(entry)`` when ``slot`` holds an entry under ``key``, else ``compute()``, kept
    when ``keep(result)`` (a failed answer is not kept: a rerun asks again). ``slot=None``
    always computes.

    An entry that no longer decodes (``KeyError``, ``TypeError``, ``ValueError``) counts as a
    miss.
    """
    if slot is None:
        return compute()
    entry = slot.load(key)
    if entry is not None:
        try:
            return decode(entry)
        except (KeyError, TypeError, ValueError):
            pass
    out = compute()
    if keep(out):
        slot.save(key, encode(out))
    return out
