"""The in-container runner: the rollout container's main process.

Bind-mounted read-only into every rollout container and started by Docker's init as
``python3 /opt/skillopt/runner.py --connect /control/runner.sock``. It imports the heavy
libraries once (``--preimport``, openpyxl by default), connects to the listening socket the
sandbox service created in the control directory, and then serves requests over that one
connection: write, read and list workspace files, and execute programs in a forked child.

Libraries named in ``--import-on-demand`` (pandas by default) are imported by this parent only
when a Python program it is asked to run mentions them, before the fork: a container pays for
pandas (~0.2 s of CPU, a third of a container's whole cost) only when its rollout uses it, and
then once, not in every forked execution.

The preimport hides numpy: openpyxl imports it only to count numpy scalars as numbers, which
is ~45% of its import (~50 ms of CPU per container). When numpy is imported later (pandas, or
the program), openpyxl is given those types back (:func:`_give_openpyxl_numpy`), so writing a
numpy value into a cell behaves as with a plain ``import openpyxl``.

Why a runner instead of ``docker exec``: an exec costs ~50 ms here, a fork from a parent that
already imported openpyxl costs ~2 ms, which makes sandboxed execution faster than a bare host
subprocess (DESIGN §4).

Trust: this process runs as the same unprivileged user as the code it executes, so its word is
not trusted by the service for anything that matters (timeouts and OOM kills are determined on
the host side). The established connection cannot be hijacked by the child: the listening
socket is gone once connected and the child closes the fd right after fork.

Wire format, both directions: a 4-byte big-endian length, a UTF-8 JSON header of that length,
then ``header["size"]`` raw bytes when the header has a ``size``. Stdlib only: this file runs on
the image's Python, not the service's.
"""

from __future__ import annotations

import argparse
import builtins
import ctypes
import errno
import gc
import importlib
import json
import os
import re
import select
import signal
import socket
import stat
import struct
import sys
import time
import traceback
import types

PROTOCOL_VERSION = 1
WORKSPACE = "/workspace"
_HEADER = struct.Struct(">I")
_MAX_HEADER = 16 * 1024 * 1024
_READ_CHUNK = 65536
_PR_SET_DUMPABLE = 4


# ---------------------------------------------------------------------------------------------
# framing


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError("control connection closed")
        buf += chunk
    return bytes(buf)


def recv_message(sock: socket.socket, max_size: int | None = None) -> tuple[dict, bytes]:
    """One message; a payload larger than ``max_size`` is refused before it is read
    (``ValueError``): the service bounds what a container may make it hold."""
    (length,) = _HEADER.unpack(_recv_exact(sock, _HEADER.size))
    if length > _MAX_HEADER:
        raise ValueError(f"header too large: {length}")
    header = json.loads(_recv_exact(sock, length).decode("utf-8"))
    size = int(header.get("size") or 0)
    if max_size is not None and size > max_size:
        raise ValueError(f"payload of {size} bytes exceeds {max_size}")
    payload = _recv_exact(sock, size) if size else b""
    return header, payload


def send_message(sock: socket.socket, header: dict, payload: bytes = b"") -> None:
    if payload:
        header = {**header, "size": len(payload)}
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    sock.sendall(_HEADER.pack(len(raw)) + raw + payload)


# ---------------------------------------------------------------------------------------------
# workspace files (never following links)


