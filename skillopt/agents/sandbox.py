"""The seam between an env's agent and *some* sandbox that runs untrusted code.

An agent never touches Docker: it receives a :class:`Sandbox` (one isolated workspace leased for
one rollout) and writes files, runs commands and reads results through it. The sandbox service
implements it with a hardened container (``sandbox.runtime``); anything else implementing this
protocol can drive the same agent code.

Paths are relative POSIX paths inside the sandbox workspace; absolute paths and ``..`` are
refused by implementations.

Reading has one meaning: :meth:`Sandbox.read_file` reads a regular file of the workspace and
raises when there is none. An output the program may or may not have written (a solution file,
a results file) is read with :func:`read_output`, where both "nothing there" and "not a regular
file" read as ``None``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import structlog

from skillopt.errors import SandboxFileMissing, SandboxFileRefused

__all__ = ["ExecOutcome", "FileEntry", "Sandbox", "read_output"]

log = structlog.get_logger("skillopt.agents.sandbox")


@dataclass(frozen=True, kw_only=True, slots=True)
class ExecOutcome:
    """Result of one execution. A failing program is data, not an exception.

    ``timed_out`` and ``oom_killed`` are determined by the trusted side (host clock, the
    container's memory cgroup), never taken from the sandbox's own word. A streamed execution
    (a session's command) has empty tails: its output went out as it came.
    """

    exit_code: int | None
    stdout_tail: str
    stderr_tail: str
    stdout_bytes: int
    stderr_bytes: int
    duration_s: float
    timed_out: bool = False
    oom_killed: bool = False
    signal: int | None = None
    started_at_ns: int = 0
    #: Killed because its output passed the cap.
    output_limit_exceeded: bool = False
    #: Killed on the caller's request.
    cancelled: bool = False
    #: Why the program did not start: "" (it did), ``not_found``, ``permission`` or ``cwd``;
    #: ``spawn_message`` says more.
    spawn_error: str = ""
    spawn_message: str = ""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.oom_killed

    @property
    def output_truncated(self) -> bool:
        return self.stdout_bytes > len(self.stdout_tail.encode("utf-8", "replace")) or (
            self.stderr_bytes > len(self.stderr_tail.encode("utf-8", "replace"))
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class FileEntry:
    """A regular file found in the workspace (links and special files are never listed)."""

    path: str
    size_bytes: int


@runtime_checkable
class Sandbox(Protocol):
    """One isolated workspace for one rollout.

    Every method may raise :class:`skillopt.errors.InfraError` subclasses when the sandbox itself
    fails (``SandboxUnavailable``, ``RolloutTimeout``, ``Cancelled``); program failures are
    reported in :class:`ExecOutcome`.
    """

    def write_file(self, path: str, data: bytes) -> None:
        """Create or replace a regular file in the workspace.

        Raises:
            InvalidRequest: ``path`` is absolute or escapes the workspace.
        """
        ...

    def read_file(self, path: str, *, max_bytes: int) -> bytes:
        """The content of a regular file of the workspace. Links are never followed.

        Raises:
            SandboxFileMissing: nothing exists at ``path``.
            SandboxFileRefused: ``path`` (or a directory on the way) is a link, a directory or
                a special file.
            OutputLimitExceeded: the file is larger than ``max_bytes``.
            InvalidRequest: ``path`` is absolute or escapes the workspace.
        """
        ...

    def list_files(self, *, max_files: int = 1000) -> list[FileEntry]:
        """Regular files under the workspace, recursively, without following links."""
        ...

    def run_python(
        self,
        path: str,
        *,
        args: Sequence[str] = (),
        timeout_s: float,
        env: Mapping[str, str] | None = None,
    ) -> ExecOutcome:
        """Run a Python file of the workspace in a fresh process (cwd = workspace)."""
        ...

    def run_command(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        output_limit_bytes: int | None = None,
    ) -> ExecOutcome:
        """Run a program (argv[0] looked up on the sandbox's PATH), cwd = workspace.
        ``output_limit_bytes`` overrides the sandbox's stdout/stderr tail cap for this run."""
        ...


def read_output(sandbox: Sandbox, path: str, *, max_bytes: int) -> bytes | None:
    """An output the program may or may not have written: its bytes, or ``None`` when nothing
    is at ``path`` or it is not a regular file (a link the program planted, a directory: never
    followed or read, and never an output; the refusal is logged).

    Raises:
        OutputLimitExceeded: the file is larger than ``max_bytes`` (the caller decides what an
            oversize output means).
        InvalidRequest, InfraError: as :meth:`Sandbox.read_file`.
    """
    try:
        return sandbox.read_file(path, max_bytes=max_bytes)
    except SandboxFileMissing:
        return None
    except SandboxFileRefused as exc:
        log.info("sandbox.read_refused", path=path[:200], reason=exc.message)
        return None
