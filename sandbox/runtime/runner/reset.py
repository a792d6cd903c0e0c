"""A verified clean slate between two executions of one tenant: the runner's half of container
recycling (``docs/recycling.md``).

When the runner starts, before any program has run, it records the container as it is then
(:class:`Baseline`): the places the sandbox's user can write (every tmpfs it may write to, the
POSIX message-queue folder) with what each holds and how much room each has, and the runner's
own state a program of the same uid could reach (its resource limits, scheduling priority and
policy, CPU affinity, I/O priority, umask, open descriptors, dumpability). On the service's
``reset`` request (:func:`reset`) it brings the container back to that record: every process but
the runner killed and reaped (whatever its session, process group or state: SIGKILL also ends a
stopped process), every writable place emptied back to its skeleton (the mount points Docker
made in it) with its modes and free room as recorded, every System V IPC object removed, what a
program could change of the runner restored where it may be, and then it checks every item
again. What it cannot restore or cannot confirm is a *problem*; one problem and the service
destroys the container instead of reusing it.

Why the runner's word can be taken here, when it is not for timeouts or OOM kills: a program can
reach the runner only through the items this module checks. The runner is the container's PID 1
(the kernel drops the signals a program sends it), not dumpable (no ptrace, its ``/proc`` files
belong to root, so no ``/proc/<pid>/mem``), its code is on a read-only mount, its control socket
is closed in every child, and every execution runs in a forked child whose memory is its own.
What a process of the same uid *can* do to another — lower its resource limits (``prlimit``),
raise its nice value, move its CPU affinity or I/O priority — is exactly what is compared with
the baseline. The service adds what it can see from outside (the container's pids cgroup, its
OOM counter).

Stdlib only, as the whole runner.
"""

from __future__ import annotations

import ctypes
import os
import resource
import stat
import struct
import sys
import time

from .child import libc
from .protocol import ResetReply
from .sweep import child_wakeup_fd, kill_everything_else, other_pids

#: File systems whose writable mounts a reset can empty (and so may exist).
_RESETTABLE_FS = frozenset({"tmpfs", "mqueue"})
#: Deepest directory tree a reset empties; a deeper one is a problem (the container goes).
MAX_DEPTH = 128
#: Longest a reset may spend emptying; past it the container goes instead.
CLEAN_DEADLINE_S = 10.0

_IPC_RMID = 0
# ioprio_get / ioprio_set by machine (the libc has no wrapper); others: not checked.
_IOPRIO_SYSCALLS = {"x86_64": (252, 251), "aarch64": (31, 30)}
_IOPRIO_WHO_PROCESS = 1


class _Place:
    """One writable place as the baseline found it: its mount point, device, owner and mode,
    its free blocks and inodes, and its skeleton (``relative path -> (mode, uid, gid)`` of what
    was in it: the mount points Docker made below it and their parent folders)."""

    __slots__ = ("bfree", "dev", "ffree", "gid", "mode", "path", "skeleton", "uid")

    def __init__(self, path: str) -> None:
        st = os.lstat(path)
        vfs = os.statvfs(path)
        self.path, self.dev = path, st.st_dev
        self.mode, self.uid, self.gid = stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid
        self.bfree, self.ffree = vfs.f_bfree, vfs.f_ffree
        self.skeleton: dict[str, tuple[int, int, int]] = {}
        _skeleton(path, "", st.st_dev, self.skeleton, 0)


def _skeleton(root: str, rel: str, dev: int, out: dict[str, tuple[int, int, int]], depth: int) -> None:
    """Record what ``root/rel`` holds at start (never deep: a few mount points at most)."""
    if depth > 8:
        return
    with os.scandir(os.path.join(root, rel) if rel else root) as entries:
        for entry in entries:
            st = entry.stat(follow_symlinks=False)
            path = f"{rel}/{entry.name}" if rel else entry.name
            out[path] = (st.st_mode, st.st_uid, st.st_gid)
            if stat.S_ISDIR(st.st_mode) and st.st_dev == dev:
                _skeleton(root, path, dev, out, depth + 1)