class RequestError(Exception):
    """A request the runner refuses; reported back as ``{"ok": false, "error": ...}``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _split_rel(path: str) -> list[str]:
    if not path or path.startswith("/") or "\\" in path or "\x00" in path:
        raise RequestError("bad_path", f"path must be relative: {path!r}")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts):
        raise RequestError("bad_path", f"path escapes the workspace: {path!r}")
    return parts


def _open_parent(parts: list[str], *, create: bool) -> int:
    """Open the directory holding ``parts[-1]`` below the workspace, refusing symlinks."""
    fd = os.open(WORKSPACE, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for name in parts[:-1]:
            try:
                nfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(name, 0o755, dir_fd=fd)
                nfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                raise RequestError("bad_path", f"not a directory: {name!r} ({exc.strerror})") from exc
            os.close(fd)
            fd = nfd
        return fd
    except BaseException:
        os.close(fd)
        raise


def op_write(header: dict, payload: bytes) -> tuple[dict, bytes]:
    parts = _split_rel(header["path"])
    dfd = _open_parent(parts, create=True)
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
        try:
            fd = os.open(parts[-1], flags, int(header.get("mode", 0o644)), dir_fd=dfd)
        except OSError as exc:
            raise RequestError("bad_path", f"cannot write {header['path']!r}: {exc.strerror}") from exc
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
    finally:
        os.close(dfd)
    return {"ok": True}, b""


def op_read(header: dict, _payload: bytes) -> tuple[dict, bytes]:
    parts = _split_rel(header["path"])
    max_bytes = int(header.get("max_bytes", 64 << 20))
    try:
        dfd = _open_parent(parts, create=False)
    except FileNotFoundError:
        return {"ok": True, "exists": False}, b""
    except RequestError as exc:  # a link (or a file) where a directory should be: never followed
        raise RequestError("not_regular", f"not a regular file: {header['path']!r} ({exc})") from exc
    try:
        try:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dfd)
        except FileNotFoundError:
            return {"ok": True, "exists": False}, b""
        except OSError as exc:  # ELOOP: a symlink
            raise RequestError("not_regular", f"not a regular file: {header['path']!r}") from exc
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # a directory or special file
            os.close(fd)
            raise RequestError("not_regular", f"not a regular file: {header['path']!r}")
        with os.fdopen(fd, "rb") as fh:
            if st.st_size > max_bytes:
                raise RequestError("too_large", f"{header['path']!r} is {st.st_size} bytes > {max_bytes}")
            data = fh.read(max_bytes + 1)
            if len(data) > max_bytes:
                raise RequestError("too_large", f"{header['path']!r} grew beyond {max_bytes} bytes")
    finally:
        os.close(dfd)
    return {"ok": True, "exists": True}, data


def op_list(header: dict, _payload: bytes) -> tuple[dict, bytes]:
    max_files = int(header.get("max_files", 1000))
    files: list[dict] = []
    truncated = False
    for dirpath, dirnames, filenames in os.walk(WORKSPACE, followlinks=False):
        dirnames.sort()
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            try:
                st = os.lstat(full)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            if len(files) >= max_files:
                truncated = True
                break
            files.append({"path": os.path.relpath(full, WORKSPACE), "size": st.st_size})
        if truncated:
            break
    return {"ok": True, "files": files, "truncated": truncated}, b""


# ---------------------------------------------------------------------------------------------
# session files: any path the container's user may use (absolute, or relative to the workspace)
#
# Sessions are driven by their owner, not graded: links are followed like any program would, and
# what the user may not touch fails with the errno's own kind, which the service passes on
# typed (missing, permission, directory, too large).

_ERRNO_CODES = {
    errno.ENOENT: "not_found",
    errno.ENOTDIR: "not_found",
    errno.EACCES: "permission",
    errno.EPERM: "permission",
    errno.EROFS: "permission",
    errno.EISDIR: "is_dir",
    errno.ENXIO: "permission",  # a FIFO without a reader, a device: not a file to write
    errno.EFBIG: "too_large",
    errno.ENOSPC: "no_space",
    errno.EDQUOT: "no_space",
    errno.ENAMETOOLONG: "bad_path",
    errno.ELOOP: "bad_path",
}


def session_path(path: str, base: str = WORKSPACE) -> str:
    """``path`` made absolute (relative paths are below ``base``)."""
    if not path or "\x00" in path:
        raise RequestError("bad_path", f"not a usable path: {path!r}")
    return os.path.normpath(os.path.join(base, path))


def _os_error(exc: OSError, path: str) -> RequestError:
    code = _ERRNO_CODES.get(exc.errno or 0, "os_error")
    return RequestError(code, f"{path}: {exc.strerror or exc}")


def op_fs_write(header: dict, payload: bytes) -> tuple[dict, bytes]:
    path = session_path(header["path"])
    try:
        if os.path.isdir(path):
            raise IsADirectoryError(errno.EISDIR, "Is a directory")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        # Non-blocking open, then only a regular file is written: a FIFO planted at the path
        # would otherwise block this process (the session's only runner) until a reader came.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK, 0o644)
    except OSError as exc:
        raise _os_error(exc, header["path"]) from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RequestError("permission", f"{header['path']}: not a regular file")
        os.set_blocking(fd, True)
        os.ftruncate(fd, 0)
        _write_all(fd, payload)
    except OSError as exc:
        raise _os_error(exc, header["path"]) from exc
    finally:
        os.close(fd)
    return {"ok": True, "written": len(payload)}, b""


def op_fs_read(header: dict, _payload: bytes) -> tuple[dict, bytes]:
    path = session_path(header["path"])
    max_bytes = int(header.get("max_bytes", 64 << 20))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise _os_error(exc, header["path"]) from exc
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise RequestError("is_dir", f"{header['path']}: Is a directory")
        if not stat.S_ISREG(st.st_mode):  # a FIFO or device would block or never end
            raise RequestError("permission", f"{header['path']}: not a regular file")
        if st.st_size > max_bytes:
            raise RequestError("too_large", f"{header['path']} is {st.st_size} bytes > {max_bytes}")
        os.set_blocking(fd, True)
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise _os_error(exc, header["path"]) from exc
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise RequestError("too_large", f"{header['path']} grew beyond {max_bytes} bytes")
    return {"ok": True}, data


# ---------------------------------------------------------------------------------------------
# execution


class _Tail:
    """Keeps the last ``cap`` bytes of a stream and counts everything seen."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.buf = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        self.buf += data
        if len(self.buf) > self.cap:
            del self.buf[: len(self.buf) - self.cap]

    def text(self) -> str:
        return self.buf.decode("utf-8", "replace")


