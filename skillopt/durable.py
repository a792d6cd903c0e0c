"""Durable file writes: a crash (even ``kill -9``) leaves either the old file or the new one,
never a torn one, and so does a full disk (ENOSPC): the write fails, the old file stands, no
temp file is left. Every run-directory file that resume reads back is written through here
(by :class:`skillopt.trainer.rundir.RunDirectory`, which also injects crashes for the tests);
JSON-lines files grow by :func:`append_text`, a whole record or nothing.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["append_text", "atomic_write_bytes", "atomic_write_json", "atomic_write_text", "is_disk_full"]

#: The errors of a filesystem out of space (or of the user's quota on it).
DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_disk_full(exc: BaseException) -> bool:
    """True for an ``OSError`` saying the filesystem (or the quota) has no space left."""
    return isinstance(exc, OSError) and exc.errno in DISK_FULL


def atomic_write_bytes(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Write via a unique temp file in the same directory, fsync, and rename over ``path``.

    Args:
        durable: fsync before the rename; off for files rewritten many times a minute that
            nothing reads back (``live.json``, progress for the WebUI) and for files a crash
            may lose because they are made again (a row's prediction files): still never torn.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        _name(exc, path)
        raise


def atomic_write_text(path: Path, text: str, *, durable: bool = True) -> None:
    """:func:`atomic_write_bytes` of ``text`` as UTF-8."""
    atomic_write_bytes(path, text.encode("utf-8"), durable=durable)


def append_text(path: Path, text: str) -> None:
    """Append ``text`` (whole records, e.g. JSON lines) in one ``write``, or nothing: when the
    disk fills part way, the file is cut back to its old end before the error is raised, so a
    reader never meets half a record. (A ``kill -9`` mid-write can still tear the last line:
    the readers of JSON-lines files skip one.)"""
    data = text.encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        end = os.fstat(fd).st_size
        try:
            done = 0
            while done < len(data):
                done += os.write(fd, data[done:])
        except OSError as exc:
            os.ftruncate(fd, end)  # frees what the torn part took: needs no space
            _name(exc, path)
            raise
    finally:
        os.close(fd)


def _name(exc: BaseException, path: Path) -> None:
    # A failed write() names no file; the error message should (ENOSPC: which disk is full).
    if isinstance(exc, OSError) and not exc.filename:
        exc.filename = str(path)


def atomic_write_json(path: Path, data: Any, *, durable: bool = True) -> None:
    """:func:`atomic_write_text` of ``data`` as indented UTF-8 JSON."""
    atomic_write_text(
        path, json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n", durable=durable
    )
