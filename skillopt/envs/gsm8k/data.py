"""GSM8K splits: the vendored sample, or ../shared/datasets/gsm8k (train 7473 / test 1319: its
train file is carved into train 95% / val 5%, seeded by split_seed)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skillopt.envs._qa.data import Carve, QAData
from skillopt.envs.base import TaskItem
from skillopt.envs.gsm8k.items import CATEGORIES, item_from_raw
from skillopt.envs.gsm8k.spec import GSM8KOptions

__all__ = ["GSM8KData"]

_HERE = Path(__file__).parent


class GSM8KData(QAData):
    """GSM8K splits."""

    env = "gsm8k"
    sample_root = _HERE / "data" / "sample"
    initial_skill_path = _HERE / "skills" / "initial.md"
    categories = CATEGORIES
    layouts = ({"train": Carve("train", 0.0, 0.95), "val": Carve("train", 0.95, 1.0), "test": "test"},)

    def make_item(self, raw: Mapping[str, Any], *, position: int, source: str) -> TaskItem:
        options = self.options if isinstance(self.options, GSM8KOptions) else GSM8KOptions()
        return item_from_raw(raw, options=options, position=position, source=source)
