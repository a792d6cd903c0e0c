"""Envs registered by name: one line per env, pointing at its :class:`~skillopt.envs.base.EnvSpec`.

Specs are imported lazily and are cheap (no env dependency), so validating a config never
imports openpyxl or math-verify; :func:`get_env` and :func:`load_env_data` import the heavy side
only when a rollout or a data split is needed.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from functools import cache
from typing import Any

from skillopt.envs.base import EnvData, Environment, EnvOptions, EnvSpec
from skillopt.errors import InvalidRequest

__all__ = ["available_envs", "env_spec", "find_spec", "get_env", "load_env_data", "resolve"]

# name -> "module:attribute" of the env's EnvSpec. Adding a benchmark = its folder + one line here.
_SPECS: dict[str, str] = {
    "gsm8k": "skillopt.envs.gsm8k.spec:SPEC",
    "hotpotqa": "skillopt.envs.hotpotqa.spec:SPEC",
    "humaneval": "skillopt.envs.humaneval.spec:SPEC",
    "livemathematicianbench": "skillopt.envs.livemathematicianbench.spec:SPEC",
    "math500": "skillopt.envs.math500.spec:SPEC",
    "mbpp": "skillopt.envs.mbpp.spec:SPEC",
    "searchqa": "skillopt.envs.searchqa.spec:SPEC",
    "spreadsheetbench": "skillopt.envs.spreadsheetbench.spec:SPEC",
    "textworld": "skillopt.envs.textworld.spec:SPEC",
}


def available_envs() -> tuple[str, ...]:
    """The registered env names, sorted."""
    return tuple(sorted(_SPECS))


def resolve(target: str) -> Any:
    """The object named by ``"module:attribute"``."""
    module_name, _, attr = target.partition(":")
    return getattr(importlib.import_module(module_name), attr)


@cache
def find_spec(name: str) -> EnvSpec | None:
    """The spec of env ``name``, or ``None`` when no such env is registered."""
    target = _SPECS.get(name)
    return resolve(target) if target else None


def env_spec(name: str) -> EnvSpec:
    """The spec of env ``name``.

    Raises:
        InvalidRequest: unknown name (the message lists the known ones).
    """
    spec = find_spec(name)
    if spec is None:
        raise InvalidRequest(f"unknown env {name!r}; available: {', '.join(available_envs())}")
    return spec


@cache
def get_env(name: str) -> Environment:
    """The service-side env registered under ``name``.

    Raises:
        InvalidRequest: unknown name (the message lists the known ones).
    """
    return resolve(env_spec(name).environment)()


def load_env_data(
    name: str,
    *,
    data_root: str = "",
    split_mode: str = "split_file",
    split_ratio: str = "2:1:7",
    split_seed: int = 42,
    options: Mapping[str, Any] | EnvOptions | None = None,
) -> EnvData:
    """The controller-side data of env ``name`` (see :class:`skillopt.envs.base.EnvData`).

    Raises:
        InvalidRequest: unknown env.
        ConfigError: a bad data root, split or option (the message names the key).
    """
    spec = env_spec(name)
    return resolve(spec.data)(
        data_root,
        split_mode=split_mode,
        split_ratio=split_ratio,
        split_seed=split_seed,
        options=spec.parse_options(options),
    )
