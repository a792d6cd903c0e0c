"""One way to turn pydantic's validation errors into skillopt's messages, for the run config's
sections (``skillopt.config``) and the envs' options and payloads (``skillopt.envs``).

A message names the dotted key, what was expected and what came (redacted when the key looks
like a secret): ``train.batch_size: expected an integer, got string 'x'``. pydantic does the
coercion (lax mode: ``"10"`` → 10, ``3.0`` → 3, ``"yes"`` → True); the few conversions it does
not make the way a YAML file means them are the :data:`Int`, :class:`Bounds`, :data:`Words` and
:class:`Canonical` annotations here. Bounds and choices are declared in the field types
(:class:`Bounds`, ``Literal`` or a string enum), so pydantic enforces them and the JSON Schema
shows them; how the message reads is declared with them, and :func:`problems` is the one place
that turns pydantic's constraint errors into our wording (``must be >= 1, got 0``).
"""

from __future__ import annotations

import contextlib
import enum
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BeforeValidator, GetCoreSchemaHandler, ValidationError
from pydantic_core import CoreSchema, core_schema

from skillopt.errors import ConfigError
from skillopt.logs import redact

__all__ = [
    "Bounds",
    "Canonical",
    "Choices",
    "FieldError",
    "Int",
    "Words",
    "base_type",
    "choices",
    "describe_type",
    "problems",
    "show",
    "type_name",
    "unwrap_optional",
]


class FieldError(ConfigError):
    """A :class:`ConfigError` about one key; ``key`` lets a loader add where the value came from
    (``origin``: a file, a ``--set``)."""

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


def base_type(hint: Any) -> Any:
    """The type under ``Optional`` and ``Annotated`` (``Annotated[int, ...] | None`` → ``int``)."""
    inner, _ = unwrap_optional(hint)
    return get_args(inner)[0] if get_origin(inner) is Annotated else inner


def choices(hint: Any) -> tuple[Any, ...] | None:
    """The values a choice field allows (a ``Literal``'s, or a string enum's, under
    ``Optional`` and ``Annotated``); ``None`` for any other type."""
    inner = base_type(hint)
    if get_origin(inner) is Literal:
        return get_args(inner)
    if isinstance(inner, type) and issubclass(inner, enum.Enum):
        return tuple(m.value for m in inner)
    return None


def _said(values: Sequence[Any]) -> str:
    return ", ".join(repr(c) if c == "" else str(c) for c in values)


def describe_type(hint: Any) -> str:
    """Human name of a field type, for messages (``an integer``, ``one of: a, b``...)."""
    inner, optional = unwrap_optional(hint)
    origin = get_origin(inner)
    if origin is Annotated:
        return describe_type(get_args(inner)[0]) + (", or null" if optional else "")
    allowed = choices(inner)
    if allowed is not None:
        text = "one of: " + _said(allowed)
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
Words = Annotated[tuple[str, ...], BeforeValidator(_words)]


# eq=False: ``typing`` caches ``Annotated[...]`` by its arguments, so two equal Bounds
# (``ge=0`` and ``ge=0.0``) would share one object and one wording.
@dataclass(frozen=True, kw_only=True, eq=False)
class Bounds(annotated_types.GroupedMetadata):
    """Declared bounds of a number field, ``Annotated[int, Bounds(ge=1)]``: pydantic enforces
    them, the JSON Schema shows them (``minimum``, ``exclusiveMinimum``...), booleans are refused
    (as :data:`Int`), and :func:`problems` words a violation as ``must be >= 1, got 0`` or
    ``must be in [0, 1], got 2``. A bound reads in the message as it is written here (``ge=0``
    says ``0``, ``ge=0.0`` says ``0.0``).

    Attributes:
        ge, gt, le, lt: the bounds.
        unit: said after the bound, ``must be > 0{unit}, got 0.0`` (`` seconds``, `` or null``).
        note: said after the value, ``must be >= 0, got -1{note}`` (`` (0 = no limit)``).
        said: the bound in words, said instead of the symbols: ``said="0 or more"`` reads
            ``must be 0 or more, got -1``.
    """

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    unit: str = ""
    note: str = ""
    said: str = ""

    def __iter__(self) -> Iterator[object]:
        # The bounds before the BeforeValidator: pydantic then puts them in the field's own
        # JSON Schema (minimum...), not in keywords of their own that no validator reads.
        yield annotated_types.Interval(gt=self.gt, ge=self.ge, lt=self.lt, le=self.le)
        yield BeforeValidator(_no_bool)


