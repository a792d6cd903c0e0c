"""Units of size, named once: a limit reads ``16 * MiB`` wherever it is set.

A mebibyte is 1024 * 1024 bytes. Our size options and messages say MiB (``memory_mb``,
``skill_max_mb``, "the 1024 MiB memory limit"), so every limit in bytes is written with this one
constant instead of each module defining its own copy.
"""

from __future__ import annotations

__all__ = ["MiB"]

MiB = 1024 * 1024
