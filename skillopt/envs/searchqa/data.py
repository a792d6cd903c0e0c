"""SearchQA splits: the vendored sample, or a data root such as ../shared/datasets/searchqa."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skillopt.envs._qa.data import Carve, QAData
from skillopt.envs.base import TaskItem
from skillopt.envs.searchqa.items import CATEGORIES, item_from_raw
from skillopt.envs.searchqa.spec import SearchQAOptions

__all__ = ["SearchQAData"]

_HERE = Path(__file__).parent


class SearchQAData(QAData):
    """SearchQA splits. The shared copy (the SkillOpt paper's train 400 / val 200) has no test
    file: its ``val.json`` is then carved in half into val and test (seeded by split_seed)."""

    env = "searchqa"
    sample_root = _HERE / "data" / "sample"
    initial_skill_path = _HERE / "skills" / "initial.md"
    categories = CATEGORIES
    layouts = ({"train": "train", "val": Carve("val", 0.0, 0.5), "test": Carve("val", 0.5, 1.0)},)

    def make_item(self, raw: Mapping[str, Any], *, position: int, source: str) -> TaskItem:
        options = self.options if isinstance(self.options, SearchQAOptions) else SearchQAOptions()
        return item_from_raw(raw, options=options, position=position, source=source)
