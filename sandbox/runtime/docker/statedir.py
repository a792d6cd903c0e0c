"""The host's state directory: one service per directory (a lock), the runner package every
container mounts, and one directory per container.

Layout::

    runner/<digest>/                 the runner package, mounted read-only at /opt/skillopt
    c/<short-id>/control/            runner.sock (mounted read-only at /control)
    c/<short-id>/skill/              the skill package: SKILL.md, scripts/ ... (read-only at /skill)
    c/<short-id>/skills/<name>/      the same files, hard-linked (read-only where CLIs look)
    c/<short-id>/lease.json          which rollout holds the container (labels are immutable)
    packages/<version>/              skill packages placed before, hard-linked into c/*/skill
    lock                             flock: one service per state dir
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import py_compile
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from sandbox.runtime.runner import protocol
from skillopt.errors import ConfigError, SandboxUnavailable

__all__ = ["RUNNER_PACKAGE", "StateDir", "runner_digest", "runner_sources"]

#: The runner package (``sandbox/runtime/runner/``), mounted read-only into every container.
RUNNER_PACKAGE = Path(protocol.__file__).parent
#: The runner's entry point (``python3 -I /opt/skillopt/runner.py``).
_RUNNER_SCRIPT = "runner.py"
#: A unix socket path must fit in 108 bytes (with its terminating NUL).
_MAX_SOCKET_PATH = 107


def _byte_compile(source: Path) -> None:
    """The module's bytecode in its ``__pycache__``, validated by the source's hash (not its
    mtime, which a copy of the state dir may not keep)."""
    cached = Path(importlib.util.cache_from_source(str(source)))
    if not cached.exists():
        py_compile.compile(
            str(source), doraise=True, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH
        )
        cached.parent.chmod(0o755)
        cached.chmod(0o644)


def runner_sources() -> dict[str, bytes]:
    """The runner package's files (name -> content): its Python modules, nothing generated."""
    return {p.name: p.read_bytes() for p in sorted(RUNNER_PACKAGE.glob("*.py"))}


def runner_digest(sources: dict[str, bytes]) -> str:
    """SHA-256 over the runner package's files in name order (each name, its length and its
    content): what Describe reports as ``runner_sha256``."""
    h = hashlib.sha256()
    for name in sorted(sources):
        h.update(f"{name}\0{len(sources[name])}\0".encode())
        h.update(sources[name])
    return h.hexdigest()


class StateDir:
    """The state directory of one runtime, locked for its life.

    Raises:
        ConfigError: the path is too deep for unix sockets, or another service holds it.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).resolve()
        self.containers = self.path / "c"
        self.packages = self.path / "packages"
        self.containers.mkdir(parents=True, exist_ok=True)
        if len(str(self.containers / ("x" * 12) / "control" / "runner.sock")) > _MAX_SOCKET_PATH:
            raise ConfigError(
                f"state dir {self.path} is too deep for unix sockets (108-byte limit); use a shorter path"
            )
        self._lock_fd = self._take_lock()

    def _take_lock(self) -> int:
        fd = os.open(self.path / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            os.close(fd)
            raise ConfigError(
                f"another sandbox service is using {self.path}; give each service its own --state-dir"
            ) from exc
        return fd

    def install_runner(self) -> tuple[str, Path]:
        """Copy the runner package next to the container dirs (bind mounts need a host path),
        into a directory named by its digest; returns the digest and the directory.

        Its modules are byte-compiled here too: the mount is read-only, and compiling them in
        every container would add ~9 ms of CPU to each start. An image whose Python is not this
        one's version ignores the bytecode (another cache tag) and compiles the sources itself.
        """
        sources = runner_sources()
        digest = runner_digest(sources)
        target_dir = self.path / "runner" / digest[:16]
        for name, source in sources.items():
            target = target_dir / name
            if not target.exists() or target.read_bytes() != source:
                target_dir.mkdir(parents=True, exist_ok=True)
                tmp = target.with_suffix(".tmp")
                tmp.write_bytes(source)
                tmp.chmod(0o644)
                tmp.replace(target)
            if name != _RUNNER_SCRIPT:  # run as a script: never imported, never cached
                _byte_compile(target)
        target_dir.chmod(0o755)
        return digest, target_dir

    def new_container_dir(self) -> tuple[str, Path]:
        """A fresh directory for one container (its control, skill and skills subdirectories
        made); returns its short id (short: a unix socket path must fit in 108 bytes) and path."""
        short = uuid.uuid4().hex[:12]
        cdir = self.containers / short
        for d in (cdir / "control", cdir / "skill", cdir / "skills"):
            d.mkdir(parents=True)
            d.chmod(0o755)
        return short, cdir

    def container_dirs(self) -> Iterator[Path]:
        """Every container directory there is now."""
        yield from self.containers.iterdir() if self.containers.exists() else ()

    @staticmethod
    def remove(cdir: Path) -> None:
        shutil.rmtree(cdir, ignore_errors=True)

    @staticmethod
    def write_lease(cdir: Path, holder: str) -> None:
        """Record which rollout (or session) holds the container (labels cannot change after
        creation).

        Raises:
            SandboxUnavailable: the state dir cannot be written (a full disk).
        """
        try:
            (cdir / "lease.json").write_text(json.dumps({"rollout_id": holder, "leased_at": time.time()}))
        except OSError as exc:
            raise SandboxUnavailable(
                f"host state dir: cannot record the lease: {exc.strerror or exc}"
            ) from exc

    def close(self) -> None:
        """Release the lock (another service may use the directory then)."""
        with contextlib.suppress(OSError):
            os.close(self._lock_fd)