class Baseline:
    """The container and the runner as they were before any program ran (see the module)."""

    def __init__(self) -> None:
        child_wakeup_fd()  # the sweep's SIGCHLD pipe exists from now on: part of the recorded fds
        #: Why this container can never be reset (a writable place a reset cannot empty).
        self.unresettable: list[str] = []
        self.places = self._writable_places()
        self.fds = _open_fds()
        self.rlimits = {r: resource.getrlimit(r) for r in _rlimits()}
        self.priority = os.getpriority(os.PRIO_PROCESS, 0)
        self.scheduler = os.sched_getscheduler(0)
        self.affinity = os.sched_getaffinity(0)
        self.ioprio = _ioprio()
        self.umask = _umask()
        self.cwd = os.getcwd()
        self.environ = dict(os.environ)
        self.non_dumpable = _dumpable() == 0

    def _writable_places(self) -> list[_Place]:
        """Every mount the runner's uid may write to. A reset can empty a tmpfs or the message
        queue folder; any other writable mount (a writable root file system, a writable bind
        mount) makes the container unresettable."""
        places = []
        for point, fstype, options in _mounts():
            if "rw" not in options or point.startswith(("/proc", "/sys")) or not _writable(point):
                continue
            if fstype in _RESETTABLE_FS:
                places.append(_Place(point))
            else:
                self.unresettable.append(
                    f"unresettable: {point} ({fstype}) is writable and cannot be emptied"
                )
        return places


def reset(baseline: Baseline) -> ResetReply:
    """Bring the container back to ``baseline`` and check it (see the module). Call it with no
    warm child: every process but the runner (and Docker's init, when it runs) is killed.

    Returns the reply the service gets: its ``problems`` empty only when every item held."""
    t0 = time.monotonic()
    problems = list(baseline.unresettable)
    left = kill_everything_else()
    if left:
        problems.append(f"processes: {left} survived the sweep")
    removed = 0
    deadline = t0 + CLEAN_DEADLINE_S
    for place in baseline.places:
        try:
            removed += _empty(place, deadline)
        except _Unclean as exc:
            problems.append(f"files: {exc}")
        except OSError as exc:
            problems.append(f"files: {place.path}: cannot empty it: {exc.strerror or exc}")
    ipc_removed, ipc_problems = _remove_ipc()
    problems += ipc_problems
    restored = _restore_runner(baseline, problems)
    problems += _check(baseline)
    return ResetReply(
        problems=problems,
        files_removed=removed,
        ipc_removed=ipc_removed,
        restored=restored,
        duration_s=time.monotonic() - t0,
    )


# -- emptying the writable places ---------------------------------------------------------------


class _Unclean(Exception):
    """A place could not be brought back to its skeleton."""