class _EnumValues:
    """A string enum read as the ``Literal`` of its values, then made the member: the same
    JSON Schema (``enum``, inline) and the same errors as a ``Literal`` field (any other type
    is left as it is)."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        if isinstance(source, type) and issubclass(source, enum.Enum):
            values = core_schema.literal_schema([m.value for m in source])
            return core_schema.no_info_after_validator_function(source, values)
        return handler(source)


class Canonical(annotated_types.GroupedMetadata):
    """A choice field's spelling, ``Annotated[Literal["a", "b"], Canonical({"x": "a"})]`` or
    ``Annotated[SomeStrEnum, Canonical()]``: matched case-insensitively, ``aliases``
    (alternative spelling → canonical value) resolved, a YAML boolean read as
    ``"true"``/``"false"``. An enum field holds the member, and is shown and refused as the
    ``Literal`` of its values would be."""

    def __init__(self, aliases: Mapping[str, str] | None = None) -> None:
        self.aliases: Mapping[str, str] = MappingProxyType(dict(aliases or {}))

    def __iter__(self) -> Iterator[object]:
        yield _EnumValues()
        yield BeforeValidator(self._canonical)

    def _canonical(self, value: Any) -> Any:
        if isinstance(value, bool):
            value = "true" if value else "false"
        if isinstance(value, str):
            text = value.strip().lower()
            return self.aliases.get(text, text)
        return value


@dataclass(frozen=True)
class Choices:
    """How a ``Literal`` field's message says its allowed values, ``must be {said}, got 'x'``
    (without it: ``unknown value 'x'; allowed: ...``)."""

    said: str


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


_BOUND_ERRORS = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal"})


def _declared(hint: Any, kind: type[Any]) -> Any:
    """The metadata of type ``kind`` declared on ``hint`` (under ``Optional``), else ``None``."""
    inner, _ = unwrap_optional(hint)
    metadata = get_args(inner)[1:] if get_origin(inner) is Annotated else ()
    return next((m for m in metadata if isinstance(m, kind)), None)


def _bound_problem(value: Any, key: str, hint: Any) -> str | None:
    """``must be >= 1, got 0`` for a :class:`Bounds` field (``None``: the hint declares none)."""
    bounds = _declared(hint, Bounds)
    if bounds is None:
        return None
    ge, gt, le, lt = bounds.ge, bounds.gt, bounds.le, bounds.lt
    low = ge if ge is not None else gt
    high = le if le is not None else lt
    if bounds.said:
        bound = bounds.said
    elif low is not None and high is not None:
        bound = f"in {'[' if ge is not None else '('}{low}, {high}{']' if le is not None else ')'}"
    elif low is not None:
        bound = f"{'>=' if ge is not None else '>'} {low}"
    else:
        bound = f"{'<=' if le is not None else '<'} {high}"
    # pydantic reports the input ("0", or 0 for a float field): say the value the field would hold.
    with contextlib.suppress(TypeError, ValueError):
        value = base_type(hint)(value)
    return f"must be {bound}{bounds.unit}, got {show(value, key)}{bounds.note}"


def _key(prefix: str, loc: Sequence[Any]) -> str:
    out = prefix
    for part in loc:
        out = f"{out}[{part}]" if isinstance(part, int) else (f"{out}.{part}" if out else str(part))
    return out


def _problem(err: Mapping[str, Any], key: str, hint: Any, aliases: Mapping[str, str]) -> str:
    kind, value = err["type"], err.get("input")
    if kind in _BOUND_ERRORS:
        bound = _bound_problem(value, key, hint)
        if bound is not None:
            return bound
    if kind == "literal_error":
        said = _declared(hint, Choices)
        if said is not None:
            return f"must be {said.said}, got {show(value, key)}"
        allowed = _said(choices(hint) or ())
        alias_text = "; aliases: " + ", ".join(f"{a}→{c}" for a, c in aliases.items()) if aliases else ""
        return f"unknown value {show(value, key)}; allowed: {allowed}{alias_text}"
    if kind == "finite_number":
        return f"expected a finite number, got {show(value, key)}"
    if kind in _TYPE_ERRORS or (kind.endswith("_type") and hint is not None):
        inner = base_type(hint)
        if value is None:
            extra = '; use "" for an empty string' if inner is str or choices(inner) is not None else ""
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
        hints: field name → annotation of the model's fields (what "expected" says), with its
            metadata (``FieldInfo.rebuild_annotation()``) to word a :class:`Bounds` or
            :class:`Choices` as declared.
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
            inner = base_type(hint)
            hint = get_args(inner)[0] if get_origin(inner) is tuple and isinstance(loc[1], int) else None
        out.append((key, _problem(err, key, hint, (aliases or {}).get(str(loc[0]), {}) if loc else {})))
    return out
