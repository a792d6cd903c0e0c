"""File-name rules shared by every side that accepts names from elsewhere."""

from __future__ import annotations

import unicodedata

from skillopt.errors import InvalidRequest

__all__ = ["XLSX_MAGIC", "check_relative_name", "looks_like_xlsx", "shorten"]

XLSX_MAGIC = b"PK\x03\x04"
_MAX_NAME = 255
#: Linux's NAME_MAX: the most bytes one path component may have (a longer one fails at write).
_MAX_PART_BYTES = 255


def shorten(value: object, limit: int = 80) -> str:
    """``repr(value)`` clipped to about ``limit`` characters, for error messages that echo input
    (an echo of unbounded input would make the message itself unbounded)."""
    text = repr(value)
    if len(text) <= limit:
        return text
    size = len(value) if isinstance(value, str | bytes) else len(text)
    return f"{text[: max(8, limit - 24)]}...' ({size} characters)"


def check_relative_name(name: str, *, what: str = "file name") -> str:
    """Return ``name`` normalised if it is a safe relative POSIX path, else raise.

    Refused: empty names, absolute paths, ``..`` components, backslashes, control characters,
    names longer than 255 characters and components longer than 255 UTF-8 bytes (NAME_MAX).
    Messages quote at most a short prefix of ``name``.

    Raises:
        InvalidRequest: with a message naming the offending part.
    """
    if not name:
        raise InvalidRequest(f"{what} is empty")
    if len(name) > _MAX_NAME:
        raise InvalidRequest(f"{what} is longer than {_MAX_NAME} characters: {shorten(name, 60)}")
    if name.startswith("/"):
        raise InvalidRequest(f"{what} must be relative, got absolute path {shorten(name)}")
    if "\\" in name:
        raise InvalidRequest(f"{what} must use '/' separators, got {shorten(name)}")
    if any(unicodedata.category(ch) in ("Cc", "Cs") for ch in name):
        raise InvalidRequest(f"{what} contains control characters or lone surrogates: {shorten(name)}")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts:
        raise InvalidRequest(f"{what} names no file: {shorten(name)}")
    if ".." in parts:
        raise InvalidRequest(f"{what} escapes its directory (path traversal): {shorten(name)}")
    for part in parts:
        size = len(part.encode("utf-8"))
        if size > _MAX_PART_BYTES:
            raise InvalidRequest(
                f"{what} has a path component of {size} UTF-8 bytes; the limit is {_MAX_PART_BYTES} "
                f"bytes per component: {shorten(part, 60)}"
            )
    return "/".join(parts)


def looks_like_xlsx(data: bytes) -> bool:
    """Cheap check that bytes are a zip container (every .xlsx is one)."""
    return data[:4] == XLSX_MAGIC
