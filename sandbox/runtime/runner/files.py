"""The runner's file operations: write, read and list.

One family of operations with two path policies, because the two callers need different
guarantees (:attr:`~.protocol.WriteRequest.confined`):

* confined (rollouts): the trusted side grades what the workspace holds, so paths are relative
  to it, links are never followed (every directory on the way is opened with ``O_NOFOLLOW``
  below an fd of the workspace) and only regular files are read;
* any path (sessions, driven by their owner): absolute or relative to the workspace, links
  followed as any program would, and what the container's user may not touch fails with the
  errno's own kind, which the service passes on typed (missing, permission, directory, too
  large).
"""

from __future__ import annotations

import errno
import os
import stat

from .protocol import (
    WORKSPACE,
    ErrorCode,
    ListReply,
    ListRequest,
    ReadRequest,
    RunnerError,
    WriteReply,
    WriteRequest,
)


def write(request: WriteRequest, payload: bytes) -> WriteReply:
    if request.confined:
        _write_confined(request.path, payload, request.mode)
    else:
        _write_any(request.path, payload)
    return WriteReply(written=len(payload))


def read(request: ReadRequest) -> bytes:
    if request.confined:
        return _read_confined(request.path, request.max_bytes)
    return _read_any(request.path, request.max_bytes)


def list_files(request: ListRequest) -> ListReply:
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
            if len(files) >= request.max_files:
                truncated = True
                break
            files.append({"path": os.path.relpath(full, WORKSPACE), "size": st.st_size})
        if truncated:
            break
    return ListReply(files=files, truncated=truncated)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


# -- confined: below the workspace, never following links -----------------------------------------


def _split_rel(path: str) -> list[str]:
    if not path or path.startswith("/") or "\\" in path or "\x00" in path:
        raise RunnerError(ErrorCode.BAD_PATH, f"path must be relative: {path!r}")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts):
        raise RunnerError(ErrorCode.BAD_PATH, f"path escapes the workspace: {path!r}")
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
                raise RunnerError(ErrorCode.BAD_PATH, f"not a directory: {name!r} ({exc.strerror})") from exc
            _refuse_followed(fd, nfd, name)
            os.close(fd)
            fd = nfd
        return fd
    except BaseException:
        os.close(fd)
        raise


def _refuse_followed(parent: int, opened: int, name: str) -> None:
    """Refuse ``opened`` unless it is the directory entry ``name`` itself: gVisor follows a
    final symlink despite ``O_NOFOLLOW`` when ``O_DIRECTORY`` is set. Compared after the open,
    so a link swapped in or out meanwhile is refused too (its target is another inode)."""
    try:
        entry, st = os.stat(name, dir_fd=parent, follow_symlinks=False), os.fstat(opened)
        same = (entry.st_dev, entry.st_ino) == (st.st_dev, st.st_ino)
    except OSError:  # swapped away meanwhile
        same = False
    if not same:
        os.close(opened)
        raise RunnerError(ErrorCode.BAD_PATH, f"not a directory: {name!r} (a symbolic link)")


def _write_confined(path: str, payload: bytes, mode: int) -> None:
    parts = _split_rel(path)
    dfd = _open_parent(parts, create=True)
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
        try:
            fd = os.open(parts[-1], flags, mode, dir_fd=dfd)
        except OSError as exc:
            raise RunnerError(ErrorCode.BAD_PATH, f"cannot write {path!r}: {exc.strerror}") from exc
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
    finally:
        os.close(dfd)


