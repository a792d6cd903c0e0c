"""Versions of the run directory's records, and reading an older one.

Every record the run directory holds says which version of its shape it is (a
``schema_version`` key, ``version`` in the two files that had one first); a record without one
is version 0, the shape before versions. Reading a record checks its version: an older one is
brought to the current shape by the record's own migration steps (each one from version ``n``
to ``n + 1``), a newer one is refused, since this skillopt cannot know what it means::

    data = upgrade(raw, key="schema_version", current=1, steps={0: outcome_from_retryable})

The table of every file, its model and its versions is in :mod:`skillopt.trainer.rundir`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["Migration", "RecordError", "json_type", "record_version", "upgrade"]

#: One migration step: a record of version ``n`` (a copy, free to change) → version ``n + 1``.
Migration = Callable[[dict[str, Any]], dict[str, Any]]


class RecordError(ValueError):
    """A file (or line) of a run directory that is there but is not the record it should be:
    not JSON, not the record's shape, or written by a newer skillopt. The message says which,
    as what the file is or has ("is not valid JSON (...)", "is not a step record (no 'step')"),
    so that a reader can put the file's name before it."""


def record_version(data: Mapping[str, Any], *, key: str, current: int) -> int:
    """The version ``data`` says it is (``0`` when it says none).

    Raises:
        RecordError: the version is not a whole number, or newer than ``current`` (the message
            says to upgrade skillopt to read it).
    """
    version = data.get(key, 0)
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise RecordError(f"has {key} {version!r}, not a version number")
    if version > current:
        raise RecordError(
            f"has {key} {version}: written by a newer skillopt (this one reads up to {current}); "
            "upgrade skillopt to read it"
        )
    return version


def upgrade(
    data: Any, *, key: str, current: int, steps: Mapping[int, Migration] | None = None
) -> dict[str, Any]:
    """``data`` in the shape of version ``current``: each migration step from its own version
    on applied in turn (a version without a step has the next one's keys), ``key`` set.

    Args:
        data: the parsed JSON of one record.
        key: the key holding the version.
        current: the version this skillopt writes.
        steps: version ``n`` → the migration to ``n + 1``.

    Raises:
        RecordError: ``data`` is not a JSON object, or its version is unreadable or newer (the
            message says what the record is or has: "holds a JSON list, not a JSON dict").
    """
    if not isinstance(data, Mapping):
        raise RecordError(f"holds a JSON {json_type(data)}, not a JSON dict")
    version = record_version(data, key=key, current=current)
    out = dict(data)
    for n in range(version, current):
        step = (steps or {}).get(n)
        if step is not None:
            out = step(out)
    out[key] = current
    return out


def json_type(value: Any) -> str:
    """The JSON name of ``value``'s type, as a person reading the file calls it."""
    if value is None:
        return "null"
    return {bool: "bool", int: "number", float: "number", str: "string", list: "list", dict: "dict"}.get(
        type(value), "value"
    )
