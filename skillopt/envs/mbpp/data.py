"""MBPP splits: the vendored sample, or ../shared/datasets/mbpp (sanitized-mbpp.json, split by
task_id: the official split)."""

from __future__ import annotations

from pathlib import Path

from skillopt.envs._code.data import MBPPSplitData
from skillopt.envs._code.items import mbpp_item

__all__ = ["MBPPData"]

_HERE = Path(__file__).parent


class MBPPData(MBPPSplitData):
    """MBPP splits."""

    env = "mbpp"
    sample_root = _HERE / "data" / "sample"
    initial_skill_path = _HERE / "skills" / "initial.md"
    raw_item = staticmethod(mbpp_item)
