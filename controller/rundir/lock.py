"""Who is running in a run directory, and asking it to stop.

A training or eval process holds an exclusive ``flock`` on ``<run>/.lock`` for as long as it
runs. The kernel drops the lock when the process ends in any way (exit, crash, ``kill -9``), so
the lock alone tells whether a run is alive, for runs started in a terminal and from the WebUI
alike. The file's content names the holder (pid, start time, command) for people and for the
stale-summary check in :mod:`controller.rundir.reader`.

``flock`` has no "test" operation, so :func:`lock_holder` probes with a shared lock held for an
instant. A process that wants the exclusive lock and meets only such probes waits for them
(they hold it for microseconds); one that meets another exclusive holder is refused: two
processes never write one run directory.

A stop request is a file, ``<run>/stop_request.json``, naming the pid it is meant for; the
training process looks for it at every stage boundary (:class:`controller.rundir.live.StopWatcher`)
and stops cleanly there. A request for another pid (a previous session) is ignored.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillopt.durable import atomic_write_json
from skillopt.errors import ConfigError
from skillopt.trainer.rundir import layout

__all__ = [
    "LOCK_NAME",
    "STOP_NAME",
    "LockHolder",
    "RunLock",
    "acquire_run_lock",
    "clear_stop_request",
    "lock_holder",
    "read_stop_request",
    "request_stop",
]

LOCK_NAME = layout.LOCK
STOP_NAME = layout.STOP


@dataclass(frozen=True)
class LockHolder:
    """What the lock file says about the process that holds (or last held) it."""

    pid: int
    started_at: float
    argv: tuple[str, ...] = ()

    @classmethod
    def read(cls, path: Path) -> LockHolder | None:
        try:
            data = json.loads(path.read_text(encoding="utf-8") or "{}")
            return cls(
                pid=int(data["pid"]),
                started_at=float(data["started_at"]),
                argv=tuple(str(a) for a in data.get("argv", ())),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None


class RunLock:
    """The exclusive lock of one run directory, held until :meth:`release` or process exit."""

    def __init__(self, fd: int, path: Path, holder: LockHolder) -> None:
        self._fd: int | None = fd
        self.path = path
        self.holder = holder

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:  # a lock dropped without release() still ends with its owner
        self.release()

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def acquire_run_lock(run_dir: Path, argv: list[str] | None = None) -> RunLock:
    """Take the run directory's lock for this process and record who holds it.

    Raises:
        ConfigError: another process runs in ``run_dir`` (named, with how to stop it).
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                # A shared lock is only refused while an exclusive holder exists.
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                other = LockHolder.read(path)
                who = f"pid {other.pid}" if other else "another process"
                raise ConfigError(
                    f"{run_dir} is in use by {who}: one process per run directory. Stop it first "
                    f"(skillopt runs stop {run_dir}, or the WebUI's Stop button)"
                ) from None
            # Only probes hold it, for an instant: wait for them.
            fcntl.flock(fd, fcntl.LOCK_EX)
        holder = LockHolder(pid=os.getpid(), started_at=time.time(), argv=tuple(argv or sys.argv))
        os.ftruncate(fd, 0)
        os.pwrite(
            fd,
            json.dumps(
                {"pid": holder.pid, "started_at": holder.started_at, "argv": list(holder.argv)}
            ).encode(),
            0,
        )
    except BaseException:
        os.close(fd)
        raise
    return RunLock(fd, path, holder)


def lock_holder(run_dir: Path) -> LockHolder | None:
    """The live process holding ``run_dir``'s lock, or None when nobody holds it."""
    path = run_dir / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return LockHolder.read(path) or LockHolder(pid=0, started_at=0.0)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def request_stop(run_dir: Path, *, reason: str, by: str) -> LockHolder:
    """Ask the process running in ``run_dir`` to stop at its next stage boundary.

    Returns:
        The process asked.

    Raises:
        ConfigError: nothing runs in ``run_dir``.
    """
    holder = lock_holder(run_dir)
    if holder is None:
        raise ConfigError(f"nothing runs in {run_dir}: there is nothing to stop")
    atomic_write_json(
        run_dir / STOP_NAME, {"pid": holder.pid, "reason": reason, "by": by, "requested_at": time.time()}
    )
    return holder


def read_stop_request(run_dir: Path, pid: int | None = None) -> dict[str, Any] | None:
    """The stop request in ``run_dir`` (only one meant for ``pid`` when given)."""
    try:
        data = json.loads((run_dir / STOP_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or (pid is not None and data.get("pid") != pid):
        return None
    return data


def clear_stop_request(run_dir: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        (run_dir / STOP_NAME).unlink()
