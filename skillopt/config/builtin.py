"""The configs shipped as package data under ``skillopt/configs/``."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from skillopt.errors import ConfigError

__all__ = ["BASE_DIR_NAME", "builtin_config", "builtin_dir", "list_builtin_configs"]

#: Sub-directory of fragments meant to be inherited (``_base_: _base_/default.yaml``), not run.
BASE_DIR_NAME = "_base_"


def builtin_dir() -> Path:
    """The directory holding the shipped YAML configs."""
    return Path(str(files("skillopt").joinpath("configs")))


def list_builtin_configs() -> list[str]:
    """Names of the runnable shipped configs (``spreadsheetbench_demo``...), sorted.

    Fragments under ``_base_/`` are left out: they set no env and are not runnable alone
    (:func:`builtin_config` still resolves ``"_base_/default"``).
    """
    root = builtin_dir()
    return sorted(
        p.relative_to(root).with_suffix("").as_posix()
        for p in root.rglob("*.yaml")
        if BASE_DIR_NAME not in p.relative_to(root).parts
    )


def builtin_config(name: str) -> Path:
    """The path of a shipped config, by name with or without ``.yaml``.

    Raises:
        ConfigError: no such config (the message lists the available ones).
    """
    root = builtin_dir()
    stem = name[: -len(".yaml")] if name.endswith(".yaml") else name
    # Names are plain relative names: refuse anything that could walk out of the directory.
    if stem and ".." not in Path(stem).parts and not Path(stem).is_absolute():
        path = root / f"{stem}.yaml"
        if path.is_file():
            return path
    raise ConfigError(f"no built-in config {name!r}; available: {', '.join(list_builtin_configs())}")
