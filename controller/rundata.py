"""The data a ``train`` or ``eval`` run is about to use: the start line that names it, and the
refusal of real models on an env's vendored sample unless asked for (``--allow-sample``,
``env.allow_sample``).

A vendored sample (``skillopt/envs/<env>/data/sample``, used when ``env.data_root`` is empty)
has a few items: enough for the demo and the tests, too few to measure a skill, and a run with
real models on it still costs money. The offline simulation is never refused, and the shipped
``*_demo`` configs set ``env.allow_sample: true``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from skillopt.config import Config
from skillopt.envs.base import EnvData
from skillopt.errors import ConfigError
from skillopt.trainer.state import RunMode

__all__ = ["RunData", "refuse_sample", "run_data"]


@dataclass(frozen=True, kw_only=True)
class RunData:
    """Where a run's items come from and how many each split holds (as the run caps them)."""

    env: str
    root: Path | None
    sample: bool
    counts: dict[str, int]

    def line(self) -> str:
        """``data <root> (the vendored sample): train 10, selection 5, test 3``."""
        where = str(self.root) if self.root is not None else "(the env's loader did not say)"
        sample = " (the vendored sample; set env.data_root for your data)" if self.sample else ""
        c = self.counts
        return f"data {where}{sample}: train {c['train']}, selection {c['selection']}, test {c['test']}"


def run_data(cfg: Config, data: EnvData) -> RunData:
    """The run's data as :class:`RunData` (selection and test capped by
    ``evaluation.sel_env_num``/``test_env_num``, as the trainer caps them).

    Raises:
        ConfigError: the env has no such split.
    """
    from skillopt.envs.datacheck import data_root_of, is_vendored_sample, split_counts

    root = data_root_of(data)
    e = cfg.evaluation
    return RunData(
        env=cfg.env.name,
        root=root,
        sample=root is not None and is_vendored_sample(cfg.env.name, root),
        counts=split_counts(data, sel_cap=e.sel_env_num, test_cap=e.test_env_num),
    )


def refuse_sample(cfg: Config, mode: RunMode, data: RunData, *, command: str) -> None:
    """Refuse real models on the vendored sample unless ``env.allow_sample``.

    Raises:
        ConfigError: what the run would do and the three ways on: your data, ``--allow-sample``,
            or the offline simulation.
    """
    if mode.simulated or not data.sample or cfg.env.allow_sample:
        return
    c, env = data.counts, cfg.env.name
    raise ConfigError(
        f"refusing to {command} with real models ({mode.reason}) on the vendored sample of {env} "
        f"({data.root}: train {c['train']}, selection {c['selection']}, test {c['test']} items): too few "
        "to measure a skill, and the calls cost money. Point the run at your data with "
        f"--set env.data_root=DIR (check it first: skillopt data check --env {env} DIR; layouts in "
        "docs/data.md), or use the sample on purpose with --allow-sample (env.allow_sample: true), "
        "or try it offline with --simulate on"
    )