def _other_pids() -> list[int]:
    me = os.getpid()
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            pid = int(name)
            if pid not in (1, me):
                pids.append(pid)
    return pids


#: How long the sweep after an execution may take. Every process left (a fork bomb's 255
#: sleepers) must exit, and an exit tears down a copy of a parent that holds pandas: on a
#: loaded 2-core host that took ~0.1 s each (the hostile suite's fork_bomb), so 5 s left
#: survivors and turned the program's own failure into an unscored infrastructure error.
SWEEP_DEADLINE_S = 30.0


def kill_everything_else(deadline_s: float = SWEEP_DEADLINE_S) -> int:
    """SIGKILL every process in the container but init and the runner; repeat until none is
    left or ``deadline_s`` passes (a fork bomb respawns between listing and killing). Returns
    the survivors' count.

    Between rounds it waits for SIGCHLD instead of spinning: a killed process still has to be
    scheduled to tear down its memory, and on a busy host a spinning runner starves exactly
    those exits (CI saw survivors after 200 back-to-back rounds)."""
    wake = _child_wakeup_fd()
    end = time.monotonic() + deadline_s
    while True:
        survivors = [p for p in _other_pids() if _is_alive(p)]
        if not survivors:
            _reap_all()
            _drain_wakeups(wake)
            return 0
        if time.monotonic() >= end:
            return len(survivors)
        for pid in survivors:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        _reap_children()
        select.select([wake], [], [], 0.02)
        _drain_wakeups(wake)
        _reap_children()


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


def _reap_children() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _run_main(path: str) -> None:
    """Execute a Python file as ``__main__``. Cheaper than ``runpy.run_path``, whose lazy
    imports would be paid again in every forked child (~8 ms without pandas preloaded)."""
    with open(path, "rb") as fh:
        source = fh.read()
    code = compile(source, path, "exec", dont_inherit=True)
    module = types.ModuleType("__main__")
    module.__file__ = path
    module.__builtins__ = builtins
    sys.modules["__main__"] = module
    exec(code, module.__dict__)


