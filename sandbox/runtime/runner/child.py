"""The forked child that runs one execution, forked ahead of time.

Forking a parent that holds openpyxl (or pandas) costs ~2.5 ms, which a child forked before the
request arrives keeps off the path from request to first instruction: it waits, blocked reading
its job from a pipe, and then runs the program in-process (a Python file, from the parent's
already imported modules) or ``exec``s it (any other program).
"""

from __future__ import annotations

import builtins
import ctypes
import errno
import json
import marshal
import os
import signal
import sys
import traceback
import types

from .protocol import WORKSPACE, ExecRequest, SpawnCode
from .sweep import child_wakeup_fd, has_wakeup_fd

_READ_CHUNK = 65536
_PR_SET_DUMPABLE = 4


class WarmChild:
    """A child forked ahead of time, blocked reading its job (an :class:`ExecRequest`'s
    ``values()``, marshalled) from ``job_w``; its stdin, stdout and stderr are the pipes ``in_w``, ``out_r`` and
    ``err_r``, and ``spawn_r`` tells why a program did not start.

    ``pidfd`` becomes readable when the child exits: its own pidfd (``owns_fd``), or on kernels
    and sandboxes without ``pidfd_open`` (gVisor) the SIGCHLD wake-up pipe, when the exit is
    confirmed with ``waitpid``."""

    def __init__(self, ctl_fd: int) -> None:
        job_r, self.job_w = os.pipe()
        in_r, self.in_w = os.pipe()
        self.out_r, out_w = os.pipe()
        self.err_r, err_w = os.pipe()
        # Close-on-exec (os.pipe's default): stays empty when the program started, and carries
        # the errno when it could not (a missing or non-executable program).
        self.spawn_r, spawn_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            # The parent's ends must be closed here, or the job pipe never reaches EOF.
            for fd in (self.job_w, self.in_w, self.out_r, self.err_r, self.spawn_r):
                os.close(fd)
            _child(job_r, in_r, out_w, err_w, ctl_fd, spawn_w)
        self.pid = pid
        try:
            self.pidfd = os.pidfd_open(pid)
            self.owns_fd = True
        except OSError:
            self.pidfd = child_wakeup_fd()
            self.owns_fd = False
        for fd in (job_r, in_r, out_w, err_w, spawn_w):
            os.close(fd)

    def discard(self) -> None:
        """End the unused child (EOF on its job pipe) and release its pipes."""
        os.close(self.job_w)
        os.waitpid(self.pid, 0)
        for fd in (self.in_w, self.out_r, self.err_r, self.spawn_r):
            os.close(fd)
        if self.owns_fd:
            os.close(self.pidfd)


