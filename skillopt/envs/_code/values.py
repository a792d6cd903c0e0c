"""Decoding the values a grading container reports, on the trusted side.

The container's claims arrive as tagged JSON (the encoding is documented in
:mod:`skillopt.envs._code.harness`). They are parsed with :func:`json.loads` and rebuilt here
into plain built-in values (``int``, ``float``, ``str``, ``tuple``, ``dict``...) with a size
and depth budget: nothing the candidate produced is ever unpickled, evaluated or compared as
its own object. Anything malformed or ``opaque`` decodes to :data:`OPAQUE`, equal to nothing.

Usage::

    decode(["tuple", [["int", "1"], ["str", "a"]]])   # (1, "a")
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["OPAQUE", "Opaque", "decode", "has_opaque", "same_value", "show"]

_MAX_NODES = 200_000
_MAX_DEPTH = 64
_INT = re.compile(r"-?\d{1,4300}")
_FLOAT = re.compile(r"-?(?:inf|nan|\d+(?:\.\d*)?(?:e[-+]?\d+)?|\.\d+(?:e[-+]?\d+)?)", re.I)


class Opaque:
    """A value the container could not (or would not) serialise: equal to nothing."""

    __slots__ = ("truth", "what")

    def __init__(self, what: str, truth: bool | None = None) -> None:
        self.what = what
        #: ``bool(value)`` as the container reported it (``None``: unknown); read only by
        #: truthiness assertions (``assert f(x)``), which test nothing more.
        self.truth = truth

    def __eq__(self, other: object) -> bool:
        return False

    def __ne__(self, other: object) -> bool:
        return True

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"<unserialisable {self.what}>"


OPAQUE = Opaque("value")


class _Bad(Exception):
    pass


def _float(text: Any) -> float:
    if not isinstance(text, str) or not _FLOAT.fullmatch(text):
        raise _Bad("float")
    return float(text)


def _decode(obj: Any, budget: list[int], depth: int) -> Any:
    budget[0] -= 1
    if budget[0] < 0 or depth > _MAX_DEPTH:
        raise _Bad("too large")
    if not isinstance(obj, list) or not obj or not isinstance(obj[0], str):
        raise _Bad("not a tagged value")
    tag, args = obj[0], obj[1:]
    if tag == "none" and not args:
        return None
    if tag == "bool" and len(args) == 1 and isinstance(args[0], bool):
        return args[0]
    if tag == "int" and len(args) == 1 and isinstance(args[0], str) and _INT.fullmatch(args[0]):
        return int(args[0])
    if tag == "float" and len(args) == 1:
        return _float(args[0])
    if tag == "complex" and len(args) == 2:
        return complex(_float(args[0]), _float(args[1]))
    if tag == "str" and len(args) == 1 and isinstance(args[0], str):
        return args[0]
    if tag == "bytes" and len(args) == 1 and isinstance(args[0], str):
        try:
            return bytes.fromhex(args[0])
        except ValueError as exc:
            raise _Bad("bytes") from exc
    if tag in ("list", "tuple", "set", "frozenset") and len(args) == 1 and isinstance(args[0], list):
        items = [_decode(v, budget, depth + 1) for v in args[0]]
        try:
            return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[tag](items)
        except TypeError as exc:  # an unhashable member of a set
            raise _Bad("set member") from exc
    if tag == "dict" and len(args) == 1 and isinstance(args[0], list):
        out = {}
        for pair in args[0]:
            if not isinstance(pair, list) or len(pair) != 2:
                raise _Bad("dict item")
            key = _decode(pair[0], budget, depth + 1)
            try:
                out[key] = _decode(pair[1], budget, depth + 1)
            except TypeError as exc:
                raise _Bad("dict key") from exc
        return out
    if tag == "opaque" and 1 <= len(args) <= 2 and isinstance(args[0], str):
        truth = args[1] if len(args) == 2 and isinstance(args[1], bool) else None
        return Opaque(args[0][:100], truth)
    raise _Bad(f"unknown tag {tag[:20]!r}")


def decode(obj: Any) -> Any:
    """The plain value of one tagged claim; :class:`Opaque` when it is malformed."""
    try:
        return _decode(obj, [_MAX_NODES], 0)
    except (_Bad, RecursionError, ValueError, OverflowError):
        return Opaque("malformed")


def has_opaque(value: Any, depth: int = 0) -> bool:
    if isinstance(value, Opaque):
        return True
    if depth > _MAX_DEPTH:
        return True
    if isinstance(value, dict):
        return any(has_opaque(k, depth + 1) or has_opaque(v, depth + 1) for k, v in value.items())
    if isinstance(value, list | tuple | set | frozenset):
        return any(has_opaque(v, depth + 1) for v in value)
    return False


def same_value(a: Any, b: Any) -> bool:
    """Equality of two decoded values for trace mode: ``==``, with floats equal within
    ``1e-9`` (relative or absolute) anywhere in a structure; nothing opaque is ever equal."""
    if has_opaque(a) or has_opaque(b):
        return False
    return _same(a, b, 0)


def _same(a: Any, b: Any, depth: int) -> bool:
    if depth > _MAX_DEPTH:
        return False
    if isinstance(a, float) or isinstance(b, float):
        if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
            return a == b or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
        return False
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return (
            type(a) is type(b)
            and len(a) == len(b)
            and all(_same(x, y, depth + 1) for x, y in zip(a, b, strict=True))
        )
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k], depth + 1) for k in a)
    return type(a) is type(b) and a == b


def show(value: Any, limit: int = 200) -> str:
    """A short ``repr`` of a decoded value for reports."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