def _close_inherited_fds(keep: int = -1) -> None:
    # Listing our own fds is much cheaper than closerange(3, 65536) (~5 ms of syscalls).
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd != keep:
            try:
                os.close(fd)
            except OSError:
                pass


def set_dumpable(on: bool) -> bool:
    """``prctl(PR_SET_DUMPABLE)``. The runner makes itself non-dumpable: the code it runs has
    the same uid, and without this it could ``ptrace`` its runner (no Yama here, and Docker's
    seccomp allows ptrace) and so stop it, forge its replies or take over its control socket:
    a hung runner turns the program's own failure into an unscored infrastructure error. A
    non-dumpable process can only be traced with CAP_SYS_PTRACE, which no rollout has. Forked
    children turn it back on for themselves, so the code they run sees an ordinary process.
    Returns whether the call succeeded."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_DUMPABLE, 1 if on else 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


class _Warm:
    """A child forked ahead of time, blocked reading its job: forking a parent that holds
    pandas costs ~2.5 ms, which this keeps off the path from request to first instruction."""

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
        # pidfd: readable when the child exits. Kernels or sandboxes without pidfd_open (gVisor)
        # use the SIGCHLD wake-up pipe instead, and the exit is confirmed with waitpid.
        try:
            self.pidfd = os.pidfd_open(pid)
            self.owns_fd = True
        except OSError:
            self.pidfd = _child_wakeup_fd()
            self.owns_fd = False
        for fd in (job_r, in_r, out_w, err_w, spawn_w):
            os.close(fd)


_WAKEUP: list[int] = []


def _child_wakeup_fd() -> int:
    """Read end of a pipe that receives a byte on every SIGCHLD (set up once)."""
    if not _WAKEUP:
        r, w = os.pipe()
        os.set_blocking(r, False)
        os.set_blocking(w, False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(w)
        _WAKEUP.extend((r, w))
    return _WAKEUP[0]


def _drain_wakeups(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        data = os.read(fd, _READ_CHUNK)
        if not data:
            return b"".join(chunks)
        chunks.append(data)


def _child(job_r: int, in_r: int, out_w: int, err_w: int, ctl_fd: int, spawn_w: int) -> None:
    """Runs in the forked child: wait for the job, then run it. Never returns."""
    code = 127
    try:
        os.setsid()
        os.close(ctl_fd)
        set_dumpable(True)
        if _WAKEUP:
            signal.set_wakeup_fd(-1)
        for sig in (signal.SIGPIPE, signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        raw = _read_all(job_r)
        if not raw:  # the runner is going away
            os._exit(0)
        header = json.loads(raw)
        os.dup2(in_r, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        _close_inherited_fds(keep=spawn_w)
        env = dict(header.get("env") or {})
        try:
            os.chdir(header.get("cwd") or WORKSPACE)
        except OSError as exc:
            _spawn_failed(spawn_w, "cwd", exc)
        argv = header.get("argv")
        if argv:
            try:
                os.execvpe(argv[0], argv, env)  # replaces the process; returns only on error
            except OSError as exc:
                code = (
                    "permission" if exc.errno in (errno.EACCES, errno.EPERM, errno.ENOEXEC) else "not_found"
                )
                _spawn_failed(spawn_w, code, exc)
        os.environ.clear()
        os.environ.update(env)
        path = header["python"]
        sys.argv = [path, *header.get("args", [])]
        sys.path[0] = os.path.dirname(os.path.abspath(path))
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - process-lifetime streams
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        try:
            _run_main(path)
            code = 0
        except SystemExit as exc:
            if exc.code is None:
                code = 0
            elif isinstance(exc.code, int):
                code = exc.code & 0xFF
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except BaseException:
            traceback.print_exc()
            code = 1
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


def _spawn_failed(spawn_w: int, code: str, exc: OSError) -> None:
    """Report why the program did not start (over the close-on-exec pipe) and exit 127."""
    try:
        os.write(spawn_w, json.dumps({"code": code, "message": exc.strerror or str(exc)}).encode())
    finally:
        os._exit(127)


#: Largest program the parent scans for on-demand imports (a bigger one is run as it is).
_SCAN_MAX_BYTES = 1 << 20


def _mentions(path: str, modules: list[str]) -> list[str]:
    """The ``modules`` the Python program at ``path`` imports (by a plain text match: a miss
    only means the child imports the module itself). The file is untrusted: only a regular
    file is read (never a FIFO that would block, nor a link), and only its first MiB."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return []
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return []
        source = os.read(fd, _SCAN_MAX_BYTES)
    except OSError:
        return []
    finally:
        os.close(fd)
    return [
        m
        for m in modules
        if re.search(rb"\b(?:import|from)\s[^\n;]*\b" + re.escape(m.encode()) + rb"\b", source)
    ]


