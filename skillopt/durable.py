"""Durable file writes: a crash (even ``kill -9``) leaves either the old file or the new one,
never a torn one. Every run-directory file that resume reads back is written through here
(by :class:`skillopt.trainer.rundir.RunDirectory`, which also injects crashes for the tests).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["atomic_write_json", "atomic_write_text"]


def atomic_write_text(path: Path, text: str, *, durable: bool = True) -> None:
    """Write via a unique temp file in the same directory, fsync, and rename over ``path``.

    Args:
        durable: fsync before the rename; off only for files rewritten many times a minute that
            nothing reads back (``live.json``, progress for the WebUI): still never torn.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, data: Any, *, durable: bool = True) -> None:
    """:func:`atomic_write_text` of ``data`` as indented UTF-8 JSON."""
    atomic_write_text(
        path, json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n", durable=durable
    )