def _empty(place: _Place, deadline: float) -> int:
    """Remove everything below ``place`` that is not in its skeleton, restore the skeleton's
    modes; the count of entries removed."""
    fd = os.open(place.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        if stat.S_IMODE(os.fstat(fd).st_mode) != place.mode:
            os.chmod(fd, place.mode)  # the owner of the workspace may have changed it
        return _empty_dir(fd, place, "", 0, deadline)
    finally:
        os.close(fd)


def _empty_dir(fd: int, place: _Place, rel: str, depth: int, deadline: float) -> int:
    if depth > MAX_DEPTH:
        raise _Unclean(f"{place.path}/{rel}: deeper than {MAX_DEPTH} folders")
    if time.monotonic() > deadline:
        raise _Unclean(f"{place.path}: emptying took longer than {CLEAN_DEADLINE_S:g}s")
    removed = 0
    with os.scandir(fd) as entries:
        names = [(e.name, e.stat(follow_symlinks=False)) for e in entries]
    for name, st in names:
        path = f"{rel}/{name}" if rel else name
        kept = place.skeleton.get(path)
        if stat.S_ISDIR(st.st_mode) and st.st_dev == place.dev:
            if (st.st_mode & stat.S_IRWXU) != stat.S_IRWXU and st.st_uid == os.getuid():
                os.chmod(name, 0o700, dir_fd=fd)  # a folder the program locked itself out of
            sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            try:
                removed += _empty_dir(sub, place, path, depth + 1, deadline)
            finally:
                os.close(sub)
            if kept is None:
                os.rmdir(name, dir_fd=fd)
                removed += 1
            elif stat.S_IMODE(kept[0]) != stat.S_IMODE(st.st_mode) and st.st_uid == os.getuid():
                os.chmod(name, stat.S_IMODE(kept[0]), dir_fd=fd)
        elif kept is None:
            os.unlink(name, dir_fd=fd)
            removed += 1
    return removed


def _check_place(place: _Place) -> list[str]:
    """What differs in ``place`` from its baseline: its entries, their modes, its free room.
    Each problem starts with its kind (``files:``, ``processes:``, ``ipc:``, ``runner:``)."""
    now: dict[str, tuple[int, int, int]] = {}
    try:
        _skeleton(place.path, "", place.dev, now, 0)
        st, vfs = os.lstat(place.path), os.statvfs(place.path)
    except OSError as exc:
        return [f"files: {place.path}: cannot read it: {exc.strerror or exc}"]
    problems = []
    if now != place.skeleton:
        extra = sorted(set(now) - set(place.skeleton))[:3]
        problems.append(f"files: {place.path} is not back to its start: {extra or 'modes or owners differ'}")
    if (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) != (place.mode, place.uid, place.gid):
        problems.append(f"files: {place.path}: mode or owner differs from its start")
    # Free room back to where it started: nothing unlinked is still held open, no file hidden.
    if vfs.f_bfree < place.bfree or vfs.f_ffree < place.ffree:
        problems.append(
            f"files: {place.path}: {place.bfree - vfs.f_bfree} blocks and {place.ffree - vfs.f_ffree} inodes "
            "still in use after emptying"
        )
    return problems


# -- System V IPC ----------------------------------------------------------------------------------

_IPC_STAT = 2
_SHM_INFO, _SEM_INFO, _MSG_INFO = 14, 19, 12
_PAGE = os.sysconf("SC_PAGE_SIZE")
#: Highest id scanned where ``/proc/sysvipc`` is missing (gVisor numbers its objects 1, 2, ...):
#: objects beyond it are not found, and the reset then fails (the counts stay above 0).
_SCAN_IDS = 1 << 15
_KINDS = ("shm", "sem", "msg")


def _ipc_left(kind: str, buf: ctypes.Array) -> int:
    """How much of ``kind`` exists in the container's IPC namespace, from the kernel's own
    summary (both runtimes): shared memory pages in use, semaphore sets, message queues. (gVisor's
    count of shared memory segments never goes down; its page count does.)"""
    c = libc()
    if kind == "shm":
        c.shmctl(0, _SHM_INFO, buf)
        return int(struct.unpack_from("@iL", buf.raw)[1])  # shm_info.shm_tot
    if kind == "sem":
        c.semctl(0, 0, _SEM_INFO, buf)
        return int(struct.unpack_from("@10i", buf.raw)[7])  # seminfo.semusz
    c.msgctl(0, _MSG_INFO, buf)
    return int(struct.unpack_from("@i", buf.raw)[0])  # msginfo.msgpool


def _ipc_ids(kind: str, buf: ctypes.Array) -> list[int]:
    """Ids of the container's System V IPC objects of ``kind``: from ``/proc/sysvipc`` where
    the kernel has it (Linux), else by asking for each id in turn (gVisor)."""
    try:
        with open(f"/proc/sysvipc/{kind}") as fh:
            return [int(line.split()[1]) for line in fh.read().splitlines()[1:] if line.split()]
    except OSError:
        pass
    if not _ipc_left(kind, buf):
        return []
    c = libc()
    found = []
    for ipc_id in range(_SCAN_IDS):
        ok = (
            c.semctl(ipc_id, 0, _IPC_STAT, buf)
            if kind == "sem"
            else getattr(c, f"{kind}ctl")(ipc_id, _IPC_STAT, buf)
        ) == 0
        if ok:
            found.append(ipc_id)
    return found


def _remove_ipc() -> tuple[int, list[str]]:
    """Remove every System V IPC object of the container; checked by the kernel's counts."""
    removed, problems = 0, []
    c = libc()
    buf = ctypes.create_string_buffer(512)
    for kind in _KINDS:
        for ipc_id in _ipc_ids(kind, buf):
            if kind == "sem":
                removed += c.semctl(ipc_id, 0, _IPC_RMID) == 0
            else:
                removed += getattr(c, f"{kind}ctl")(ipc_id, _IPC_RMID, None) == 0
        left = _ipc_left(kind, buf)
        if left:
            problems.append(f"ipc: System V {kind} objects remain ({left} in the kernel's count)")
    return removed, problems


# -- the runner's own state ----------------------------------------------------------------------


def _restore_runner(baseline: Baseline, problems: list[str]) -> list[str]:
    """Put back what a process of the runner's uid may have changed of it and the runner may
    change back itself (soft limits, affinity, I/O priority, umask); names what it restored."""
    restored = []
    for res, (soft, hard) in baseline.rlimits.items():
        now = resource.getrlimit(res)
        if now != (soft, hard) and now[1] == hard:
            try:
                resource.setrlimit(res, (soft, hard))
                restored.append(f"rlimit {res}")
            except (OSError, ValueError) as exc:
                problems.append(f"runner: rlimit {res}: cannot restore it: {exc}")
    if os.sched_getaffinity(0) != baseline.affinity:
        try:
            os.sched_setaffinity(0, baseline.affinity)
            restored.append("cpu affinity")
        except OSError as exc:
            problems.append(f"runner: cpu affinity: cannot restore it: {exc.strerror}")
    if baseline.ioprio is not None and _ioprio() != baseline.ioprio:
        _set_ioprio(baseline.ioprio)
        restored.append("io priority")
    if _umask() != baseline.umask:
        os.umask(baseline.umask)
        restored.append("umask")
    return restored


def _check(baseline: Baseline) -> list[str]:
    """Every item of the baseline, checked again after the reset."""
    problems = []
    for place in baseline.places:
        problems += _check_place(place)
    pids = other_pids()
    if pids:
        problems.append(f"processes: still running: {pids[:5]}")
    fds = _open_fds()
    if fds != baseline.fds:
        problems.append(
            f"runner: the runner's open descriptors differ from its start: {sorted(fds ^ baseline.fds)[:8]}"
        )
    for res, limits in baseline.rlimits.items():
        if resource.getrlimit(res) != limits:
            problems.append(f"runner: the runner's resource limit {res} was changed (hard limit lowered)")
    if os.getpriority(os.PRIO_PROCESS, 0) != baseline.priority:
        problems.append("runner: the runner's scheduling priority was lowered (nice)")
    if os.sched_getscheduler(0) != baseline.scheduler:
        problems.append("runner: the runner's scheduling policy was changed")
    if os.sched_getaffinity(0) != baseline.affinity:
        problems.append("runner: the runner's cpu affinity was changed")
    if baseline.ioprio is not None and _ioprio() != baseline.ioprio:
        problems.append("runner: the runner's io priority was changed")
    if _umask() != baseline.umask or os.getcwd() != baseline.cwd or dict(os.environ) != baseline.environ:
        problems.append("runner: the runner's umask, working directory or environment changed")
    if baseline.non_dumpable and (_dumpable() != 0 or os.stat("/proc/self/mem").st_uid != 0):
        # Non-dumpable: nobody of its uid may trace it, and its /proc files (its memory) are root's.
        problems.append("runner: the runner became dumpable (traceable, its /proc files its uid's)")
    writable = _writable_module(tuple(p.path for p in baseline.places))
    if writable:
        problems.append(f"runner: the runner holds a module loaded from a writable place: {writable}")
    return problems


def _writable_module(roots: tuple[str, ...]) -> str:
    """A module of the runner loaded from a writable place (a program's planted file), or ""."""
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None) or ""
        if path.startswith(roots):
            return name
    return ""


