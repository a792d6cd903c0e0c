"""LiveMathematicianBench splits: the vendored sample, or ../shared/datasets/livemathematicianbench
(train 35 / val 18 / test 124, the SkillOpt paper split)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skillopt.envs._qa.data import QAData
from skillopt.envs.base import TaskItem
from skillopt.envs.livemathematicianbench.items import item_from_raw
from skillopt.envs.livemathematicianbench.spec import LiveMathOptions

__all__ = ["LiveMathData"]

_HERE = Path(__file__).parent


class LiveMathData(QAData):
    """LiveMathematicianBench splits; categories are the items' first theorem types."""

    env = "livemathematicianbench"
    sample_root = _HERE / "data" / "sample"
    initial_skill_path = _HERE / "skills" / "initial.md"
    categories = ()

    def make_item(self, raw: Mapping[str, Any], *, position: int, source: str) -> TaskItem:
        options = self.options if isinstance(self.options, LiveMathOptions) else LiveMathOptions()
        return item_from_raw(raw, options=options, position=position, source=source)
