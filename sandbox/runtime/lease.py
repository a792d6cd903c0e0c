"""A leased sandbox as an env's agent sees it: :class:`LeasedSandbox` is the runtime's
:class:`sandbox.runtime.base.RolloutSandbox` (which also satisfies
:class:`skillopt.agents.sandbox.Sandbox`) with the skill package placed beside the agent's first
model call, and each execution traced."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from sandbox.runtime.base import RolloutSandbox, SandboxHandle, SandboxRuntime
from skillopt.agents.sandbox import ExecOutcome, FileEntry
from skillopt.observability import tracing
from skillopt.types import SkillVersion

__all__ = ["LeasedSandbox"]


class LeasedSandbox(RolloutSandbox):
    """A leased sandbox as an env's agent sees it (:class:`skillopt.agents.sandbox.Sandbox`).

    Every method is the runtime sandbox's own (same names, signatures and errors: a missing or
    refused file raises, see :func:`skillopt.agents.sandbox.read_output`), after the skill
    package's placement (:meth:`place_skill`, :meth:`settle`); executions are traced.

    Args:
        runtime: the runtime that created the sandbox.
        handle: the sandbox's handle.
        rollout_id: who holds it (recorded by the runtime for the reaper).
        output_limit_bytes, deadline, cancel: as for :meth:`SandboxRuntime.lease`.
    """

    def __init__(
        self,
        runtime: SandboxRuntime,
        handle: SandboxHandle,
        *,
        rollout_id: str = "",
        output_limit_bytes: int = 64 * 1024,
        deadline: float | None = None,
        cancel: threading.Event | None = None,
    ) -> None:
        self.runtime = runtime
        self.handle = handle
        self.box: RolloutSandbox = runtime.lease(
            handle, rollout_id, output_limit_bytes=output_limit_bytes, deadline=deadline, cancel=cancel
        )
        self._placing: threading.Thread | None = None
        self._placing_error: BaseException | None = None
        #: Seconds the skill package's placement took (0.0 until it ended).
        self.place_s = 0.0

    def place_skill(self, skill: SkillVersion, *, version: str = "") -> None:
        """Start placing the skill package (:meth:`RolloutSandbox.write_skill`) on a thread of
        its own: the agent's first model call overlaps it. Every operation on the sandbox but
        :meth:`kill` waits for it first (and raises what it raised), so nothing in the sandbox
        runs before the package is in place. A one-file skill is placed at once (one small
        write costs less than a thread)."""

        def place() -> None:
            t0 = time.monotonic()
            try:
                self.box.write_skill(skill, version=version)
            except BaseException as exc:  # raised to the sandbox's next user (settle)
                self._placing_error = exc
            finally:
                self.place_s = time.monotonic() - t0

        if not skill.files:
            t0 = time.monotonic()
            self.box.write_skill(skill, version=version)
            self.place_s = time.monotonic() - t0
            return
        self._placing = threading.Thread(target=place, name="place-skill", daemon=True)
        self._placing.start()

    def settle(self) -> None:
        """Wait for the skill package's placement (if one was started).

        Raises:
            SandboxUnavailable, InvalidRequest: as :meth:`RolloutSandbox.write_skill`.
        """
        placing = self._placing
        if placing is None:
            return
        placing.join()
        self._placing = None
        if self._placing_error is not None:
            error, self._placing_error = self._placing_error, None
            raise error

    def write_file(self, path: str, data: bytes) -> None:
        self.settle()
        self.box.write_file(path, data)

    def read_file(self, path: str, *, max_bytes: int) -> bytes:
        self.settle()
        return self.box.read_file(path, max_bytes=max_bytes)

    def list_files(self, *, max_files: int = 1000) -> list[FileEntry]:
        self.settle()
        return self.box.list_files(max_files=max_files)

    def write_skill(self, skill: SkillVersion, *, version: str = "") -> None:
        self.settle()
        self.box.write_skill(skill, version=version)

    def run_python(
        self,
        path: str,
        *,
        args: Sequence[str] = (),
        timeout_s: float,
        env: Mapping[str, str] | None = None,
    ) -> ExecOutcome:
        self.settle()
        with tracing.span("sandbox.exec", self._span_attributes("python")) as span:
            return _traced(span, self.box.run_python(path, args=args, timeout_s=timeout_s, env=env))

    def run_command(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        output_limit_bytes: int | None = None,
    ) -> ExecOutcome:
        self.settle()
        with tracing.span("sandbox.exec", self._span_attributes("command")) as span:
            outcome = self.box.run_command(
                argv, timeout_s=timeout_s, env=env, stdin=stdin, output_limit_bytes=output_limit_bytes
            )
            return _traced(span, outcome)

    def _span_attributes(self, kind: str) -> dict[str, Any]:
        """An execution span's attributes: its kind, and how many executions (leases) its
        container has served, this one included (above 1: a recycled container)."""
        return {"skillopt.exec.kind": kind, "skillopt.container.executions": self.handle.executions}

    def kill(self) -> None:
        self.box.kill()  # at once: never after a placement

    def remaining_s(self) -> float | None:
        return self.box.remaining_s()


def _traced(span: Any, outcome: ExecOutcome) -> ExecOutcome:
    """``outcome``, its exit told to ``span`` (an execution's span: no output, no code)."""
    if span.is_recording():
        span.set_attributes(
            {"skillopt.exec.timed_out": outcome.timed_out, "skillopt.exec.oom_killed": outcome.oom_killed}
        )
        if outcome.exit_code is not None:
            span.set_attribute("process.exit.code", outcome.exit_code)
    return outcome