# -- small readers ---------------------------------------------------------------------------------


def _mounts() -> list[tuple[str, str, frozenset[str]]]:
    """``(mount point, file system, per-mount options)`` of every mount the runner sees."""
    out = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            left, _, right = line.partition(" - ")
            fields = left.split()
            fstype = right.split()[0] if right else ""
            point = fields[4].replace("\\040", " ")
            out.append((point, fstype, frozenset(fields[5].split(","))))
    return out


def _writable(path: str) -> bool:
    try:
        return os.access(path, os.W_OK)
    except OSError:
        return False


def _rlimits() -> list[int]:
    return [getattr(resource, n) for n in sorted(dir(resource)) if n.startswith("RLIMIT_")]


def _open_fds() -> set[int]:
    return {int(n) for n in os.listdir("/proc/self/fd")} - {_listing_fd()}


def _listing_fd() -> int:
    """The descriptor ``os.listdir('/proc/self/fd')`` itself opens (the lowest free one)."""
    fd = os.open("/dev/null", os.O_RDONLY)
    os.close(fd)
    return fd


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _dumpable() -> int:
    return int(libc().prctl(3, 0, 0, 0, 0))  # PR_GET_DUMPABLE


def _ioprio() -> int | None:
    calls = _IOPRIO_SYSCALLS.get(os.uname().machine)
    if calls is None:
        return None
    value = int(libc().syscall(calls[0], _IOPRIO_WHO_PROCESS, 0))
    return None if value < 0 else value


def _set_ioprio(value: int) -> None:
    calls = _IOPRIO_SYSCALLS.get(os.uname().machine)
    if calls is not None:
        libc().syscall(calls[1], _IOPRIO_WHO_PROCESS, 0, ctypes.c_int(value))
