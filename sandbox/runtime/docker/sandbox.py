"""A leased container, driven over its runner connection: the Docker implementation of
:class:`sandbox.runtime.base.SessionSandbox` (and so of :class:`RolloutSandbox`).

Everything that decides a score is determined here, on the trusted side: the wall clock
(timeouts, :func:`~sandbox.runtime.runner.protocol.timeout_confirmed`), the container's memory
cgroup (OOM kills) and the rollout deadline. The runner's own claims are only used where they
cannot change an outcome.
"""

from __future__ import annotations

import posixpath
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from sandbox.runtime.base import SandboxRuntime, SessionSandbox, Sweep
from sandbox.runtime.docker.create import SANDBOX_ENV
from sandbox.runtime.docker.handle import ContainerHandle
from sandbox.runtime.runner.protocol import (
    BACKSTOP_SLACK_S,
    WORKSPACE,
    ErrorCode,
    ExecReply,
    ExecRequest,
    ListReply,
    ListRequest,
    Message,
    OomReply,
    OomRequest,
    ReadReply,
    ReadRequest,
    RunnerError,
    WriteReply,
    WriteRequest,
    timeout_confirmed,
)
from sandbox.runtime.skilldir import PlacedPackages, place_skill
from skillopt.agents.sandbox import ExecOutcome, FileEntry
from skillopt.errors import (
    Cancelled,
    InvalidRequest,
    OOMKilled,
    OutputLimitExceeded,
    RolloutTimeout,
    SandboxFileMissing,
    SandboxFileRefused,
    SandboxFileTooLarge,
    SandboxIsADirectory,
    SandboxPermissionDenied,
    SandboxUnavailable,
    SkillOptError,
)
from skillopt.files import check_relative_name
from skillopt.types import SkillVersion

__all__ = ["DockerSandbox"]

R = TypeVar("R", bound=Message)

# Workspace file operations are local socket round trips; anything slower means a wedged
# container. A session's files may be as large as the host allows (a copy of that size): more.
_FILE_OP_TIMEOUT_S = 30.0
_SESSION_FILE_OP_TIMEOUT_S = 120.0

_SESSION_FILE_ERRORS: dict[str, type[SkillOptError]] = {
    ErrorCode.NOT_FOUND: SandboxFileMissing,
    ErrorCode.PERMISSION: SandboxPermissionDenied,
    ErrorCode.IS_DIR: SandboxIsADirectory,
    ErrorCode.TOO_LARGE: SandboxFileTooLarge,
    ErrorCode.NO_SPACE: SandboxFileTooLarge,
}


