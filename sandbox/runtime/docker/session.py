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

from sandbox.runtime.docker.sandbox import DockerSandbox
from sandbox.runtime.runner.protocol import (
    WORKSPACE,
    ErrorCode,
    ExecRequest,
    Message,
    ReadReply,
    ReadRequest,
    RunnerError,
    Sweep,
    WriteReply,
    WriteRequest,
    timeout_confirmed,
)
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
WORKDIR = WORKSPACE
# The runner's reply to a file op is a local socket round trip plus the copy.
_FILE_OP_TIMEOUT_S = 120.0

_FILE_ERRORS: dict[str, type[SkillOptError]] = {
    ErrorCode.NOT_FOUND: SandboxFileMissing,
    ErrorCode.PERMISSION: SandboxPermissionDenied,
    ErrorCode.IS_DIR: SandboxIsADirectory,
    ErrorCode.TOO_LARGE: SandboxFileTooLarge,
    ErrorCode.NO_SPACE: SandboxFileTooLarge,
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
        self._file_op(WriteRequest(path=path, confined=False), WriteReply, data, max_reply=0)

    def read_path(self, path: str, *, max_bytes: int) -> bytes:
        """The content of the file at ``path``.

        Raises:
            SandboxFileMissing, SandboxPermissionDenied, SandboxIsADirectory,
            SandboxFileTooLarge (larger than ``max_bytes``), InvalidRequest.
        """
        return self._file_op(
            ReadRequest(path=path, max_bytes=max_bytes, confined=False), ReadReply, b"", max_reply=max_bytes
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
        request = ExecRequest(
            timeout_s=timeout_s,
            argv=list(argv),
            stream=True,
            sweep=Sweep.ON_KILL,
            output_limit_bytes=output_limit_bytes,
            env=self._env(env),
            cwd=posixpath.normpath(posixpath.join(WORKDIR, cwd)) if cwd else WORKDIR,
            stdin_size=len(stdin),
        )
        oom_before = self._oom_count()
        t0 = time.monotonic()
        reply = self._execute(request, stdin, oom_before=oom_before, on_output=on_output, cancelled=cancelled)
        elapsed = time.monotonic() - t0
        spawn = reply.spawn_error or {}
        return CommandExit(
            exit_code=reply.exit_code,
            signal=reply.signal or 0,
            timed_out=timeout_confirmed(reply.timed_out, elapsed, timeout_s),
            oom_killed=self._oom_count() > oom_before,
            output_limit_exceeded=reply.output_limit_exceeded,
            cancelled=reply.cancelled,
            duration_s=reply.duration_s,
            stdout_bytes=reply.stdout_bytes,
            stderr_bytes=reply.stderr_bytes,
            spawn_error=str(spawn.get("code", ""))[:32],
            message=str(spawn.get("message", ""))[:500],
        )

    def cancel_command(self) -> None:
        """Kill the command running now (its call returns with ``cancelled``). Never raises."""
        self.handle.conn.cancel_execution()

    # -- internals ---------------------------------------------------------------------------

    def _file_op(
        self, request: WriteRequest | ReadRequest, reply: type[Message], payload: bytes, *, max_reply: int
    ) -> bytes:
        try:
            _, data = self._call(
                request,
                reply,
                payload,
                timeout_s=_FILE_OP_TIMEOUT_S,
                refusals=True,
                max_reply_bytes=max_reply,
            )
        except RunnerError as exc:
            cls = _FILE_ERRORS.get(exc.code, InvalidRequest)
            raise cls((exc.message or f"cannot use {request.path}")[:1000]) from None
        return data
