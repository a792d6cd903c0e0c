"""Controller-side data of the code-generation envs: the question-answering loader
(:class:`~skillopt.envs._qa.data.QAData`: split files under a data root, the vendored sample)
with the env's raw-item function, plus MBPP's official split by ``task_id``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from skillopt.envs._code.items import CATEGORIES
from skillopt.envs._qa.data import QAData
from skillopt.envs.base import TaskItem

__all__ = ["CodeData", "MBPPSplitData"]


class CodeData(QAData):
    """Splits of a code env; subclasses set :attr:`raw_item` and the :class:`QAData` fields."""

    raw_item: ClassVar[Callable[..., TaskItem]]
    categories = CATEGORIES

    def make_item(self, raw: Mapping[str, Any], *, position: int, source: str) -> TaskItem:
        return type(self).raw_item(raw, options=self.options, position=position, source=source)


class MBPPSplitData(CodeData):
    """MBPP: with ``train``/``val``/``test`` files (the vendored sample) those; with the one
    release file (``sanitized-mbpp.json``) the official split by ``task_id`` (11-510 test,
    511-600 validation, 601-974 train; 1-10, the few-shot prompt tasks, are in no split)."""

    def _split_file(self, files: Mapping[str, Path]) -> dict[str, list[TaskItem]]:
        if {"train", "val", "test"} <= set(files):
            return super()._split_file(files)
        out: dict[str, list[TaskItem]] = {"train": [], "val": [], "test": []}
        for stem, items in self._items.items():
            for item in items.values():
                split = str(item.task.attributes.get("source_split", ""))
                if split in out:
                    out[split].append(item)
            self.layout = {name: f"{stem} by task_id (official MBPP split)" for name in out}
        return out