class DockerSandbox(SessionSandbox):
    """One rollout's or session's container, driven over its runner's socket. Not shared
    between rollouts or threads (a session's :meth:`cancel_command` excepted). Made by
    :meth:`DockerRuntime.lease`.

    Args:
        runtime: the runtime that created the container.
        handle: the leased container.
        output_limit_bytes: stdout/stderr tail kept per execution.
        deadline: ``time.monotonic()`` value after which the rollout is out of time.
        cancel: set by another thread to cancel the rollout (the container is killed too).
        packages: the runtime's store of placed skill packages (for :meth:`write_skill`).
    """

    workdir = WORKSPACE
    handle: ContainerHandle

    def __init__(
        self,
        runtime: SandboxRuntime,
        handle: ContainerHandle,
        *,
        output_limit_bytes: int = 64 * 1024,
        deadline: float | None = None,
        cancel: threading.Event | None = None,
        packages: PlacedPackages | None = None,
    ) -> None:
        self.runtime = runtime
        self.handle = handle
        #: The runtime's package store (``None``: every placement writes the bytes).
        self.packages = packages
        self.output_limit_bytes = output_limit_bytes
        self.deadline = deadline
        self.cancel = cancel or threading.Event()
        self.killed = False

    # -- RolloutSandbox ----------------------------------------------------------------------

    def write_file(self, path: str, data: bytes) -> None:
        name = check_relative_name(path)
        self._call(WriteRequest(path=name), WriteReply, data, timeout_s=_FILE_OP_TIMEOUT_S)

    def read_file(self, path: str, *, max_bytes: int) -> bytes:
        name = check_relative_name(path)
        request = ReadRequest(path=name, max_bytes=max_bytes)
        try:
            _, data = self._call(
                request, ReadReply, timeout_s=_FILE_OP_TIMEOUT_S, refusals=True, max_reply_bytes=max_bytes
            )
        except RunnerError as exc:
            if exc.code == ErrorCode.NOT_FOUND:
                raise SandboxFileMissing(f"no file {name} in the workspace") from None
            if exc.code == ErrorCode.TOO_LARGE:
                raise OutputLimitExceeded(exc.message or f"{name} is too large") from None
            if exc.code == ErrorCode.NOT_REGULAR:
                raise SandboxFileRefused(f"{name} is a link, directory or special file: never read") from None
            raise InvalidRequest(exc.message or f"cannot read {name}") from None
        return data

    def list_files(self, *, max_files: int = 1000) -> list[FileEntry]:
        reply, _ = self._call(ListRequest(max_files=max_files), ListReply, timeout_s=_FILE_OP_TIMEOUT_S)
        try:
            return [FileEntry(path=str(f["path"]), size_bytes=int(f["size"])) for f in reply.files]
        except (KeyError, TypeError, ValueError) as exc:
            raise SandboxUnavailable(f"container {self.handle.name}: malformed file list ({exc})") from None

    def run_python(
        self,
        path: str,
        *,
        args: Sequence[str] = (),
        timeout_s: float,
        env: Mapping[str, str] | None = None,
    ) -> ExecOutcome:
        request = ExecRequest(
            timeout_s=timeout_s,
            python=check_relative_name(path),
            args=list(args),
            output_limit_bytes=self.output_limit_bytes,
            env=self._env(env),
        )
        return self._execute(request, b"")

    def run_command(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        output_limit_bytes: int | None = None,
    ) -> ExecOutcome:
        if not argv:
            raise InvalidRequest("run_command needs a program")
        request = ExecRequest(
            timeout_s=timeout_s,
            argv=list(argv),
            stdin_size=len(stdin or b""),
            output_limit_bytes=int(output_limit_bytes or self.output_limit_bytes),
            env=self._env(env),
        )
        return self._execute(request, stdin or b"")

    def write_skill(self, skill: SkillVersion, *, version: str = "") -> None:
        """Place the package in the container's read-only skill mounts (host side: a version
        seen before is hard-linked from the runtime's package store, see
        :mod:`sandbox.runtime.skilldir`)."""
        skills_dir = self.handle.skills_dir if self.handle.spec.skills_roots else None
        self.handle.skill_placed = True  # emptied again at the container's reset
        try:
            if version and self.packages is not None:
                self.packages.place(skill, version, self.handle.skill_dir, skills_dir)
            else:
                place_skill(skill, self.handle.skill_dir, skills_dir)
        except OSError as exc:  # the host's disk, not the skill: an infrastructure error
            raise SandboxUnavailable(
                f"host state dir: cannot place the skill package: {exc.strerror or exc}"
            ) from exc

    def kill(self) -> None:
        """Kill the container now (another thread is told by EOF on its pending call)."""
        self.killed = True
        self.runtime.kill(self.handle)

    def remaining_s(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    # -- SessionSandbox ----------------------------------------------------------------------

    def exec_streaming(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        on_output: Callable[[int, bytes], None],
        output_limit_bytes: int,
        cwd: str = "",
        env: Mapping[str, str] | None = None,
        stdin: bytes = b"",
        sweep: Sweep = Sweep.ON_KILL,
        cancelled: threading.Event | None = None,
        python: str = "",
    ) -> ExecOutcome:
        if not argv and not python:
            raise InvalidRequest("exec needs a program: argv is empty")
        request = ExecRequest(
            timeout_s=timeout_s,
            argv=[] if python else list(argv),
            python=python,
            stream=True,
            sweep=sweep.value,
            output_limit_bytes=output_limit_bytes,
            env=self._env(env),
            cwd=posixpath.normpath(posixpath.join(self.workdir, cwd)) if cwd else self.workdir,
            stdin_size=len(stdin),
        )
        return self._execute(request, stdin, on_output=on_output, cancelled=cancelled)

    def cancel_command(self) -> None:
        self.handle.conn.cancel_execution()

    def write_path(self, path: str, data: bytes) -> None:
        self._session_file_op(WriteRequest(path=path, confined=False), WriteReply, data, max_reply=0)

    def read_path(self, path: str, *, max_bytes: int) -> bytes:
        request = ReadRequest(path=path, max_bytes=max_bytes, confined=False)
        return self._session_file_op(request, ReadReply, b"", max_reply=max_bytes)

    # -- internals ---------------------------------------------------------------------------

    def _env(self, env: Mapping[str, str] | None) -> dict[str, str]:
        return {"PATH": "/usr/local/bin:/usr/bin:/bin", **SANDBOX_ENV, **self.handle.spec.env, **(env or {})}

    def _execute(
        self,
        request: ExecRequest,
        payload: bytes,
        *,
        on_output: Callable[[int, bytes], None] | None = None,
        cancelled: threading.Event | None = None,
    ) -> ExecOutcome:
        """Run one execution within the rollout's wall time; its outcome as the trusted side
        sees it (timeouts by the host's clock, OOM kills by the cgroup's counter)."""
        timeout_s, clipped = request.timeout_s, False
        remaining = self.remaining_s()
        if remaining is not None and remaining < timeout_s:
            if remaining <= 0:
                raise RolloutTimeout("rollout wall time used up before execution")
            timeout_s, clipped = remaining, True
        if clipped:
            request = replace(request, timeout_s=timeout_s)
        oom_before = self._oom_count()
        t0 = time.monotonic()
        reply = self._exec_reply(
            request, payload, oom_before=oom_before, on_output=on_output, cancelled=cancelled
        )
        elapsed = time.monotonic() - t0
        oom = self._oom_count() > oom_before
        timed_out = timeout_confirmed(reply.timed_out, elapsed, timeout_s)
        self._spoil_if_killed(reply, timed_out=timed_out, oom=oom)
        if timed_out and clipped:
            raise RolloutTimeout(f"rollout wall time ran out during an execution ({timeout_s:.1f}s left)")
        if reply.leftover_processes > 0 and request.sweep == Sweep.ALWAYS.value:
            # Could not clean up the process tree: this container is unsafe to keep using.
            self.kill()
            raise SandboxUnavailable("processes survived the post-execution sweep; container killed")
        return _outcome(reply, timed_out=timed_out, oom_killed=oom)

    def _spoil_if_killed(self, reply: ExecReply, *, timed_out: bool, oom: bool) -> None:
        """An execution the runner had to kill (or that claims it did) ends this container's
        reuse: the recycling policy keeps only containers whose executions all ended by
        themselves (``docs/recycling.md``)."""
        if timed_out or reply.timed_out:
            self.handle.spoil("timeout")
        elif oom:
            self.handle.spoil("oom")
        elif reply.output_limit_exceeded:
            self.handle.spoil("output-cap")
        elif reply.cancelled:
            self.handle.spoil("cancelled")

    def _exec_reply(
        self,
        request: ExecRequest,
        payload: bytes,
        *,
        oom_before: int,
        on_output: Callable[[int, bytes], None] | None,
        cancelled: threading.Event | None,
    ) -> ExecReply:
        """One execution's reply from the runner (waiting up to its timeout plus the backstop
        slack); a runner that died of the container's memory limit (the OOM counter moved past
        ``oom_before``) is :class:`OOMKilled`."""
        try:
            reply, _ = self._call(
                request,
                ExecReply,
                payload,
                timeout_s=request.timeout_s + BACKSTOP_SLACK_S,
                on_output=on_output,
                cancelled=cancelled,
            )
        except SandboxUnavailable:
            # The runner itself died: the OOM killer is the usual culprit.
            if self._oom_count(after_death=True) > oom_before:
                raise OOMKilled(
                    f"the container ran out of memory ({self.handle.spec.memory_bytes // 2**20} MiB limit)"
                ) from None
            raise
        return reply

    def _oom_count(self, *, after_death: bool = False) -> int:
        count = self.handle.oom_kills()
        if count is None and not after_death and not self.killed:
            try:
                reply, _ = self._call(OomRequest(), OomReply, timeout_s=_FILE_OP_TIMEOUT_S)
                count = reply.oom_kill
            except SandboxUnavailable:
                count = None
        return int(count or 0)

    def _session_file_op(
        self, request: WriteRequest | ReadRequest, reply: type[Message], payload: bytes, *, max_reply: int
    ) -> bytes:
        try:
            _, data = self._call(
                request,
                reply,
                payload,
                timeout_s=_SESSION_FILE_OP_TIMEOUT_S,
                refusals=True,
                max_reply_bytes=max_reply,
            )
        except RunnerError as exc:
            cls = _SESSION_FILE_ERRORS.get(exc.code, InvalidRequest)
            raise cls((exc.message or f"cannot use {request.path}")[:1000]) from None
        return data

    def _call(
        self,
        request: Message,
        reply: type[R],
        payload: bytes = b"",
        *,
        timeout_s: float,
        refusals: bool = False,
        max_reply_bytes: int | None = None,
        on_output: Callable[[int, bytes], None] | None = None,
        cancelled: threading.Event | None = None,
    ) -> tuple[R, bytes]:
        """One request over the runner connection, its failures typed.

        Raises:
            RunnerError: the runner refused, with ``refusals`` (the caller maps the code).
            InvalidRequest: the runner refused a path (without ``refusals``).
            Cancelled, RolloutTimeout, SandboxUnavailable: as in the contract.
        """
        if self.cancel.is_set():
            self.handle.spoil("cancelled")
            raise Cancelled("rollout cancelled")
        bound: dict[str, Any] = (
            {} if max_reply_bytes is None else {"max_reply_bytes": max(max_reply_bytes, 0)}
        )
        try:
            return self.handle.conn.call(
                request,
                payload,
                reply=reply,
                timeout_s=timeout_s,
                on_output=on_output,
                cancelled=cancelled,
                **bound,
            )
        except TimeoutError:
            self.kill()
            raise RolloutTimeout(
                f"container {self.handle.name} did not answer {request.op} within {timeout_s:.0f}s; killed"
            ) from None
        except (EOFError, OSError) as exc:
            self.handle.spoil("runner-error")
            if self.cancel.is_set():
                raise Cancelled("rollout cancelled") from None
            raise SandboxUnavailable(f"container {self.handle.name} went away: {exc}") from None
        except RunnerError as exc:
            if refusals:
                raise
            if exc.code == ErrorCode.BAD_PATH:
                raise InvalidRequest(exc.message or "bad path") from None
            self.handle.spoil("runner-error")
            raise SandboxUnavailable(f"runner error: {exc.message}") from None


def _outcome(reply: ExecReply, *, timed_out: bool, oom_killed: bool) -> ExecOutcome:
    """The runner's reply as the outcome, with what the trusted side determined itself."""
    spawn = reply.spawn_error or {}
    return ExecOutcome(
        exit_code=reply.exit_code,
        stdout_tail=reply.stdout_tail,
        stderr_tail=reply.stderr_tail,
        stdout_bytes=reply.stdout_bytes,
        stderr_bytes=reply.stderr_bytes,
        duration_s=reply.duration_s,
        timed_out=timed_out,
        oom_killed=oom_killed,
        signal=reply.signal,
        started_at_ns=reply.started_at_ns,
        output_limit_exceeded=reply.output_limit_exceeded,
        cancelled=reply.cancelled,
        spawn_error=str(spawn.get("code", ""))[:32],
        spawn_message=str(spawn.get("message", ""))[:500],
    )
