"""Envs by name, discovered: every folder under ``skillopt/envs/`` (and under the directories
of ``SKILLOPT_ENV_PATH``) that holds a ``spec.py`` and whose name does not start with ``_`` is
an env of that name. Adding a benchmark is adding its folder; nothing else is edited.

Specs are imported lazily and are cheap (no env dependency), so validating a config never
imports openpyxl or math-verify; :func:`get_env` and :func:`load_env_data` import the heavy side
only when a rollout or a data split is needed.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import skillopt.envs
from skillopt.envs.base import EnvData, Environment, EnvOptions, EnvSpec
from skillopt.errors import InvalidRequest

__all__ = [
    "available_envs",
    "env_dir",
    "env_spec",
    "envs_with_agent",
    "find_spec",
    "get_env",
    "load_env_data",
    "resolve",
]


@cache
def _folders() -> dict[str, Path]:
    """Env name → its folder, over the package's path (``SKILLOPT_ENV_PATH`` extends it)."""
    found: dict[str, Path] = {}
    for root in skillopt.envs.__path__:
        base = Path(root)
        if not base.is_dir():
            continue
        for folder in sorted(base.iterdir()):
            if folder.name.startswith(("_", ".")) or not (folder / "spec.py").is_file():
                continue
            if folder.name in found:
                raise InvalidRequest(
                    f"two envs are named {folder.name!r}: {found[folder.name]} and {folder} "
                    "(SKILLOPT_ENV_PATH adds folders to skillopt/envs/; rename one)"
                )
            found[folder.name] = folder
    return found


def available_envs() -> tuple[str, ...]:
    """The env names, sorted."""
    return tuple(sorted(_folders()))


def envs_with_agent(agent: str) -> tuple[str, ...]:
    """The envs offering ``agent`` (``qa``, ``codegen_single`` ...), sorted."""
    return tuple(name for name in available_envs() if agent in env_spec(name).agent_names)


def env_dir(name: str) -> Path:
    """The folder of env ``name`` (its configs, data sample, prompts, simulation).

    Raises:
        InvalidRequest: unknown name.
    """
    env_spec(name)
    return _folders()[name]


def resolve(target: str) -> Any:
    """The object named by ``"module:attribute"``."""
    module_name, _, attr = target.partition(":")
    return getattr(importlib.import_module(module_name), attr)


@cache
def find_spec(name: str) -> EnvSpec | None:
    """The spec of env ``name``, or ``None`` when there is no such env.

    Raises:
        InvalidRequest: the folder's ``SPEC`` declares another name than the folder's.
    """
    if name not in _folders():
        return None
    spec = resolve(f"skillopt.envs.{name}.spec:SPEC")
    if spec.name != name:
        raise InvalidRequest(
            f"env folder {_folders()[name]} declares SPEC.name={spec.name!r}; they must agree"
        )
    return spec


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
