"""File-name rules shared by every side that accepts names from elsewhere."""

from __future__ import annotations

import unicodedata

from skillopt.errors import InvalidRequest

__all__ = ["XLSX_MAGIC", "check_relative_name", "looks_like_xlsx"]

XLSX_MAGIC = b"PK\x03\x04"
_MAX_NAME = 255


def check_relative_name(name: str, *, what: str = "file name") -> str:
    """Return ``name`` normalised if it is a safe relative POSIX path, else raise.

    Refused: empty names, absolute paths, ``..`` components, backslashes, control characters
    and names longer than 255 characters.

    Raises:
        InvalidRequest: with a message naming the offending part.
    """
    if not name:
        raise InvalidRequest(f"{what} is empty")
    if len(name) > _MAX_NAME:
        raise InvalidRequest(f"{what} is longer than {_MAX_NAME} characters: {name[:40]!r}...")
    if name.startswith("/"):
        raise InvalidRequest(f"{what} must be relative, got absolute path {name!r}")
    if "\\" in name:
        raise InvalidRequest(f"{what} must use '/' separators, got {name!r}")
    if any(unicodedata.category(ch) == "Cc" for ch in name):
        raise InvalidRequest(f"{what} contains control characters: {name!r}")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts:
        raise InvalidRequest(f"{what} names no file: {name!r}")
    if ".." in parts:
        raise InvalidRequest(f"{what} escapes its directory (path traversal): {name!r}")
    return "/".join(parts)


def looks_like_xlsx(data: bytes) -> bool:
    """Cheap check that bytes are a zip container (every .xlsx is one)."""
    return data[:4] == XLSX_MAGIC
