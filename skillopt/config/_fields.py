"""What the config's messages are made of: :class:`FieldError` (a :class:`ConfigError` about one
key, to which the loader adds where the value came from) and the type predicates ``--set``
parsing needs. The coercion itself is pydantic's (:mod:`skillopt.config.schema`), its errors
worded by :mod:`skillopt.validation`."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args, get_origin

from skillopt.errors import ConfigError
from skillopt.validation import describe_type, show, unwrap_optional

__all__ = ["FieldError", "describe_type", "is_list_type", "is_str_type", "show"]


class FieldError(ConfigError):
    """A :class:`ConfigError` about one key; ``key`` lets the loader add where it was set."""

    def __init__(self, key: str, problem: str, *, origin: str = "") -> None:
        where = f" (from {origin})" if origin else ""
        super().__init__(f"{key}{where}: {problem}")
        self.key = key
        self.problem = problem
        self.origin = origin


def _inner(hint: Any) -> Any:
    inner, _ = unwrap_optional(hint)
    return get_args(inner)[0] if get_origin(inner) is Annotated else inner


def is_str_type(hint: Any) -> bool:
    """Whether the field holds a string (plain or enum), possibly optional."""
    inner = _inner(hint)
    return inner is str or get_origin(inner) is Literal


def is_list_type(hint: Any) -> bool:
    return get_origin(_inner(hint)) is tuple
