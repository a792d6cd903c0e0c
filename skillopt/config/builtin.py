"""The configs shipped with the package: the shared fragments under ``skillopt/configs/``
(``_base_/default.yaml``) and each env's own under ``skillopt/envs/<env>/configs/`` (its
``<env>.yaml`` and ``<env>_demo.yaml``), found by the env registry (so an env added with its
folder brings its configs along)."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from skillopt.errors import ConfigError

__all__ = ["BASE_DIR_NAME", "builtin_config", "builtin_dir", "builtin_files", "list_builtin_configs"]

#: Sub-directory of fragments meant to be inherited (``_base_: _base_/default.yaml``), not run.
BASE_DIR_NAME = "_base_"


def builtin_dir() -> Path:
    """The directory holding the shared fragments (``_base_/``)."""
    return Path(str(files("skillopt").joinpath("configs")))


def builtin_files() -> dict[str, Path]:
    """Every shipped config by name (``_base_/default``, ``searchqa``, ``searchqa_demo`` ...).

    Raises:
        ConfigError: two env folders ship a config of the same name.
    """
    from skillopt.envs.registry import available_envs, env_dir  # the registry is cheap to import

    root = builtin_dir()
    found = {p.relative_to(root).with_suffix("").as_posix(): p for p in sorted(root.rglob("*.yaml"))}
    for env in available_envs():
        for path in sorted((env_dir(env) / "configs").glob("*.yaml")):
            if path.stem in found:
                raise ConfigError(
                    f"two shipped configs are named {path.stem!r}: {found[path.stem]} and {path}"
                )
            found[path.stem] = path
    return found


def list_builtin_configs() -> list[str]:
    """Names of the runnable shipped configs (``spreadsheetbench_demo``...), sorted.

    Fragments under ``_base_/`` are left out: they set no env and are not runnable alone
    (:func:`builtin_config` still resolves ``"_base_/default"``).
    """
    return sorted(name for name in builtin_files() if not name.startswith(f"{BASE_DIR_NAME}/"))


def builtin_config(name: str) -> Path:
    """The path of a shipped config, by name with or without ``.yaml``.

    Raises:
        ConfigError: no such config (the message lists the available ones).
    """
    stem = name[: -len(".yaml")] if name.endswith(".yaml") else name
    path = builtin_files().get(stem)
    if path is not None:
        return path
    raise ConfigError(f"no built-in config {name!r}; available: {', '.join(list_builtin_configs())}")
