"""Killing and reaping what an execution left behind.

The runner is the container's PID 1 (or its only child under Docker's init): every orphan is
its child to reap, and after an execution it may have to kill every other process.
"""

from __future__ import annotations

import os
import select
import signal
import time

from .protocol import SWEEP_DEADLINE_S

_WAKEUP: list[int] = []


def child_wakeup_fd() -> int:
    """Read end of a pipe that receives a byte on every SIGCHLD (set up once)."""
    if not _WAKEUP:
        r, w = os.pipe()
        os.set_blocking(r, False)
        os.set_blocking(w, False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(w)
        _WAKEUP.extend((r, w))
    return _WAKEUP[0]


def has_wakeup_fd() -> bool:
    return bool(_WAKEUP)


def drain_wakeups(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def kill_everything_else(deadline_s: float = SWEEP_DEADLINE_S) -> int:
    """SIGKILL every process in the container but init and the runner; repeat until none is
    left or ``deadline_s`` passes (a fork bomb respawns between listing and killing). Returns
    the survivors' count.

    Between rounds it waits for SIGCHLD instead of spinning: a killed process still has to be
    scheduled to tear down its memory, and on a busy host a spinning runner starves exactly
    those exits (CI saw survivors after 200 back-to-back rounds)."""
    wake = child_wakeup_fd()
    end = time.monotonic() + deadline_s
    while True:
        survivors = [p for p in other_pids() if _is_alive(p)]
        if not survivors:
            _reap_all()
            drain_wakeups(wake)
            return 0
        if time.monotonic() >= end:
            return len(survivors)
        for pid in survivors:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        reap_children()
        select.select([wake], [], [], 0.02)
        drain_wakeups(wake)
        reap_children()


def reap_children() -> None:
    """Reap every child that has exited, without waiting for the others."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def other_pids() -> list[int]:
    """Every process of the container but init (PID 1) and the runner."""
    me = os.getpid()
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            pid = int(name)
            if pid not in (1, me):
                pids.append(pid)
    return pids


def _reap_all() -> None:
    """Wait for every child (as PID 1, every orphan is ours) so no zombie outlives an execution.
    Only called when all of them were killed, so the blocking wait ends."""
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _is_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[-1].split()[0]
        return state not in (b"Z", b"X")
    except (OSError, IndexError):
        return False
