"""Which process owns a container, and whether that process is gone.

Every container and network a :class:`~sandbox.runtime.docker.runtime.DockerRuntime` creates
carries an owner label: the machine's boot id, the owner's PID namespace, its PID and its start
time (so a reused PID is not mistaken for the owner), and, when the owner itself runs in a
container (the compose deployment), that container's id and start time. Any process on the same
engine can then decide whether the owner still lives, whatever the owner's host id: a host
sweeps what dead hosts and killed CLIs left, at its start and periodically.

The decision is conservative: an owner is *gone* only when this process can prove it
(same boot and PID namespace: ``/proc/<pid>`` is missing or started at another time; owner in
a container: the engine says that container is gone, stopped or restarted). Anything else (a
label from another machine sharing the engine, an older label) is left to the containers'
expiry label.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Owner", "current_owner", "owner_gone"]

_VERSION = "o1"
_CONTAINER_IN_MOUNTINFO = re.compile(r"/containers/([0-9a-f]{64})/(?:hostname|hosts|resolv\.conf)\b")


@dataclass(frozen=True, slots=True)
class Owner:
    """One process's identity, as written into (and read back from) the owner label."""

    boot_id: str
    pid_ns: str
    pid: int
    start_ticks: int
    container: str = ""  # "<64-hex id>@<State.StartedAt>" when the owner runs in a container

    def label(self) -> str:
        return ":".join(
            (_VERSION, self.boot_id, self.pid_ns, str(self.pid), str(self.start_ticks), self.container)
        )

    @classmethod
    def parse(cls, label: str) -> Owner | None:
        """The owner a label names; None for anything malformed or of another version."""
        parts = label.split(":", 5)
        if len(parts) != 6 or parts[0] != _VERSION:
            return None
        try:
            return cls(parts[1], parts[2], int(parts[3]), int(parts[4]), parts[5])
        except ValueError:
            return None


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _pid_ns() -> str:
    try:
        return os.readlink("/proc/self/ns/pid").removeprefix("pid:[").rstrip("]")
    except OSError:
        return ""


def _stat(pid: int) -> tuple[str, int] | None:
    """State letter and start time (clock ticks since boot) of process ``pid`` from
    ``/proc/<pid>/stat`` (fields 3 and 22), or None when it cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ")".
    fields = stat[stat.rfind(")") + 2 :].split()
    try:
        return fields[0], int(fields[19])
    except (IndexError, ValueError):
        return None


def start_ticks(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot), or None when unknown."""
    stat = _stat(pid)
    return stat[1] if stat else None


def _process_gone(pid: int, started: int) -> bool:
    """No process ``pid``, or one that started at another time (the PID was reused)."""
    try:
        os.kill(pid, 0)  # unlike /proc, not hidden by hidepid: ESRCH means no such process
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # exists, someone else's
    stat = _stat(pid)
    if stat is None:
        return False  # unreadable: not provable
    state, ticks = stat
    return ticks != started or state in ("Z", "X")  # reused PID, or a zombie nobody waited for


def own_container_id() -> str:
    """The id of the container this process runs in ("" on a bare host): Docker bind-mounts
    the container's hostname/hosts/resolv.conf from ``.../containers/<id>/``."""
    try:
        text = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return ""
    found = _CONTAINER_IN_MOUNTINFO.search(text)
    return found.group(1) if found else ""


@functools.cache
def _process_part() -> tuple[str, str, int, int]:
    pid = os.getpid()
    return _boot_id(), _pid_ns(), pid, start_ticks(pid) or 0


def current_owner(container_started: Callable[[str], str | None] | None = None) -> Owner:
    """This process as an owner.

    Args:
        container_started: looks up a container's ``State.StartedAt`` on the engine; used to
            name the container this process runs in, if any.
    """
    boot, ns, pid, ticks = _process_part()
    if os.getpid() != pid:  # a forked child is another process
        _process_part.cache_clear()
        boot, ns, pid, ticks = _process_part()
    container = ""
    cid = own_container_id()
    if cid and container_started is not None:
        started = container_started(cid)
        if started:
            container = f"{cid}@{started}"
    return Owner(boot, ns, pid, ticks, container)


def owner_gone(label: str | None, me: Owner, container_started: Callable[[str], str | None]) -> bool:
    """Whether the owner ``label`` names is provably gone.

    Args:
        label: the owner label of a container or network (None: unlabelled, not provable).
        me: this process (its boot id and PID namespace decide what can be checked here).
        container_started: ``State.StartedAt`` of a *running* container, or None when the
            engine has no such running container.
    """
    owner = Owner.parse(label) if label else None
    if owner is None:
        return False
    if owner.boot_id == me.boot_id and owner.pid_ns == me.pid_ns and me.pid_ns:
        return _process_gone(owner.pid, owner.start_ticks)
    if owner.container:
        cid, _, started = owner.container.partition("@")
        return container_started(cid) != started
    return False
