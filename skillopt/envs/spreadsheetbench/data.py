"""SpreadsheetBench data as the trainer sees it: splits of task items."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from skillopt.envs.base import TaskItem
from skillopt.envs.spreadsheetbench.loader import (
    PACKAGE_SAMPLE_ROOT,
    SpreadsheetBenchData,
    TaskRecord,
    default_data_root,
)
from skillopt.envs.spreadsheetbench.spec import SpreadsheetBenchOptions
from skillopt.errors import ConfigError

__all__ = ["INITIAL_SKILL", "SpreadsheetBenchEnvData"]

INITIAL_SKILL = Path(__file__).parent / "skills" / "initial.md"


class SpreadsheetBenchEnvData:
    """Splits from ``splits.json`` (``split_mode: split_file``) or a seeded ratio split.

    Args:
        data_root: folder with dataset.json/splits.json/spreadsheet ("" = the vendored data
            that ``options.sample`` names).
        split_mode: ``split_file`` or ``ratio``.
        options: ``env.options`` (validated).
    """

    def __init__(
        self,
        data_root: str = "",
        *,
        split_mode: str = "split_file",
        split_ratio: str = "2:1:7",
        split_seed: int = 42,
        options: SpreadsheetBenchOptions | None = None,
    ) -> None:
        self.options = options or SpreadsheetBenchOptions()
        if data_root:
            root = Path(data_root)
        else:
            root = PACKAGE_SAMPLE_ROOT if self.options.sample == "package" else default_data_root()
        self.data = SpreadsheetBenchData(root)
        self.split_mode = split_mode
        self._ratio = self.data.ratio_split(split_ratio, split_seed) if split_mode == "ratio" else None
        if split_mode not in ("split_file", "ratio"):
            raise ConfigError(f"env.split_mode must be split_file or ratio, got {split_mode!r}")

    def _records(self, name: str) -> list[TaskRecord]:
        if self._ratio is None:
            return self.data.split(name)
        canonical = {
            "train": "train",
            "val": "val",
            "valid_seen": "val",
            "selection": "val",
            "test": "test",
            "valid_unseen": "test",
        }
        if name not in canonical:
            raise ConfigError(f"unknown split {name!r}; use train, val or test")
        return self._ratio[canonical[name]]

    def split(self, name: str) -> list[TaskItem]:
        mode = self.options.grading.mode
        items = []
        for record in self._records(name):
            task, grading = self.data.build_task(record)
            grading = replace(grading, attributes={**dict(grading.attributes), "grading_mode": mode})
            items.append(TaskItem(task=task, grading=grading, task_type=record.task_type))
        return items

    def task_types(self) -> list[str]:
        return ["cell_level", "sheet_level"]

    def describe(self) -> dict:
        info: dict[str, Any] = {
            "root": str(self.data.root),
            "split_mode": self.split_mode,
            "summary": self.data.describe(),
            "grading_mode": self.options.grading.mode,
        }
        if self._ratio is not None:
            info["ratio_counts"] = {k: len(v) for k, v in self._ratio.items()}
        return info

    def initial_skill(self) -> str:
        return INITIAL_SKILL.read_text(encoding="utf-8")
