"""Checksums of the data a run used: part of the environment manifest in every summary, so two
runs (or a run and its resume) can be shown to have seen exactly the same tasks and gold."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from skillopt.envs.base import TaskItem

__all__ = ["data_manifest", "items_checksum"]


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def items_checksum(items: Sequence[TaskItem]) -> str:
    """SHA-256 over everything of the items that decides a score: ids, instructions and
    attributes, and every input and gold file (by name and content hash), in order."""
    h = hashlib.sha256()
    for it in items:
        h.update(
            _canonical([it.task.id, it.task.instruction, dict(it.task.attributes), it.task_type]).encode()
        )
        for side in (it.task.cases, it.grading.cases):
            for case in side:
                for f in case.files:
                    h.update(_canonical([case.name, f.name, hashlib.sha256(f.content).hexdigest()]).encode())
        h.update(_canonical(dict(it.grading.attributes)).encode())
    return "sha256:" + h.hexdigest()


def data_manifest(splits: Mapping[str, Sequence[TaskItem]]) -> dict[str, dict[str, Any]]:
    """``{split: {"n": items, "sha256": items_checksum}}`` for the splits a run used."""
    return {name: {"n": len(items), "sha256": items_checksum(items)} for name, items in splits.items()}
