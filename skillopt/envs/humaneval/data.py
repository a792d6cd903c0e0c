"""HumanEval splits: the vendored sample, or ../shared/datasets/humaneval (one file of 164
problems, carved into train 40% / val 20% / test 40%, seeded by split_seed)."""

from __future__ import annotations

from pathlib import Path

from skillopt.envs._code.data import CodeData
from skillopt.envs._code.items import humaneval_item
from skillopt.envs._qa.data import Carve

__all__ = ["HumanEvalData"]

_HERE = Path(__file__).parent


class HumanEvalData(CodeData):
    """HumanEval splits."""

    env = "humaneval"
    sample_root = _HERE / "data" / "sample"
    initial_skill_path = _HERE / "skills" / "initial.md"
    raw_item = staticmethod(humaneval_item)
    layouts = (
        {
            "train": Carve("HumanEval", 0.0, 0.4),
            "val": Carve("HumanEval", 0.4, 0.6),
            "test": Carve("HumanEval", 0.6, 1.0),
        },
    )
