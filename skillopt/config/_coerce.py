"""Coerce raw values (from YAML, ``--set`` or Python) to the declared type of a config field.

Every config field is one of: ``str``, ``int``, ``float``, ``bool``, a ``Literal`` of strings
(an enum, optionally with aliases), ``X | None``, ``tuple[str, ...]`` (a list) or the price
mapping. A value that does not fit raises :class:`FieldError` naming the key, the expected type
and the (redacted) value; nothing is guessed beyond the documented conversions.
"""

from __future__ import annotations

import math
import re
import types
from collections.abc import Callable, Mapping
from typing import Any, Literal, Union, get_args, get_origin

from skillopt.errors import ConfigError
from skillopt.logs import redact

__all__ = ["FieldError", "coerce", "describe_type", "is_list_type", "is_str_type", "show"]

_INT_TEXT = re.compile(r"^[-+]?[0-9]+$")
_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})


class FieldError(ConfigError):
    """A :class:`ConfigError` about one key; ``key`` lets the loader add where it was set."""

    def __init__(self, key: str, problem: str, *, origin: str = "") -> None:
        where = f" (from {origin})" if origin else ""
        super().__init__(f"{key}{where}: {problem}")
        self.key = key
        self.problem = problem
        self.origin = origin


def show(value: Any, key: str) -> str:
    """A short, redacted rendering of ``value`` for an error message about ``key``."""
    text = repr(redact(value, key))
    return text if len(text) <= 80 else text[:77] + "..."


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string"}.get(
        type(value), type(value).__name__
    )


def _unwrap_optional(hint: Any) -> tuple[Any, bool]:
    if get_origin(hint) in (Union, types.UnionType):
        args = [a for a in get_args(hint) if a is not type(None)]
        if len(args) == 1 and len(get_args(hint)) == 2:
            return args[0], True
    return hint, False


def describe_type(hint: Any) -> str:
    """Human name of a field type, for messages (``an integer``, ``one of: a, b``...)."""
    inner, optional = _unwrap_optional(hint)
    origin = get_origin(inner)
    if origin is Literal:
        text = "one of: " + ", ".join(repr(c) if c == "" else str(c) for c in get_args(inner))
    elif origin is tuple:
        text = "a list of strings (YAML list or comma-separated string)"
    elif origin is not None and isinstance(origin, type) and issubclass(origin, Mapping):
        text = "a mapping"
    else:
        text = {bool: "a boolean (true/false)", int: "an integer", float: "a number", str: "a string"}.get(
            inner, getattr(inner, "__name__", str(inner))
        )
    return f"{text}, or null" if optional else text


def is_str_type(hint: Any) -> bool:
    """Whether the field holds a string (plain or enum), possibly optional."""
    inner, _ = _unwrap_optional(hint)
    return inner is str or get_origin(inner) is Literal


def is_list_type(hint: Any) -> bool:
    inner, _ = _unwrap_optional(hint)
    return get_origin(inner) is tuple


def _bad(key: str, hint: Any, value: Any, extra: str = "") -> FieldError:
    return FieldError(
        key, f"expected {describe_type(hint)}, got {_type_name(value)} {show(value, key)}{extra}"
    )


def coerce(
    value: Any,
    hint: Any,
    *,
    key: str,
    aliases: Mapping[str, str] | None = None,
    item: Callable[[Any, str], Any] | None = None,
) -> Any:
    """Return ``value`` converted to ``hint``.

    Args:
        value: the raw value.
        hint: the field's resolved type annotation.
        key: dotted key, for messages.
        aliases: for enum fields, alternative spellings mapped to the canonical value.
        item: for mapping fields, converts one entry (``(raw, key) -> value``).

    Conversions (and nothing else): numeric strings to int/float, integral floats to int,
    ints to float, ``true/false/yes/no/on/off/1/0`` (any case) to bool, a comma-separated
    string to a list, null to an empty list or mapping, enum values matched case-insensitively
    and through ``aliases``.

    Raises:
        FieldError: the value does not fit; the message names the key, the expected type and
            the value (redacted when the key looks like a secret).
    """
    inner, optional = _unwrap_optional(hint)
    if value is None:
        if optional:
            return None
        origin = get_origin(inner)
        if origin is tuple:
            return ()
        if origin is not None and isinstance(origin, type) and issubclass(origin, Mapping):
            return {}
        return _fail_null(key, inner)
    origin = get_origin(inner)
    if origin is Literal:
        return _coerce_enum(value, inner, key=key, aliases=aliases or {}, hint=hint)
    if origin is tuple:
        return _coerce_list(value, key=key, hint=hint)
    if origin is not None and isinstance(origin, type) and issubclass(origin, Mapping):
        if not isinstance(value, Mapping):
            raise _bad(key, hint, value)
        convert = item or (lambda v, _k: v)
        return {str(k): convert(v, f"{key}.{k}") for k, v in value.items()}
    if inner is bool:
        return _coerce_bool(value, key=key, hint=hint)
    if inner is int:
        return _coerce_int(value, key=key, hint=hint)
    if inner is float:
        return _coerce_float(value, key=key, hint=hint)
    if inner is str:
        if isinstance(value, str):
            return value
        # Numbers and booleans are not silently turned into text: in a YAML file they usually
        # mean a missing pair of quotes.
        raise _bad(key, hint, value, "; quote it in YAML")
    raise TypeError(f"{key}: unsupported field type {hint!r}")  # a schema bug, not user input


def _fail_null(key: str, inner: Any) -> Any:
    extra = '; use "" for an empty string' if inner is str or get_origin(inner) is Literal else ""
    raise FieldError(key, f"expected {describe_type(inner)}, got null{extra}")


def _coerce_bool(value: Any, *, key: str, hint: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    raise _bad(key, hint, value)


def _coerce_int(value: Any, *, key: str, hint: Any) -> int:
    if isinstance(value, bool):
        raise _bad(key, hint, value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _INT_TEXT.match(value.strip()):
        return int(value.strip())
    raise _bad(key, hint, value)


def _coerce_float(value: Any, *, key: str, hint: Any) -> float:
    if isinstance(value, bool):
        raise _bad(key, hint, value)
    number: float | None = None
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if number is None:
        raise _bad(key, hint, value)
    if not math.isfinite(number):
        raise FieldError(key, f"expected a finite number, got {show(value, key)}")
    return number


def _coerce_enum(value: Any, literal: Any, *, key: str, aliases: Mapping[str, str], hint: Any) -> str:
    choices: tuple[str, ...] = get_args(literal)
    if isinstance(value, bool):
        value = "true" if value else "false"  # e.g. ``simulate: true`` → alias of "on"
    if not isinstance(value, str):
        raise _bad(key, hint, value)
    text = value.strip().lower()
    text = aliases.get(text, text)
    if text in choices:
        return text
    allowed = ", ".join(repr(c) if c == "" else c for c in choices)
    alias_text = ""
    if aliases:
        alias_text = "; aliases: " + ", ".join(f"{a}→{c}" for a, c in aliases.items())
    raise FieldError(key, f"unknown value {show(value, key)}; allowed: {allowed}{alias_text}")


def _coerce_list(value: Any, *, key: str, hint: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        items: list[Any] = [part.strip() for part in value.split(",")]
        return tuple(i for i in items if i)
    if not isinstance(value, list | tuple):
        raise _bad(key, hint, value)
    out = []
    for i, element in enumerate(value):
        if not isinstance(element, str):
            raise FieldError(
                f"{key}[{i}]",
                f"expected a string, got {_type_name(element)} {show(element, key)}; quote it in YAML",
            )
        out.append(element.strip())
    return tuple(out)
