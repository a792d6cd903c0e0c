"""Envs registered by name, imported lazily so one env's dependencies never burden another."""

from __future__ import annotations

import importlib
from functools import cache

from skillopt.envs.base import Environment
from skillopt.errors import InvalidRequest

__all__ = ["available_envs", "get_env", "load_env_data"]

# name -> "module:attribute" of a zero-argument factory or class.
_ENVS: dict[str, str] = {
    "spreadsheetbench": "skillopt.envs.spreadsheetbench.env:SpreadsheetBenchEnv",
}


# name -> "module:attribute" of the controller-side data class (splits of task items).
_DATA: dict[str, str] = {
    "spreadsheetbench": "skillopt.envs.spreadsheetbench.data:SpreadsheetBenchEnvData",
}


def available_envs() -> tuple[str, ...]:
    return tuple(sorted(_ENVS))


@cache
def get_env(name: str) -> Environment:
    """The env registered under ``name``.

    Raises:
        InvalidRequest: unknown name (the message lists the known ones).
    """
    target = _ENVS.get(name)
    if target is None:
        raise InvalidRequest(f"unknown env {name!r}; available: {', '.join(available_envs())}")
    module_name, _, attr = target.partition(":")
    factory = getattr(importlib.import_module(module_name), attr)
    return factory()


def load_env_data(name: str, **kwargs):
    """The controller-side data of env ``name`` (see :class:`skillopt.envs.base.EnvData`)."""
    target = _DATA.get(name)
    if target is None:
        raise InvalidRequest(f"unknown env {name!r}; available: {', '.join(available_envs())}")
    module_name, _, attr = target.partition(":")
    return getattr(importlib.import_module(module_name), attr)(**kwargs)
