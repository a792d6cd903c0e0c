"""MATH-500 splits: the vendored sample, or ../shared/datasets/math500 (one file of 500
problems, carved into train 20% / val 10% / test 70%, seeded by split_seed)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skillopt.envs._qa.data import Carve, QAData
from skillopt.envs.base import TaskItem
from skillopt.envs.math500.items import CATEGORIES, item_from_raw
from skillopt.envs.math500.spec import Math500Options

__all__ = ["Math500Data"]

_HERE = Path(__file__).parent


class Math500Data(QAData):
    """MATH-500 splits."""

    env = "math500"
    sample_root = _HERE / "data" / "sample"
    initial_skill_path = _HERE / "skills" / "initial.md"
    categories = CATEGORIES
    layouts = (
        {"train": Carve("test", 0.0, 0.2), "val": Carve("test", 0.2, 0.3), "test": Carve("test", 0.3, 1.0)},
    )

    def make_item(self, raw: Mapping[str, Any], *, position: int, source: str) -> TaskItem:
        options = self.options if isinstance(self.options, Math500Options) else Math500Options()
        return item_from_raw(raw, options=options, position=position, source=source)