#: Preimports whose use of numpy is optional: imported with numpy hidden.
_NUMPY_OPTIONAL = frozenset({"openpyxl"})


def _preimport(name: str) -> None:
    """Import ``name``; openpyxl with numpy hidden (an ImportError for its optional import of
    it), watching for numpy's real import to give openpyxl its numpy types then. Modules that
    need numpy (TextWorld's) import it as usual."""
    if name not in _NUMPY_OPTIONAL or "numpy" in sys.modules:
        importlib.import_module(name)
        return
    sys.modules["numpy"] = None  # type: ignore[assignment]  # "import numpy" raises ImportError
    try:
        importlib.import_module(name)
    finally:
        del sys.modules["numpy"]
    if not any(isinstance(f, _AfterNumpy) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterNumpy())


class _AfterNumpy:
    """A meta-path finder that only notices numpy's import: it finds numpy's real spec and
    runs :func:`_give_openpyxl_numpy` once its module has executed."""

    def find_spec(self, fullname: str, path: object, target: object = None) -> object:
        if fullname != "numpy":
            return None
        sys.meta_path.remove(self)  # once; and the lookup below must not find us again
        import importlib.util

        spec = importlib.util.find_spec("numpy")
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module: types.ModuleType) -> None:
            run(module)
            _give_openpyxl_numpy(module)

        loader.exec_module = exec_module
        return spec


_NUMPY_NUMBERS = [
    "short",
    "ushort",
    "intc",
    "uintc",
    "int_",
    "uint",
    "longlong",
    "ulonglong",
    "half",
    "float16",
    "single",
    "double",
    "longdouble",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "intp",
    "uintp",
    "float32",
    "float64",
    "bool_",
    "floating",
    "integer",
]


def _give_openpyxl_numpy(numpy: types.ModuleType) -> None:
    """What openpyxl's ``compat.numbers`` adds when numpy imports at its own import: the numpy
    scalar types in ``NUMERIC_TYPES`` (and every tuple built from it, such as ``cell.cell``'s
    ``KNOWN_TYPES``) and ``NUMPY = True``."""
    numbers = sys.modules.get("openpyxl.compat.numbers")
    if numbers is None or getattr(numbers, "NUMPY", True):
        return
    old = numbers.NUMERIC_TYPES
    extra = tuple(t for t in (getattr(numpy, n, None) for n in _NUMPY_NUMBERS) if isinstance(t, type))
    new = old + tuple(dict.fromkeys(t for t in extra if t not in old))
    for mod_name, mod in list(sys.modules.items()):
        if mod is None or not (mod_name == "openpyxl" or mod_name.startswith("openpyxl.")):
            continue
        for attr, value in list(vars(mod).items()):
            if value is old:
                setattr(mod, attr, new)
            elif (
                isinstance(value, tuple)
                and value[: len(old)] == old
                and len(value) > len(old)
                and attr.isupper()
            ):
                setattr(mod, attr, new + value[len(old) :])  # e.g. KNOWN_TYPES = NUMERIC_TYPES + ...
            elif attr == "NUMPY" and value is False:
                setattr(mod, attr, True)


