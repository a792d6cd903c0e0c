"""Small helpers shared by the reflection stages (private).

Nothing here calls a model or touches a file.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from skillopt.skill import Edit

__all__ = [
    "as_count",
    "as_int",
    "fingerprint",
    "item_to_dict",
    "items_to_dicts",
    "safe_text",
    "section",
]

_INT_RE = re.compile(r"[-+]?\d+")
# Longest integer we render or coerce; bigger ones are junk from a confused model and would
# hit Python's int/str conversion limit (ValueError) in str()/int() otherwise.
_MAX_DIGITS = 18


def skill_section(skill: str) -> str:
    """The ``## Current Skill`` section every optimizer prompt starts from."""
    return f"## Current Skill\n{skill.strip() or '(the skill is empty)'}"


_PACKAGE_GUIDE = """## Package Files
The skill is a package: SKILL.md (above, first), then each of its other files between
`<!-- SKILL_FILE path="PATH" -->` and `<!-- SKILL_FILE_END -->` (never write those markers). The
agent sees SKILL.md and an index of the other files; it reads `references/` files on demand and
runs or imports `scripts/` (mounted at `/skill/`). Keep SKILL.md short: move long detail into a
`references/` file that SKILL.md points to, and deterministic work into a `scripts/` helper.
An edit may name its file: `"file": "references/x.md"` (default `SKILL.md`); `target` is then text
of that file. `{"op": "create_file", "file": "scripts/x.py", "content": "<whole file>"}` adds a
file, `{"op": "delete_file", "file": "..."}` removes one. A new or changed script is checked in a
sandbox before evaluation (Python must compile, shell must pass `bash -n`; a script that handles
`--self-test` runs it): one that fails is dropped. The description in SKILL.md's front matter may
be edited (1-1024 characters); the name may not. Every edit counts against the budget."""


def is_package(skill: str) -> bool:
    """Whether a skill's text is a package's (front matter or file sections)."""
    return skill.startswith("---") or "<!-- SKILL_FILE" in skill


def package_guide(skill: str, update_mode: str) -> list[str]:
    """The package section of a patch-mode prompt (``[]`` for a one-file skill or another mode)."""
    return [_PACKAGE_GUIDE] if update_mode == "patch" and is_package(skill) else []


def section(heading: str, body: str) -> str:
    """``heading``, a newline, then ``body``; a ``body`` that already starts with ``heading`` is kept as is.

    Callers may pass either a bare body or a block that carries its own heading (e.g. the
    output of :func:`~skillopt.reflection.longitudinal.meta_skill_block`); it is never doubled.
    """
    text = body.strip("\n")
    if text.lstrip().startswith(heading):
        return text.strip()
    return f"{heading}\n{text}"


def safe_text(value: Any, limit: int | None = None) -> str:
    """A printable, bounded rendering of any JSON-ish value.

    Survives what a model may emit in a free-text field: huge integers (``str`` raises past
    4300 digits), deeply nested lists (``json.dumps`` raises RecursionError), non-strings.

    Args:
        value: Anything.
        limit: Maximum length of the result (``…`` marks a cut); ``None`` for no limit.

    Returns:
        A single string.
    """
    if value is None:
        text = ""
    elif isinstance(value, str):
        text = value
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, int):
        text = str(value) if value.bit_length() <= 60 else "<very large number>"
    elif isinstance(value, float):
        text = repr(value) if math.isfinite(value) else "<non-finite number>"
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, default=lambda _: "<unrenderable>")
        except (RecursionError, ValueError, TypeError):
            text = "<unrenderable value>"
    if limit is not None and len(text) > limit:
        text = text[: max(0, limit - 1)] + "…"
    return text


def as_int(value: Any) -> int | None:
    """Coerce a model-supplied number: ints, integral floats, the first integer in a string.

    Bools are rejected (``True`` is not a count). Integers with more than 18 digits are
    rejected rather than converted (they are junk, and ``int()`` of a huge string is slow).

    Returns:
        The integer, or ``None`` when ``value`` holds none.
    """
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value if value.bit_length() <= 60 else None
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and abs(value) < 1e18 else None
    if isinstance(value, str):
        m = _INT_RE.search(value)
        if m is None or len(m.group(0).lstrip("+-")) > _MAX_DIGITS:
            return None
        return int(m.group(0))
    return None


def as_count(value: Any, default: int, *, minimum: int = 0, maximum: int | None = None) -> int:
    """:func:`as_int` with a default and clamping to ``[minimum, maximum]``."""
    number = as_int(value)
    if number is None:
        number = default
    number = max(minimum, number)
    return number if maximum is None else min(maximum, number)


def item_to_dict(item: Edit | Mapping[str, Any]) -> dict[str, Any]:
    """Plain-dict form of an update item (an :class:`Edit` or a suggestion/candidate dict)."""
    return item.to_dict() if isinstance(item, Edit) else dict(item)


def items_to_dicts(items: Sequence[Edit | Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [item_to_dict(i) for i in items]


def fingerprint(value: Any) -> str:
    """Stable 16-hex hash of a JSON-able value (cache keys for resume)."""
    blob = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]
