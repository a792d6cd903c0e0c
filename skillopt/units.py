"""Units of size, named once: a limit reads ``16 * MiB`` wherever it is set, and a size is
printed the one way :func:`size_text` prints it.

A mebibyte is 1024 * 1024 bytes. Our size options and messages say MiB (``memory_mb``,
``skill_max_mb``, "the 1024 MiB memory limit"), so every limit in bytes is written with this one
constant instead of each module defining its own copy.
"""

from __future__ import annotations

__all__ = ["MiB", "size_text"]

MiB = 1024 * 1024


def size_text(n: int) -> str:
    """``n`` bytes as a person reads them: ``512 B``, ``1.5 KiB``, ``3.0 MiB``."""
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KiB" if n < MiB else f"{n / MiB:.1f} MiB"
