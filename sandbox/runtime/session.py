"""A container driven as a session: any command, any path the container's user may use.

Rollout sandboxes (:class:`~sandbox.runtime.lease.DockerSandbox`) confine file access to the
workspace and never follow links, because the trusted side grades what they hold. A session is
driven by its owner instead (the sandbox API's ``Exec``/``WriteFile``/``ReadFile``): paths may
be absolute, links are followed as any program would, and a refusal carries the errno's own
kind (missing, permission, directory, too large). Commands stream their output as it comes,
can be cancelled from another thread, and leave background processes running unless they were
killed (then every process of the session goes: a timeout kills the whole tree).
"""

from __future__ import annotations

import posixpath
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sandbox.runtime.lease import DockerSandbox
from skillopt.errors import (
    InvalidRequest,
    SandboxFileMissing,
    SandboxFileTooLarge,
    SandboxIsADirectory,
    SandboxPermissionDenied,
    SkillOptError,
)

__all__ = ["WORKDIR", "CommandExit", "SessionSandbox"]

#: The session's default working directory (the container's writable workspace).
WORKDIR = "/workspace"
# The runner's reply to a file op is a local socket round trip plus the copy.
_FILE_OP_TIMEOUT_S = 120.0
_BACKSTOP_SLACK_S = 45.0

_FILE_ERRORS: dict[str, type[SkillOptError]] = {
    "not_found": SandboxFileMissing,
    "permission": SandboxPermissionDenied,
    "is_dir": SandboxIsADirectory,
    "too_large": SandboxFileTooLarge,
    "no_space": SandboxFileTooLarge,
}


@dataclass(frozen=True, slots=True)
class CommandExit:
    """How one session command ended (its output was streamed while it ran)."""

    exit_code: int | None
    signal: int = 0
    timed_out: bool = False
    oom_killed: bool = False
    output_limit_exceeded: bool = False
    cancelled: bool = False
    duration_s: float = 0.0
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    #: Why the program did not start: "" (it did), "not_found", "permission", "cwd".
    spawn_error: str = ""
    message: str = ""


class SessionSandbox(DockerSandbox):
    """One session's container. Calls are serialized by the runner connection; only
    :meth:`cancel_command` may be called from another thread while a command runs."""

    def write_path(self, path: str, data: bytes) -> None:
        """Create or replace the file at ``path`` (absolute or below :data:`WORKDIR`).

        Raises:
            SandboxIsADirectory, SandboxPermissionDenied, SandboxFileTooLarge (no space left),
            SandboxFileMissing (a parent is a file), InvalidRequest.
        """
        self._file_op({"op": "fs_write", "path": path}, data, max_reply=0)

    def read_path(self, path: str, *, max_bytes: int) -> bytes:
        """The content of the file at ``path``.

        Raises:
            SandboxFileMissing, SandboxPermissionDenied, SandboxIsADirectory,
            SandboxFileTooLarge (larger than ``max_bytes``), InvalidRequest.
        """
        return self._file_op(
            {"op": "fs_read", "path": path, "max_bytes": max_bytes}, b"", max_reply=max_bytes
        )

    def run_streaming(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        on_output: Callable[[int, bytes], None],
        cwd: str = "",
        env: Mapping[str, str] | None = None,
        stdin: bytes = b"",
        output_limit_bytes: int,
        cancelled: threading.Event | None = None,
    ) -> CommandExit:
        """Run ``argv`` and stream its output to ``on_output(fd, bytes)`` as it comes (at most
        ``output_limit_bytes`` in all: beyond it the command is killed). ``cancelled``: the
        caller's cancel flag, set before it calls :meth:`cancel_command`; a command whose flag is
        set by the time its request is sent is cancelled at once (the runner ignores a cancel
        that reaches it before the command does).

        Raises:
            InvalidRequest: empty ``argv``.
            OOMKilled, SandboxUnavailable: the container itself died.
        """
        if not argv:
            raise InvalidRequest("exec needs a program: argv is empty")
        header: dict[str, Any] = {
            "op": "exec",
            "argv": list(argv),
            "stream": True,
            "sweep": "on_kill",
            "timeout_s": timeout_s,
            "output_limit_bytes": output_limit_bytes,
            "env": self._env(env),
            "cwd": posixpath.normpath(posixpath.join(WORKDIR, cwd)) if cwd else WORKDIR,
        }
        if stdin:
            header["stdin_size"] = len(stdin)
        oom_before = self._oom_count()
        t0 = time.monotonic()
        reply = self._execute(
            header,
            stdin,
            timeout_s=timeout_s + _BACKSTOP_SLACK_S,
            oom_before=oom_before,
            on_output=on_output,
            cancelled=cancelled,
        )
        elapsed = time.monotonic() - t0
        spawn = reply.get("spawn_error") or {}
        return CommandExit(
            exit_code=reply.get("exit_code"),
            signal=int(reply.get("signal") or 0),
            # Believe the runner's timeout only if our own clock agrees.
            timed_out=bool(reply.get("timed_out")) and elapsed >= timeout_s * 0.98,
            oom_killed=self._oom_count() > oom_before,
            output_limit_exceeded=bool(reply.get("output_limit_exceeded")),
            cancelled=bool(reply.get("cancelled")),
            duration_s=float(reply.get("duration_s", elapsed)),
            stdout_bytes=int(reply.get("stdout_bytes", 0)),
            stderr_bytes=int(reply.get("stderr_bytes", 0)),
            spawn_error=str(spawn.get("code", ""))[:32],
            message=str(spawn.get("message", ""))[:500],
        )

    def cancel_command(self) -> None:
        """Kill the command running now (its call returns with ``cancelled``). Never raises."""
        self.handle.conn.cancel_execution()

    # -- internals ---------------------------------------------------------------------------

    def _file_op(self, header: dict[str, Any], payload: bytes, *, max_reply: int) -> bytes:
        reply, data = self._call(
            header, payload, timeout_s=_FILE_OP_TIMEOUT_S, allow_errors=True, max_reply_bytes=max_reply
        )
        if not reply.get("ok"):
            cls = _FILE_ERRORS.get(str(reply.get("error")), InvalidRequest)
            raise cls(str(reply.get("message") or f"cannot use {header['path']}")[:1000])
        return data
