"""One way to turn pydantic's validation errors into skillopt's messages, for the run config's
sections (``skillopt.config``) and the envs' options and payloads (``skillopt.envs``).

A message names the dotted key, what was expected and what came (redacted when the key looks
like a secret): ``train.batch_size: expected an integer, got string 'x'``. pydantic does the
coercion (lax mode: ``"10"`` → 10, ``3.0`` → 3, ``"yes"`` → True); the few conversions it does
not make the way a YAML file means them are the :data:`Int`, :data:`Float`, :data:`Words` and
:func:`enum` annotations here.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BeforeValidator, ValidationError

from skillopt.logs import redact

__all__ = [
    "Float",
    "Int",
    "Words",
    "describe_type",
    "enum",
    "problems",
    "show",
    "type_name",
    "unwrap_optional",
]


def show(value: Any, key: str) -> str:
    """A short, redacted rendering of ``value`` for an error message about ``key``."""
    text = repr(redact(value, key))
    return text if len(text) <= 80 else text[:77] + "..."


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string"}.get(
        type(value), type(value).__name__
    )


def unwrap_optional(hint: Any) -> tuple[Any, bool]:
    if get_origin(hint) in (Union, types.UnionType):
        args = [a for a in get_args(hint) if a is not type(None)]
        if len(args) == 1 and len(get_args(hint)) == 2:
            return args[0], True
    return hint, False


def describe_type(hint: Any) -> str:
    """Human name of a field type, for messages (``an integer``, ``one of: a, b``...)."""
    inner, optional = unwrap_optional(hint)
    origin = get_origin(inner)
    if origin is Annotated:
        return describe_type(get_args(inner)[0]) + (", or null" if optional else "")
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


# -- annotations: what a YAML file means that pydantic's lax mode reads otherwise ---------------


def _no_bool(value: Any) -> Any:
    """A boolean is no number (pydantic would read ``true`` as 1)."""
    if isinstance(value, bool):
        raise ValueError("boolean")
    return value


def _words(value: Any) -> Any:
    """null → (); ``"a, b"`` → ("a", "b"); list items stripped (non-strings left to be refused)."""
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(p.strip() for p in value.split(",") if p.strip())
    if isinstance(value, list | tuple):
        return tuple(v.strip() if isinstance(v, str) else v for v in value)
    return value


Int = Annotated[int, BeforeValidator(_no_bool)]
Float = Annotated[float, BeforeValidator(_no_bool)]
Words = Annotated[tuple[str, ...], BeforeValidator(_words)]


def enum(literal: Any, aliases: Mapping[str, str] | None = None) -> Any:
    """``literal`` matched case-insensitively, with ``aliases`` (alternative spelling →
    canonical value) resolved; a YAML boolean reads as ``"true"``/``"false"``."""
    table = dict(aliases or {})

    def canonical(value: Any) -> Any:
        if isinstance(value, bool):
            value = "true" if value else "false"
        if isinstance(value, str):
            text = value.strip().lower()
            return table.get(text, text)
        return value

    return Annotated[literal, BeforeValidator(canonical)]


# -- errors -------------------------------------------------------------------------------------

_TYPE_ERRORS = frozenset(
    {
        "int_parsing",
        "int_type",
        "int_from_float",
        "float_parsing",
        "float_type",
        "bool_parsing",
        "bool_type",
        "string_type",
        "tuple_type",
        "list_type",
        "dict_type",
        "mapping_type",
        "value_error",
        "none_required",
        "model_type",
        "model_attributes_type",
    }
)


def _key(prefix: str, loc: Sequence[Any]) -> str:
    out = prefix
    for part in loc:
        out = f"{out}[{part}]" if isinstance(part, int) else (f"{out}.{part}" if out else str(part))
    return out


def _problem(err: Mapping[str, Any], key: str, hint: Any, aliases: Mapping[str, str]) -> str:
    kind, value = err["type"], err.get("input")
    if kind == "literal_error":
        choices = get_args(unwrap_optional(get_args(hint)[0] if get_origin(hint) is Annotated else hint)[0])
        allowed = ", ".join(repr(c) if c == "" else str(c) for c in choices) if choices else ""
        alias_text = "; aliases: " + ", ".join(f"{a}→{c}" for a, c in aliases.items()) if aliases else ""
        return f"unknown value {show(value, key)}; allowed: {allowed}{alias_text}"
    if kind == "finite_number":
        return f"expected a finite number, got {show(value, key)}"
    if kind in _TYPE_ERRORS or (kind.endswith("_type") and hint is not None):
        inner, _ = unwrap_optional(hint)
        if value is None:
            extra = '; use "" for an empty string' if inner is str or get_origin(inner) is Literal else ""
            return f"expected {describe_type(hint)}, got null{extra}"
        quote = (
            "; quote it in YAML" if kind == "string_type" and not isinstance(value, Mapping | list) else ""
        )
        return f"expected {describe_type(hint)}, got {type_name(value)} {show(value, key)}{quote}"
    return f"{err['msg']} (got {show(value, key)})"


def problems(
    exc: ValidationError,
    *,
    prefix: str,
    hints: Mapping[str, Any],
    aliases: Mapping[str, Mapping[str, str]] | None = None,
    unknown: Callable[[str, int], str] | None = None,
) -> list[tuple[str, str]]:
    """``(dotted key, problem)`` for every error of ``exc``.

    Args:
        prefix: the dotted key of the validated model (``train``, ``env.options``).
        hints: field name → annotation of the model's fields (what "expected" says).
        aliases: enum field → {alternative spelling: canonical value} (listed with the allowed).
        unknown: the problem of an unknown key (``extra_forbidden``), given its key and depth.
    """
    out = []
    for err in exc.errors():
        loc = err["loc"]
        key = _key(prefix, loc)
        if err["type"] == "extra_forbidden":
            out.append((key, unknown(key, len(loc)) if unknown else "unknown key"))
            continue
        hint = hints.get(str(loc[0])) if loc else None
        if len(loc) > 1 and hint is not None:
            inner, _ = unwrap_optional(hint)
            inner = get_args(inner)[0] if get_origin(inner) is Annotated else inner
            hint = get_args(inner)[0] if get_origin(inner) is tuple and isinstance(loc[1], int) else None
        out.append((key, _problem(err, key, hint, (aliases or {}).get(str(loc[0]), {}) if loc else {})))
    return out