def _import_into_parent(names: list[str]) -> None:
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as exc:  # the program will meet the same error and report it
            print(f"runner: import {name} failed: {exc}", file=sys.stderr)
    gc.collect()
    gc.freeze()  # keep the new heap shared with the children, as at start-up


class PreforkedChild:
    """Runs one execution at a time in a pre-forked child and keeps the next one ready.

    ``on_demand``: modules imported into this parent (before forking) the first time a program
    mentions them."""

    def __init__(self, ctl_fd: int, on_demand: list[str] | None = None) -> None:
        self.ctl_fd = ctl_fd
        self.warm: _Warm | None = None
        self.on_demand = list(on_demand or [])

    def prefork(self) -> None:
        if self.warm is None:
            self.warm = _Warm(self.ctl_fd)

    def discard(self) -> None:
        if self.warm is not None:
            os.close(self.warm.job_w)  # EOF: the child exits
            os.waitpid(self.warm.pid, 0)
            for fd in (self.warm.in_w, self.warm.out_r, self.warm.err_r, self.warm.spawn_r):
                os.close(fd)
            if self.warm.owns_fd:
                os.close(self.warm.pidfd)
            self.warm = None

    def run(self, header: dict, payload: bytes, sock: socket.socket | None = None) -> tuple[dict, bytes]:
        """Run one execution. With ``header["stream"]`` the output goes to ``sock`` as it comes
        (``{"type": "out", "fd": 1|2}`` messages, at most ``output_limit_bytes`` in all, beyond
        which the program is killed) and a ``{"op": "cancel"}`` arriving on ``sock`` kills it.
        ``header["sweep"]``: ``always`` (rollouts: every process but the runner is killed
        afterwards) or ``on_kill`` (sessions: background processes outlive the command unless it
        was killed, when everything goes)."""
        timeout_s = float(header.get("timeout_s", 120.0))
        cap = int(header.get("output_limit_bytes", 65536))
        stream = bool(header.get("stream")) and sock is not None
        kill_after = cap if stream else int(header.get("kill_after_output_bytes", 64 << 20))
        pending = [m for m in self.on_demand if m not in sys.modules]
        if pending and header.get("python") and not header.get("argv"):
            wanted = _mentions(os.path.join(header.get("cwd") or WORKSPACE, header["python"]), pending)
            if wanted:
                self.discard()  # the warm child was forked without them
                _import_into_parent(wanted)
        self.prefork()
        warm, self.warm = self.warm, None
        assert warm is not None
        started_ns = time.time_ns()
        t0 = time.monotonic()
        job = json.dumps(header).encode("utf-8")
        _write_all(warm.job_w, job)
        os.close(warm.job_w)
        pid, pidfd, owns_pidfd = warm.pid, warm.pidfd, warm.owns_fd
        out_r, err_r = warm.out_r, warm.err_r
        stdin_data = memoryview(payload if header.get("stdin_size") else b"")
        writers = [warm.in_w]
        if not stdin_data:
            os.close(warm.in_w)
            writers = []
        tails = {out_r: _Tail(cap), err_r: _Tail(cap)}
        open_fds = {out_r, err_r}
        watch = [sock.fileno()] if stream and sock is not None else []
        status = None
        timed_out = output_exceeded = cancelled = False
        streamed = 0
        deadline = t0 + timeout_s
        while status is None or open_fds:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            rlist = [*open_fds, pidfd, *watch] if status is None else [*open_fds, *watch]
            ready_r, ready_w, _ = select.select(rlist, writers, [], remaining)
            for fd in ready_w:
                try:
                    n = os.write(fd, stdin_data[:_READ_CHUNK])
                    stdin_data = stdin_data[n:]
                except BrokenPipeError:
                    stdin_data = memoryview(b"")
                if not stdin_data:
                    os.close(fd)
                    writers = []
            for fd in ready_r:
                if fd in watch:
                    cancelled = _cancel_requested(sock)
                    if cancelled:
                        break
                    continue
                if fd == pidfd:
                    if owns_pidfd:
                        _, status = os.waitpid(pid, 0)
                    else:
                        _drain_wakeups(fd)
                        done, st = os.waitpid(pid, os.WNOHANG)
                        if done == 0:
                            continue  # another child (an orphan) exited
                        status = st
                    # The direct child is gone; whatever it left behind must not keep our pipes
                    # open (daemonized grandchildren): read what is buffered, then sweep.
                    for ofd in list(open_fds):
                        before = tails[ofd].total
                        _drain_nonblocking(ofd, tails[ofd])
                        if stream:
                            streamed = _forward(sock, ofd == err_r, tails[ofd], before, streamed, cap)
                        os.close(ofd)
                        open_fds.discard(ofd)
                    continue
                data = os.read(fd, _READ_CHUNK)
                if data:
                    tails[fd].feed(data)
                    if stream:
                        streamed = _send_out(sock, fd == err_r, data, streamed, cap)
                else:
                    os.close(fd)
                    open_fds.discard(fd)
            if cancelled:
                break
            if tails[out_r].total + tails[err_r].total > kill_after:
                output_exceeded = True
                break
        killed = status is None
        if killed:
            # Timed out, flooded or cancelled: kill the direct child first so its status is ours
            # to read, then sweep whatever else it started.
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _, status = os.waitpid(pid, 0)
        if killed or header.get("sweep", "always") == "always":
            leftovers = kill_everything_else()
        else:
            leftovers = 0
            _reap_children()  # background processes stay; exited orphans are reaped
        spawn = _read_spawn_error(warm.spawn_r)
        if owns_pidfd:
            os.close(pidfd)
        for fd in open_fds:
            _drain_nonblocking(fd, tails[fd])
            os.close(fd)
        for fd in writers:
            os.close(fd)
        duration = time.monotonic() - t0
        exit_code = os.waitstatus_to_exitcode(status)
        sig = -exit_code if exit_code < 0 else None
        reply = {
            "ok": True,
            "exit_code": None if sig is not None else exit_code,
            "signal": sig,
            "timed_out": timed_out,
            "cancelled": cancelled,
            "output_limit_exceeded": output_exceeded,
            "stdout_bytes": tails[out_r].total,
            "stderr_bytes": tails[err_r].total,
            "duration_s": duration,
            "started_at_ns": started_ns,
            "leftover_processes": leftovers,
        }
        if spawn:
            reply["spawn_error"] = spawn
        if not stream:
            reply["stdout_tail"] = tails[out_r].text()
            reply["stderr_tail"] = tails[err_r].text()
        return reply, b""