def set_dumpable(on: bool) -> bool:
    """``prctl(PR_SET_DUMPABLE)``. The runner makes itself non-dumpable: the code it runs has
    the same uid, and without this it could ``ptrace`` its runner (no Yama here, and Docker's
    seccomp allows ptrace) and so stop it, forge its replies or take over its control socket:
    a hung runner turns the program's own failure into an unscored infrastructure error. A
    non-dumpable process can only be traced with CAP_SYS_PTRACE, which no rollout has. Forked
    children turn it back on for themselves, so the code they run sees an ordinary process.
    Returns whether the call succeeded."""
    try:
        return libc().prctl(_PR_SET_DUMPABLE, 1 if on else 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def libc() -> ctypes.CDLL:
    """The C library, loaded once in the runner (every forked child inherits the handle)."""
    if not _LIBC:
        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    return _LIBC[0]


_LIBC: list[ctypes.CDLL] = []


def read_spawn_error(fd: int) -> dict | None:
    """Why the program did not start, from the close-on-exec pipe (``None``: it started)."""
    try:
        os.set_blocking(fd, False)
        data = os.read(fd, 4096)
    except (BlockingIOError, OSError):
        data = b""
    finally:
        os.close(fd)
    if not data:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return {"code": SpawnCode.NOT_FOUND, "message": data.decode("utf-8", "replace")}


# -- in the child -------------------------------------------------------------------------------


def _child(job_r: int, in_r: int, out_w: int, err_w: int, ctl_fd: int, spawn_w: int) -> None:
    """Runs in the forked child: wait for the job, then run it. Never returns."""
    code = 127
    try:
        _detach(ctl_fd)
        raw = _read_all(job_r)
        if not raw:  # the runner is going away
            os._exit(0)
        job = ExecRequest(**marshal.loads(raw))
        os.dup2(in_r, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        _close_inherited_fds(keep=spawn_w)
        try:
            os.chdir(job.cwd or WORKSPACE)
        except OSError as exc:
            _spawn_failed(spawn_w, SpawnCode.CWD, exc)
        if job.argv:
            _exec_program(job, spawn_w)
        code = _run_python(job)
    except BaseException:
        try:
            traceback.print_exc()
        except BaseException:
            pass
        code = 127
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        os._exit(code)


def _detach(ctl_fd: int) -> None:
    """Leave the runner's session, connection and signal handling behind."""
    os.setsid()
    os.close(ctl_fd)
    set_dumpable(True)
    if has_wakeup_fd():
        signal.set_wakeup_fd(-1)
    for sig in (signal.SIGPIPE, signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)


def _exec_program(job: ExecRequest, spawn_w: int) -> None:
    """Replace this process with ``job.argv``; reports why not and exits if it cannot."""
    try:
        os.execvpe(job.argv[0], job.argv, dict(job.env))
    except OSError as exc:
        denied = exc.errno in (errno.EACCES, errno.EPERM, errno.ENOEXEC)
        _spawn_failed(spawn_w, SpawnCode.PERMISSION if denied else SpawnCode.NOT_FOUND, exc)


def _run_python(job: ExecRequest) -> int:
    """Run ``job.python`` as ``__main__`` in this process; its exit code."""
    os.environ.clear()
    os.environ.update(job.env)
    path = job.python
    sys.argv = [path, *job.args]
    sys.path[0] = os.path.dirname(os.path.abspath(path))
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 - process-lifetime streams
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
    try:
        _run_main(path)
        return 0
    except SystemExit as exc:
        if exc.code is None:
            return 0
        if isinstance(exc.code, int):
            return exc.code & 0xFF
        print(exc.code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1


def _run_main(path: str) -> None:
    """Execute a Python file as ``__main__``. Cheaper than ``runpy.run_path``, whose lazy
    imports would be paid again in every forked child (~8 ms without pandas preloaded)."""
    with open(path, "rb") as fh:
        source = fh.read()
    code = compile(source, path, "exec", dont_inherit=True)
    module = types.ModuleType("__main__")
    module.__file__ = path
    module.__builtins__ = builtins  # type: ignore[attr-defined]  # as the interpreter sets it
    sys.modules["__main__"] = module
    exec(code, module.__dict__)


def _close_inherited_fds(keep: int = -1) -> None:
    """Close every fd above 2 but ``keep``: one ``close_range(2)`` on each side of it (what
    ``os.closerange`` calls). Listing /proc/self/fd and closing each fd took 8-10 system calls,
    0.3 ms on a quiet machine and ~0.9 ms on a busy one under gVisor's ptrace platform (each
    call a round trip to gVisor's kernel, ~23 us), on the path to the program's first
    instruction. The descriptor limit bounds closerange's fallback loop on a kernel without
    close_range."""
    top = os.sysconf("SC_OPEN_MAX")
    top = top if 0 < top <= 1 << 20 else 1 << 20
    if keep > 2:
        os.closerange(3, keep)
        os.closerange(keep + 1, top)
    else:
        os.closerange(3, top)


def _spawn_failed(spawn_w: int, code: str, exc: OSError) -> None:
    """Report why the program did not start (over the close-on-exec pipe) and exit 127."""
    try:
        os.write(spawn_w, json.dumps({"code": code, "message": exc.strerror or str(exc)}).encode())
    finally:
        os._exit(127)


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    while True:
        data = os.read(fd, _READ_CHUNK)
        if not data:
            return b"".join(chunks)
        chunks.append(data)
