"""Loading YAML configs: ``_base_`` inheritance, deep merge, ``--set`` overrides."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillopt.config._tree import SET_ORIGIN, apply_overrides, build, check_tree, merge_into
from skillopt.config._yaml import YamlSyntaxError, parse_yaml
from skillopt.config.builtin import builtin_config, builtin_dir, list_builtin_configs
from skillopt.config.schema import Config
from skillopt.errors import ConfigError

__all__ = ["config_from_dict", "explain_config", "load_config", "read_yaml_mapping", "with_overrides"]


def config_from_dict(data: Mapping[str, Any], *, source: str = "config", resolve: bool = True) -> Config:
    """Build a :class:`Config` from ``{section: {key: value}}`` data, strictly: unknown or
    legacy keys are errors.

    Args:
        data: nested plain data, e.g. :meth:`Config.to_dict`'s output or a parsed YAML file
            (without ``_base_``, which only :func:`load_config` resolves).
        source: names the data's origin in error messages.
        resolve: also do the look-ups (:func:`~skillopt.config.resolve_config`); ``False``
            only checks the config on its own (a run directory's record, read on a machine
            that may lack its env or paths).

    Raises:
        ConfigError: an unknown key (with a suggestion), a bad type or value.
    """
    check_tree(data, source=source)
    return build(data, origins={}, resolve=resolve)


def with_overrides(config: Config, overrides: Sequence[str]) -> Config:
    """A copy of ``config`` with ``--set``-style ``key=value`` overrides applied (see
    :func:`load_config`).

    Raises:
        ConfigError: an unknown key or a bad value, naming the ``--set`` that gave it.
    """
    return apply_overrides(config.to_dict(redacted=False), overrides, origins={})


@dataclass(frozen=True)
class _Layer:
    """One parsed file of an inheritance chain (``_base_`` removed)."""

    label: str
    data: dict[str, Any]


def load_config(
    path: str | Path | None,
    overrides: Sequence[str] = (),
    *,
    base: str | Path | None = None,
) -> Config:
    """Load a run configuration.

    Args:
        path: a YAML file, or the name of a built-in config (``"spreadsheetbench_demo"``, see
            :func:`list_builtin_configs`); ``None`` = no file (schema defaults, then ``base``).
        overrides: ``--set`` items ``"section.key=value"``, applied in order after the files.
            Values are read as YAML and coerced to the field's type (``train.batch_size=10``,
            ``evaluation.leading_words=MUST,NEVER``, ``sandbox.endpoints=[a:1,b:2]``,
            ``model.optimizer_temperature=null``).
        base: a file or built-in name that ``path`` inherits from when it declares no
            ``_base_`` of its own (or the only file when ``path`` is ``None``). A file whose
            own ``_base_`` names a different file is an error rather than a silent choice.

    Files are UTF-8 YAML mappings of sections. ``_base_: <path>`` (one string, relative to the
    file that declares it) is resolved recursively; the child deep-merges over its base
    (mappings merge, lists and scalars replace). Keys not set anywhere take the schema
    defaults of :mod:`skillopt.config.schema`.

    Raises:
        ConfigError: missing file, invalid YAML, a ``_base_`` cycle (naming the chain), an
            unknown / legacy / retired key (with a suggestion), or a bad value (naming the
            key, the expected type and the file or ``--set`` that set it).
    """
    return explain_config(path, overrides, base=base)[0]


def explain_config(
    path: str | Path | None,
    overrides: Sequence[str] = (),
    *,
    base: str | Path | None = None,
) -> tuple[Config, dict[str, str]]:
    """:func:`load_config`, and where each value came from: dotted key → ``--set``,
    ``file <label>`` (the file named), ``_base_ <label>`` (a file it inherits from); keys not in
    the mapping have their schema default (``skillopt config show`` prints this).

    Raises:
        ConfigError: as :func:`load_config`.
    """
    fallback = _locate(base) if base is not None else None
    layers: list[_Layer] = []
    if path is not None:
        layers = _read_chain(_locate(path), fallback_base=fallback, chain=())
    elif fallback is not None:
        layers = _read_chain(fallback, fallback_base=None, chain=())
    merged: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for layer in layers:
        merge_into(merged, layer.data, origins, layer.label)
    config = apply_overrides(merged, overrides, origins=origins)
    named = layers[-1].label if layers and path is not None else ""
    return config, {
        key: label if label == SET_ORIGIN else (f"file {label}" if label == named else f"_base_ {label}")
        for key, label in origins.items()
    }


def _locate(spec: str | Path) -> Path:
    """A config file by path, else by built-in name."""
    path = Path(spec).expanduser()
    if path.is_file():
        return path
    if path.exists():
        raise ConfigError(f"config {str(spec)!r} is not a file")
    if not path.is_absolute():
        try:
            return builtin_config(str(spec))
        except ConfigError:
            pass
    raise ConfigError(
        f"config file not found: {str(spec)!r} (built-in configs: {', '.join(list_builtin_configs())})"
    )


def _base_file(path: Path, spec: str, label: str) -> Path:
    """The file a ``_base_`` names: relative to the declaring file, else a shipped config by
    name (an env's config inherits ``_base_/default.yaml`` from ``skillopt/configs/``)."""
    candidate = path.parent / os.path.expanduser(spec)
    if candidate.is_file():
        return candidate
    try:
        return builtin_config(spec)
    except ConfigError:
        raise ConfigError(
            f"_base_ of {label}: file not found: {candidate} (nor a built-in config {spec!r})"
        ) from None


def _label(path: Path) -> str:
    """How a file is named in messages: relative to the project for shipped configs, else to
    the current directory."""
    package = builtin_dir().resolve().parent
    for root, prefix in ((package, "skillopt/"), (Path.cwd().resolve(), "")):
        try:
            return prefix + path.resolve().relative_to(root).as_posix()
        except ValueError:
            continue
    return str(path.resolve())


def _read_chain(path: Path, *, fallback_base: Path | None, chain: tuple[Path, ...]) -> list[_Layer]:
    """The layers of ``path`` and its ``_base_`` ancestors, the root ancestor first."""
    identity = path.resolve()
    if identity in chain:
        names = [_label(p) for p in (*chain, identity)]
        raise ConfigError(f"circular _base_ inheritance: {' -> '.join(names)}")
    label = _label(path)
    data = read_yaml_mapping(path, label)
    base_spec = data.pop("_base_", None)
    base_file: Path | None = fallback_base
    if base_spec is not None:
        if not isinstance(base_spec, str) or not base_spec.strip():
            raise ConfigError(
                f"_base_ in {label} must be one path string, relative to the file (lists are not supported)"
            )
        base_file = _base_file(path, base_spec.strip(), label)
        if fallback_base is not None and base_file.resolve() != fallback_base.resolve():
            raise ConfigError(
                f"{label} declares _base_: {base_spec} but base={_label(fallback_base)} was also given; "
                "drop one of them"
            )
    check_tree(data, source=label)
    parents = _read_chain(base_file, fallback_base=None, chain=(*chain, identity)) if base_file else []
    return [*parents, _Layer(label, data)]


def read_yaml_mapping(path: Path, label: str, *, expected: str = "a mapping of sections") -> dict[str, Any]:
    """The mapping a YAML file holds, read in the config's dialect (:mod:`skillopt.config._yaml`);
    an empty file is ``{}``. Also the host's configuration file (``skillopt serve --config``).

    Args:
        path: the file.
        label: how messages name it.
        expected: what the top level must be, in words, for the message when it is not a mapping.

    Raises:
        ConfigError: unreadable, not UTF-8, invalid YAML (line and column, never the line's
            text: it may hold a secret), or not a mapping.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{label}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"{label}: cannot read: {exc.strerror}") from None
    try:
        data = parse_yaml(text)
    except YamlSyntaxError as exc:
        raise ConfigError(f"{label}: invalid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{label}: expected {expected} at the top level, got {type(data).__name__}")
    return data
