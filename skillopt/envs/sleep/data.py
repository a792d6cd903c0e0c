"""The sleep env's splits: a folder ``skillopt sleep mine`` wrote, or the vendored sample.

``env.data_root`` may name the mine's output folder (``.skillopt/sleep/mined/<timestamp>/``,
which holds ``mined.json`` and ``data/``) or its ``data/`` folder; the split files are
``train.json``, ``val.json`` (the selection split, which the gate uses) and ``test.json``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skillopt.envs._qa.data import QAData
from skillopt.envs.base import EnvOptions, TaskItem
from skillopt.envs.sleep.items import CATEGORIES, item_from_raw
from skillopt.envs.sleep.spec import SleepOptions, data_folder

__all__ = ["SleepData"]

_HERE = Path(__file__).parent


class SleepData(QAData):
    """Splits of mined tasks (implements :class:`skillopt.envs.base.EnvData`)."""

    env = "sleep"
    sample_root = _HERE / "data" / "sample"
    initial_skill_path = _HERE / "skills" / "initial.md"
    categories = CATEGORIES

    def __init__(
        self,
        data_root: str = "",
        *,
        split_mode: str = "split_file",
        split_ratio: str = "2:1:7",
        split_seed: int = 42,
        options: EnvOptions | None = None,
    ) -> None:
        if data_root:
            data_root = str(data_folder(Path(data_root).expanduser()))
        super().__init__(
            data_root, split_mode=split_mode, split_ratio=split_ratio, split_seed=split_seed, options=options
        )

    def make_item(self, raw: Mapping[str, Any], *, position: int, source: str) -> TaskItem:
        return item_from_raw(raw, options=self._options(), position=position, source=source)

    def _options(self) -> SleepOptions:
        return self.options if isinstance(self.options, SleepOptions) else SleepOptions()

    def _load(self, path: Path, stem: str) -> dict[str, TaskItem]:
        kinds = self._options().kinds
        return {i: it for i, it in super()._load(path, stem).items() if it.task_type in kinds}