def _read_confined(path: str, max_bytes: int) -> bytes:
    parts = _split_rel(path)
    missing = RunnerError(ErrorCode.NOT_FOUND, f"no such file: {path!r}")
    refused = RunnerError(ErrorCode.NOT_REGULAR, f"not a regular file: {path!r}")
    try:
        dfd = _open_parent(parts, create=False)
    except FileNotFoundError:
        raise missing from None
    except RunnerError as exc:  # a link (or a file) where a directory should be: never followed
        raise RunnerError(ErrorCode.NOT_REGULAR, f"{refused.message} ({exc.message})") from None
    try:
        try:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dfd)
        except FileNotFoundError:
            raise missing from None
        except OSError:  # ELOOP: a symlink
            raise refused from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # a directory or special file
            os.close(fd)
            raise refused
        with os.fdopen(fd, "rb") as fh:
            if st.st_size > max_bytes:
                raise RunnerError(ErrorCode.TOO_LARGE, f"{path!r} is {st.st_size} bytes > {max_bytes}")
            data = fh.read(max_bytes + 1)
            if len(data) > max_bytes:
                raise RunnerError(ErrorCode.TOO_LARGE, f"{path!r} grew beyond {max_bytes} bytes")
    finally:
        os.close(dfd)
    return data


# -- any path the container's user may use --------------------------------------------------------

_ERRNO_CODES = {
    errno.ENOENT: ErrorCode.NOT_FOUND,
    errno.ENOTDIR: ErrorCode.NOT_FOUND,
    errno.EACCES: ErrorCode.PERMISSION,
    errno.EPERM: ErrorCode.PERMISSION,
    errno.EROFS: ErrorCode.PERMISSION,
    errno.EISDIR: ErrorCode.IS_DIR,
    errno.ENXIO: ErrorCode.PERMISSION,  # a FIFO without a reader, a device: not a file to write
    errno.EFBIG: ErrorCode.TOO_LARGE,
    errno.ENOSPC: ErrorCode.NO_SPACE,
    errno.EDQUOT: ErrorCode.NO_SPACE,
    errno.ENAMETOOLONG: ErrorCode.BAD_PATH,
    errno.ELOOP: ErrorCode.BAD_PATH,
}


def _absolute(path: str) -> str:
    """``path`` made absolute (relative paths are below the workspace)."""
    if not path or "\x00" in path:
        raise RunnerError(ErrorCode.BAD_PATH, f"not a usable path: {path!r}")
    return os.path.normpath(os.path.join(WORKSPACE, path))


def _os_error(exc: OSError, path: str) -> RunnerError:
    code = _ERRNO_CODES.get(exc.errno or 0, ErrorCode.OS_ERROR)
    return RunnerError(code, f"{path}: {exc.strerror or exc}")


def _write_any(path: str, payload: bytes) -> None:
    target = _absolute(path)
    try:
        if os.path.isdir(target):
            raise IsADirectoryError(errno.EISDIR, "Is a directory")
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
        except FileExistsError:  # a file where a directory should be: as open() would say
            raise NotADirectoryError(errno.ENOTDIR, "Not a directory") from None
        # Non-blocking open, then only a regular file is written: a FIFO planted at the path
        # would otherwise block this process (the session's only runner) until a reader came.
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK, 0o644)
    except OSError as exc:
        raise _os_error(exc, path) from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RunnerError(ErrorCode.PERMISSION, f"{path}: not a regular file")
        os.set_blocking(fd, True)
        os.ftruncate(fd, 0)
        write_all(fd, payload)
    except OSError as exc:
        raise _os_error(exc, path) from exc
    finally:
        os.close(fd)


def _read_any(path: str, max_bytes: int) -> bytes:
    target = _absolute(path)
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise _os_error(exc, path) from exc
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise RunnerError(ErrorCode.IS_DIR, f"{path}: Is a directory")
        if not stat.S_ISREG(st.st_mode):  # a FIFO or device would block or never end
            raise RunnerError(ErrorCode.PERMISSION, f"{path}: not a regular file")
        if st.st_size > max_bytes:
            raise RunnerError(ErrorCode.TOO_LARGE, f"{path} is {st.st_size} bytes > {max_bytes}")
        os.set_blocking(fd, True)
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise _os_error(exc, path) from exc
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise RunnerError(ErrorCode.TOO_LARGE, f"{path} grew beyond {max_bytes} bytes")
    return data