def _send_out(sock: socket.socket | None, is_err: bool, data: bytes, streamed: int, cap: int) -> int:
    """Stream ``data`` (what fits under ``cap``, in messages of at most 64 KiB) to the service;
    returns the new total sent."""
    part = data[: max(cap - streamed, 0)]
    if sock is not None:
        for i in range(0, len(part), _READ_CHUNK):
            send_message(sock, {"type": "out", "fd": 2 if is_err else 1}, part[i : i + _READ_CHUNK])
    return streamed + len(part)


def _forward(
    sock: socket.socket | None, is_err: bool, tail: _Tail, before: int, streamed: int, cap: int
) -> int:
    """Stream what a final drain added to ``tail`` (the bytes past ``before``)."""
    added = tail.total - before
    if added <= 0:
        return streamed
    return _send_out(
        sock, is_err, bytes(tail.buf[-added:]) if added <= len(tail.buf) else bytes(tail.buf), streamed, cap
    )


def _cancel_requested(sock: socket.socket | None) -> bool:
    """Whether the service asked to cancel the running execution (or went away)."""
    if sock is None:
        return False
    try:
        header, _ = recv_message(sock, max_size=0)
    except (EOFError, OSError, ValueError):
        return True
    return header.get("op") == "cancel"


def _read_spawn_error(fd: int) -> dict | None:
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
        return {"code": "not_found", "message": data.decode("utf-8", "replace")}


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _drain_nonblocking(fd: int, tail: _Tail) -> None:
    os.set_blocking(fd, False)
    try:
        while True:
            data = os.read(fd, _READ_CHUNK)
            if not data:
                return
            tail.feed(data)
    except BlockingIOError:
        return


