"""The env's splits: the vendored sample, or a data root of split files."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skillopt.envs._qa.data import QAData
from skillopt.envs._template.items import CATEGORIES, item_from_raw
from skillopt.envs._template.spec import TemplateOptions
from skillopt.envs.base import TaskItem

__all__ = ["TemplateData"]

_HERE = Path(__file__).parent


class TemplateData(QAData):
    """Splits of the template env."""

    env = "template"
    sample_root = _HERE / "data" / "sample"
    initial_skill_path = _HERE / "skills" / "initial.md"
    categories = CATEGORIES

    def make_item(self, raw: Mapping[str, Any], *, position: int, source: str) -> TaskItem:
        options = self.options if isinstance(self.options, TemplateOptions) else TemplateOptions()
        return item_from_raw(raw, options=options, position=position, source=source)
