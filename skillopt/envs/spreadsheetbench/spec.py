"""What SpreadsheetBench declares: agents, options, where its two sides live."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from skillopt.envs.base import AgentSpec, EnvOptions, EnvSpec

__all__ = ["SPEC", "GradingMode", "GradingOptions", "Sample", "SpreadsheetBenchOptions"]

#: How answer cells are graded (see :mod:`.official` and the env's README).
GradingMode = Literal["official", "corrected"]
#: The vendored data an empty ``env.data_root`` means (see :class:`SpreadsheetBenchOptions`).
Sample = Literal["benchmark", "package"]


class GradingOptions(BaseModel):
    """``env.options.grading``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: GradingMode = "corrected"
    """``corrected``: our grader, with the official grader's errors fixed (the env's README lists
    each fix with its task ids); ``official``: the official grader's verdicts exactly, for
    numbers comparable to published results."""


class SpreadsheetBenchOptions(EnvOptions):
    """``env.options`` of SpreadsheetBench."""

    grading: GradingOptions = GradingOptions()
    sample: Sample = "benchmark"
    """The vendored data used when ``env.data_root`` is empty: ``benchmark``, 18 real
    SpreadsheetBench tasks (``data/sample``); ``package``, 10 synthetic tasks that only a skill
    package solves, through a reference file or a helper script (``data/package``; the offline
    simulation's package demo, ``spreadsheetbench_package_demo``)."""


def _data_root_problem(root: Path, split_mode: str) -> str:
    if split_mode == "split_file" and not (root / "splits.json").is_file():
        return (
            f"no splits.json in {root} (env.split_mode is split_file): write a data root with one by "
            f"`skillopt data convert --from spreadsheetbench-release {root} NEW_ROOT`, add one, or set "
            "env.split_mode=ratio"
        )
    return ""


SPEC = EnvSpec(
    name="spreadsheetbench",
    summary="spreadsheet manipulation on real xlsx tasks, graded by answer-cell values",
    agents=(
        AgentSpec(
            name="codegen_single", sandbox="isolated", summary="one script, one model call (official setting)"
        ),
        AgentSpec(name="codegen_multi", sandbox="isolated", summary="script, run, fix with feedback"),
        AgentSpec(name="react", sandbox="isolated", summary="bash + write_file tools in the container"),
        AgentSpec(name="codex_exec", sandbox="gateway", api="openai", summary="Codex CLI in the container"),
        AgentSpec(
            name="claude_code_exec",
            sandbox="gateway",
            api="anthropic",
            summary="Claude Code in the container",
        ),
    ),
    default_agent="codegen_multi",
    environment="skillopt.envs.spreadsheetbench.env:SpreadsheetBenchEnv",
    data="skillopt.envs.spreadsheetbench.data:SpreadsheetBenchEnvData",
    options=SpreadsheetBenchOptions,
    data_root_problem=_data_root_problem,
    grader_modules=("skillopt.envs.spreadsheetbench.evaluator",),
)