def op_oom(_header: dict, _payload: bytes) -> tuple[dict, bytes]:
    """The container's own OOM-kill counter, for hosts where the service cannot read the
    container's cgroup itself (the service prefers its own reading)."""
    for path, key in (
        ("/sys/fs/cgroup/memory.events", "oom_kill"),
        ("/sys/fs/cgroup/memory/memory.oom_control", "oom_kill"),
    ):
        try:
            with open(path) as fh:
                for line in fh:
                    name, _, value = line.partition(" ")
                    if name == key:
                        return {"ok": True, "oom_kill": int(value)}, b""
        except OSError:
            continue
    return {"ok": True, "oom_kill": None}, b""


# ---------------------------------------------------------------------------------------------
# main loop


def serve(sock: socket.socket, on_demand: list[str] | None = None) -> None:
    handlers = {
        "write": op_write,
        "read": op_read,
        "list": op_list,
        "oom": op_oom,
        "fs_write": op_fs_write,
        "fs_read": op_fs_read,
    }
    child = PreforkedChild(sock.fileno(), on_demand)
    child.prefork()
    try:
        _serve(sock, handlers, child)
    finally:
        child.discard()


def _serve(sock: socket.socket, handlers: dict, child: PreforkedChild) -> None:
    while True:
        try:
            header, payload = recv_message(sock)
        except EOFError:
            return
        op = header.get("op")
        try:
            if op == "exec":
                reply, data = child.run(header, payload, sock)
            elif op == "cancel":  # arrived after its execution ended: nothing to do
                continue
            elif op == "ping":
                reply, data = {"ok": True, "pid": os.getpid()}, b""
            elif op in handlers:
                reply, data = handlers[op](header, payload)
            else:
                reply, data = {"ok": False, "error": "bad_op", "message": f"unknown op {op!r}"}, b""
        except RequestError as exc:
            reply, data = {"ok": False, "error": exc.code, "message": exc.message}, b""
        except Exception as exc:  # report, keep serving
            reply = {"ok": False, "error": "internal", "message": f"{type(exc).__name__}: {exc}"}
            data = b""
        reply["id"] = header.get("id")
        send_message(sock, reply, data)
        if op == "exec":
            child.prefork()  # off the critical path: the reply is already on its way


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--connect", required=True, help="unix socket the service listens on")
    parser.add_argument("--preimport", default="openpyxl")
    parser.add_argument("--import-on-demand", default="pandas")
    args = parser.parse_args()
    sys.dont_write_bytecode = True
    t0 = time.monotonic()
    imported = []
    for name in filter(None, args.preimport.split(",")):
        try:
            _preimport(name)
            imported.append(name)
        except Exception as exc:  # a missing library is reported, not fatal
            print(f"runner: preimport {name} failed: {exc}", file=sys.stderr)
    preimport_s = time.monotonic() - t0
    # Keep the imported heap out of the collector so forked children share its pages.
    gc.collect()
    gc.freeze()
    dumpable_off = set_dumpable(False)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    # As the container's PID 1 the kernel only delivers signals we handle; ignoring SIGINT
    # (Python handles it by default) leaves the executed code no signal to kill us with.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(args.connect)
    send_message(
        sock,
        {
            "type": "hello",
            "protocol": PROTOCOL_VERSION,
            "pid": os.getpid(),
            "uid": os.getuid(),
            "python": sys.version.split()[0],
            "preimported": imported,
            "preimport_s": preimport_s,
            "non_dumpable": dumpable_off,
        },
    )
    try:
        serve(sock, [m for m in args.import_on_demand.split(",") if m])
    finally:
        kill_everything_else()
    return 0


if __name__ == "__main__":
    sys.exit(main())
