"""What the config's messages are made of: :class:`FieldError` (a :class:`ConfigError` about one
key, to which the loader adds where the value came from; defined in :mod:`skillopt.validation`,
which the host's configuration shares) and the type predicates ``--set`` parsing needs. The
coercion itself is pydantic's (:mod:`skillopt.config.schema`), its errors worded by
:mod:`skillopt.validation`."""

from __future__ import annotations

from typing import Any, get_origin

from skillopt.validation import FieldError, base_type, choices, describe_type, show

__all__ = ["FieldError", "describe_type", "is_list_type", "is_str_type", "show"]


def is_str_type(hint: Any) -> bool:
    """Whether the field holds a string (plain or enum), possibly optional."""
    return base_type(hint) is str or choices(hint) is not None


def is_list_type(hint: Any) -> bool:
    return get_origin(base_type(hint)) is tuple
