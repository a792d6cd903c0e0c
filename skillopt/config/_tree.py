"""Checking, merging and building raw config trees, and ``--set`` overrides.

A raw tree is ``{section: {key: value}}`` as parsed from YAML. The steps are kept apart so
every message can say where a key came from: :func:`check_tree` runs on each file on its own
(unknown keys name their file), :func:`merge_into` records for every leaf which layer set it
(``origins``), and :func:`build` builds the config, resolves it
(:func:`~skillopt.config._resolve.resolve_config`) and adds that origin to value errors of both steps.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import MappingProxyType
from typing import Any

from skillopt.config._fields import FieldError, describe_type, is_list_type, is_str_type, show
from skillopt.config._keys import LEGACY_FLAT, MOVED, RETIRED, unknown_key_message
from skillopt.config._resolve import resolve_config
from skillopt.config._yaml import YamlSyntaxError, parse_yaml
from skillopt.config.builtin import list_builtin_configs
from skillopt.config.schema import SECTIONS, Config, _Section
from skillopt.errors import ConfigError
from skillopt.logs import REDACTED, is_secret_key, redact_text
from skillopt.validation import base_type

__all__ = ["SET_ORIGIN", "apply_overrides", "build", "check_key", "check_tree", "flat_alias", "merge_into"]

#: Origin label of values given as ``--set`` overrides.
SET_ORIGIN = "--set"

# A section name written as a flat key means this field (``env: spreadsheetbench``).
_SECTION_AS_FLAT = MappingProxyType({"env": "env.name", "optimizer": "model.optimizer"})


def _derived_flat() -> dict[str, str]:
    """Flat name → structured path for every schema field (ambiguous names list all paths)."""
    table: dict[str, list[str]] = {}
    for section, cls in SECTIONS.items():
        for name in cls.field_names():
            table.setdefault(name, []).append(f"{section}.{name}")
    return {name: " or ".join(paths) for name, paths in table.items()}


_FLAT = MappingProxyType({**_derived_flat(), **LEGACY_FLAT})


def flat_alias(name: str) -> str | None:
    """The structured path of a reference-style flat key (``edit_budget`` → ``optimizer.learning_rate``)."""
    return _FLAT.get(name)


def check_key(section: str, name: Any, *, where: str) -> None:
    """Refuse a key that is not a field of ``section``, with the most useful message."""
    if not isinstance(name, str):
        raise ConfigError(f"key {name!r} under {section!r}{where} must be a string")
    path = f"{section}.{name}"
    if path in RETIRED:
        raise ConfigError(f"{path}{where} {RETIRED[path]}")
    cls = SECTIONS[section]
    if name in cls.field_names():
        return
    if path in MOVED:
        raise ConfigError(f"{path!r}{where} is not a key here; use {MOVED[path]}")
    raise ConfigError(unknown_key_message(path, name, cls.field_names(), where=where))


def _top_level_message(key: Any, where: str) -> str:
    if not isinstance(key, str):
        return f"top-level key {key!r}{where} must be a section name ({', '.join(SECTIONS)})"
    if key == "_base_":
        return f"'_base_'{where} is only resolved when loading files (load_config)"
    if key == "derived":  # a run's config.json: what the run worked out, not a setting
        return (
            f"'derived'{where} is not a config key: it is what a training run recorded about itself in "
            "its config.json. Evaluate that run as it trained with: skillopt eval --run RUN_DIR; "
            "continue it with: skillopt train --resume RUN_DIR"
        )
    for path, reason in RETIRED.items():
        if path.rsplit(".", 1)[1] == key:
            return f"{key!r}{where} ({path}) {reason}"
    target = flat_alias(key)
    if target is not None:
        text = f"flat key {key!r}{where} is not supported (configs are structured by section); use {target}"
        if " " not in target:
            section, name = target.split(".", 1)
            text += f", i.e. '{name}:' under '{section}:' (or --set {target}=...)"
        return text
    return unknown_key_message(key, key, tuple(SECTIONS), where=where)


def check_tree(data: Any, *, source: str) -> None:
    """Refuse anything in ``data`` that is not ``{section: {field: value}}``.

    Args:
        data: one parsed file (``_base_`` already removed) or a dict.
        source: where ``data`` came from, for messages.

    Raises:
        ConfigError: an unknown, flat-legacy, retired or moved key; a section that is not a mapping.
    """
    where = f" in {source}" if source else ""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source or 'config'}: expected a mapping of sections ({', '.join(SECTIONS)})")
    for key, value in data.items():
        if key not in SECTIONS:
            raise ConfigError(_top_level_message(key, where))
        if value is None:  # an empty section (``train:`` with nothing under it)
            continue
        if not isinstance(value, Mapping):
            hint = f"; did you mean {_SECTION_AS_FLAT[key]}?" if key in _SECTION_AS_FLAT else ""
            raise ConfigError(
                f"section {key!r}{where} must be a mapping of keys, got {show(value, key)}{hint}"
            )
        for name, inner in value.items():
            check_key(key, name, where=where)
            group = _subsection_of(SECTIONS[key].field_type(name))
            if group is not None and isinstance(inner, Mapping):
                for sub in inner:
                    if sub not in group.field_names():
                        raise ConfigError(
                            unknown_key_message(
                                f"{key}.{name}.{sub}", str(sub), group.field_names(), where=where
                            )
                        )


def merge_into(dst: dict[str, Any], src: Mapping[str, Any], origins: dict[str, str], label: str) -> None:
    """Deep-merge ``src`` over ``dst`` in place: mappings merge, anything else (lists too)
    replaces. ``origins[dotted key] = label`` for every leaf ``src`` sets."""
    _merge(dst, src, origins, label, "")


def _merge(
    dst: dict[str, Any], src: Mapping[str, Any], origins: dict[str, str], label: str, prefix: str
) -> None:
    for key, value in src.items():
        path = f"{prefix}{key}"
        if value is None and not prefix:
            continue  # empty section: nothing to merge
        if isinstance(value, Mapping):
            current = dst.get(key)
            if not isinstance(current, dict):
                current = dst[key] = {}
            origins.setdefault(path, label)
            _merge(current, value, origins, label, f"{path}.")
        else:
            dst[key] = copy.deepcopy(value)
            origins[path] = label


def _origin_of(key: str, origins: Mapping[str, str]) -> str:
    """The layer that set ``key`` (or its nearest enclosing key); ``""`` if a default."""
    key = key.split("[", 1)[0]
    probe = key
    while probe:
        if probe in origins:
            return origins[probe]
        probe = probe.rpartition(".")[0]
    return ""


@contextmanager
def _named_origin(origins: Mapping[str, str]) -> Iterator[None]:
    """A :class:`FieldError` raised inside says which layer set the value."""
    try:
        yield
    except FieldError as exc:
        origin = _origin_of(exc.key, origins)
        if not origin:
            raise
        raise FieldError(exc.key, exc.problem, origin=origin) from None


def build(data: Mapping[str, Any], *, origins: Mapping[str, str], resolve: bool = True) -> Config:
    """Build a :class:`Config` from a checked tree and (``resolve``) resolve it; value errors
    say which layer set the value."""
    sections: dict[str, Any] = {}
    for name, cls in SECTIONS.items():
        raw = data.get(name) or {}
        missing = [k for k in cls.required_keys() if k not in raw]
        if missing:
            raise ConfigError(_missing_message(f"{name}.{missing[0]}"))
        with _named_origin(origins):
            sections[name] = cls(**raw)
    config = Config(**sections)
    if not resolve:
        return config
    with _named_origin(origins):
        return resolve_config(config)


def _missing_message(key: str) -> str:
    if key == "env.name":
        from skillopt.envs.registry import available_envs

        return (
            f"env.name is required: the benchmark to train on (known: {', '.join(available_envs())}); "
            "set it in the config, pass --set env.name=spreadsheetbench, or start from a built-in config "
            f"({', '.join(list_builtin_configs())})"
        )
    return f"{key} is required"


def apply_overrides(data: Mapping[str, Any], overrides: Sequence[str], *, origins: dict[str, str]) -> Config:
    """Merge ``--set`` overrides over the tree ``data`` and build the result."""
    merged = copy.deepcopy(dict(data))
    for item in overrides:
        merge_into(merged, parse_override(item), origins, SET_ORIGIN)
    return build(merged, origins=origins)


def parse_override(item: str) -> dict[str, Any]:
    """``"train.batch_size=10"`` → ``{"train": {"batch_size": 10}}``, with the key checked.

    The value is read as YAML (``true``, ``3``, ``1.5``, ``null``, ``[a, b]``, ``{k: v}``), except
    that a string field takes the text as written (``--set model.target=4`` is the string "4";
    no quoting needed on a shell). ``model.prices.<model>.input=1.25`` sets one price entry;
    ``env.options.<key>[.<sub>]=VALUE`` one env option (checked by the env's options model);
    ``tracking.mlflow.enabled=true`` one key of a group of keys (``tracking.mlflow``).

    Raises:
        ConfigError: malformed item or unknown key. Messages never echo a value: an item such
            as ``model.api_key=...`` is refused by key name alone.
    """
    where = f" in {SET_ORIGIN}"
    if not isinstance(item, str):
        raise ConfigError(f"{SET_ORIGIN} items must be strings KEY=VALUE, got {type(item).__name__}")
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key:
        shown = REDACTED if is_secret_key(item) else repr(redact_text(item))
        raise ConfigError(f"{SET_ORIGIN} {shown}: expected KEY=VALUE, e.g. train.batch_size=10")
    parts = key.split(".")
    if len(parts) == 1:
        if key in SECTIONS:
            first = SECTIONS[key].field_names()[0]
            raise ConfigError(
                f"{SET_ORIGIN} {key}: {key!r} is a section; set one of its keys, e.g. {key}.{first}=..."
            )
        raise ConfigError(_top_level_message(key, where))
    section, name, rest = parts[0], parts[1], parts[2:]
    if section not in SECTIONS:
        raise ConfigError(unknown_key_message(section, section, tuple(SECTIONS), where=f"{where} {key!r}"))
    check_key(section, name, where=where)
    hint = SECTIONS[section].field_type(name)
    if not rest:
        return {section: {name: _parse_value(raw, hint, key)}}
    if (section, name) == ("env", "options"):
        # env.options.<key>[.<sub>...]=VALUE: the env's options model checks key and value.
        value: Any = _parse_value(raw, Any, key)
        for part in reversed(rest):
            value = {part: value}
        return {section: {name: value}}
    group = _subsection_of(hint)
    if group is not None:
        # tracking.mlflow.enabled=VALUE: one key of a group of keys inside the section.
        sub = rest[0]
        if len(rest) > 1 or sub not in group.field_names():
            raise ConfigError(
                unknown_key_message(".".join(parts), ".".join(rest), group.field_names(), where=where)
            )
        return {section: {name: {sub: _parse_value(raw, group.field_type(sub), key)}}}
    if (section, name) != ("model", "prices"):
        raise ConfigError(
            f"{SET_ORIGIN} {key}: {section}.{name} is not a mapping; write {section}.{name}=VALUE"
        )
    # Model names contain dots (gpt-5.5), so the entry name is everything up to a trailing
    # input/output component.
    if len(rest) >= 2 and rest[-1] in ("input", "output"):
        return {section: {name: {".".join(rest[:-1]): {rest[-1]: _parse_value(raw, float, key)}}}}
    return {section: {name: {".".join(rest): _parse_value(raw, dict, key)}}}


def _subsection_of(hint: Any) -> type[_Section] | None:
    """The section class of a field that groups keys (``tracking.mlflow``), else None."""
    inner = base_type(hint)
    return inner if isinstance(inner, type) and issubclass(inner, _Section) else None


def _parse_value(raw: str, hint: Any, key: str) -> Any:
    text = raw.strip()
    if text == "" and is_list_type(hint):
        return []
    if text == "" and is_str_type(hint):
        return ""
    try:
        parsed = parse_yaml(text)
    except YamlSyntaxError as exc:
        if is_list_type(hint) and text.startswith("[") and text.endswith("]"):
            # e.g. [[::1]:50051] is not YAML; a list of host:port items is what was meant.
            return [p.strip().strip("'\"") for p in text[1:-1].split(",") if p.strip()]
        if is_str_type(hint):
            return text
        raise FieldError(
            key, f"expected {describe_type(hint)}, got {show(text, key)} (not valid YAML: {exc})"
        ) from None
    if is_str_type(hint) and isinstance(parsed, bool | int | float):
        return text
    return parsed
