"""What the sleep env declares (keep this module cheap: config validation imports it)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from skillopt.envs.base import AgentSpec, EnvOptions, EnvSpec

__all__ = ["MANIFEST", "SPEC", "SleepOptions", "data_folder"]

#: The manifest ``skillopt sleep mine`` writes beside the split files' folder.
MANIFEST = "mined.json"


class SleepOptions(EnvOptions):
    """``env.options`` of the sleep env."""

    kinds: tuple[Literal["command", "tests", "file", "answer"], ...] = ("command", "tests", "file", "answer")
    """Reference kinds to load (others are left out of every split), e.g. ``[answer]`` for the
    ``qa`` agent, which can only be graded on answers."""


def data_folder(root: Path) -> Path:
    """The folder of split files for a data root: a mine's output folder (with ``mined.json``)
    keeps them in ``data/``; any other folder is taken as it is."""
    if (root / MANIFEST).is_file() and (root / "data").is_dir():
        return root / "data"
    return root


def _data_root_problem(root: Path, split_mode: str) -> str:
    folder = data_folder(root)
    if folder.is_dir() and any(p.is_file() and p.suffix in (".json", ".jsonl") for p in folder.iterdir()):
        return ""
    return (
        f"no mined tasks in {root}: point env.data_root at a folder `skillopt sleep mine` wrote "
        "(.skillopt/sleep/mined/<timestamp>/), or run `skillopt sleep mine` first"
    )


SPEC = EnvSpec(
    name="sleep",
    summary="tasks mined from your own agent sessions (skillopt sleep mine), checked by their reference",
    agents=(
        AgentSpec(
            name="claude_code_exec",
            sandbox="gateway",
            api="anthropic",
            summary="Claude Code in the container; command/tests/file references checked there afterwards",
        ),
        AgentSpec(
            name="codex_exec",
            sandbox="gateway",
            api="openai",
            summary="Codex CLI in the container; command/tests/file references checked there afterwards",
        ),
        AgentSpec(
            name="qa", sandbox="none", summary="answer tasks only (env.options.kinds=[answer]); no container"
        ),
    ),
    default_agent="qa",  # see env.py: the `sleep_cli` config picks claude_code_exec
    environment="skillopt.envs.sleep.env:SleepEnv",
    data="skillopt.envs.sleep.data:SleepData",
    options=SleepOptions,
    raw_item="skillopt.envs.sleep.items:item_from_raw",
    data_root_problem=_data_root_problem,
)
