"""Reading fields of raw benchmark items, with messages that name the field.

Usage::

    question = text_field(raw, "question")
    answers = text_list(raw, "answers")
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

__all__ = ["content_id", "text_field", "text_list"]


def text_field(raw: Mapping[str, Any], key: str, *, required: bool = True) -> str:
    """``raw[key]`` as a string (numbers are accepted and converted).

    Raises:
        ValueError: missing (when ``required``), empty, or not text.
    """
    value = raw.get(key)
    if value is None:
        if required:
            raise ValueError(f"field {key!r} is missing (fields present: {', '.join(sorted(raw)) or 'none'})")
        return ""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"field {key!r} must be text, got {type(value).__name__}")
    text = str(value)
    if required and not text.strip():
        raise ValueError(f"field {key!r} is empty")
    return text


def text_list(raw: Mapping[str, Any], key: str) -> list[str]:
    """``raw[key]`` as a non-empty list of strings (a single string counts as a list of one).

    Raises:
        ValueError: missing, empty, or holding something other than text.
    """
    value = raw.get(key)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise ValueError(f"field {key!r} must be a non-empty list of strings, got {value!r:.80}")
    out = []
    for i, v in enumerate(value):
        if isinstance(v, bool) or not isinstance(v, str | int | float):
            raise ValueError(f"field {key!r}[{i}] must be text, got {type(v).__name__}")
        out.append(str(v))
    return out


def content_id(prefix: str, text: str) -> str:
    """A stable id for items that have none (GSM8K, MATH-500): ``<prefix>-<sha256[:12]>`` of
    the question text, so the same item has the same id in the sample, the full data and
    ``skillopt score``."""
    return f"{prefix}-{hashlib.sha256(text.strip().encode('utf-8')).hexdigest()[:12]}"
