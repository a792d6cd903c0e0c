"""HotpotQA splits: the vendored sample, or ../shared/datasets/hotpotqa (dev 100 / test 500,
hard level: dev is carved into train 60% / val 40%, seeded by split_seed)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skillopt.envs._qa.data import Carve, QAData
from skillopt.envs.base import TaskItem
from skillopt.envs.hotpotqa.items import CATEGORIES, item_from_raw
from skillopt.envs.hotpotqa.spec import HotpotQAOptions

__all__ = ["HotpotQAData"]

_HERE = Path(__file__).parent


class HotpotQAData(QAData):
    """HotpotQA splits."""

    env = "hotpotqa"
    sample_root = _HERE / "data" / "sample"
    initial_skill_path = _HERE / "skills" / "initial.md"
    categories = CATEGORIES
    layouts = ({"train": Carve("dev", 0.0, 0.6), "val": Carve("dev", 0.6, 1.0), "test": "test"},)

    def make_item(self, raw: Mapping[str, Any], *, position: int, source: str) -> TaskItem:
        options = self.options if isinstance(self.options, HotpotQAOptions) else HotpotQAOptions()
        return item_from_raw(raw, options=options, position=position, source=source)
