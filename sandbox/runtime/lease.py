"""A leased sandbox as an env's agent sees it: :class:`LeasedSandbox` shows any
:class:`sandbox.runtime.base.RolloutSandbox` as :class:`skillopt.agents.sandbox.Sandbox` (where
a missing or refused file reads as ``None``: to an agent both mean "no such output")."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import structlog

from sandbox.runtime.base import RolloutSandbox, SandboxHandle, SandboxRuntime
from skillopt.agents.sandbox import ExecOutcome
from skillopt.errors import SandboxFileMissing, SandboxFileRefused
from skillopt.observability import tracing
from skillopt.types import SkillSpec

__all__ = ["LeasedSandbox"]

log = structlog.get_logger("skillopt.sandbox.lease")


class LeasedSandbox:
    """A leased sandbox as an env's agent sees it (:class:`skillopt.agents.sandbox.Sandbox`).

    The one adapter between the two contracts: every method is the runtime sandbox's own
    (:class:`~sandbox.runtime.base.RolloutSandbox`, same names and signatures), except
    :meth:`read_file`, where a missing file and a refused one (a link the program planted, a
    directory) both read as ``None`` (neither is an output; the refusal is logged).

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

    def place_skill(self, skill: SkillSpec, *, version: str = "") -> None:
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

    def read_file(self, path: str, *, max_bytes: int) -> bytes | None:
        self.settle()
        try:
            return self.box.read_file(path, max_bytes=max_bytes)
        except SandboxFileMissing:
            return None
        except SandboxFileRefused as exc:
            log.info("sandbox.read_refused", path=path[:200], reason=exc.message)
            return None

    def run_python(self, path: str, **kwargs: Any) -> ExecOutcome:
        self.settle()
        with tracing.span("sandbox.exec", self._span_attributes("python")) as span:
            return _traced(span, self.box.run_python(path, **kwargs))

    def run_command(self, argv: Sequence[str], **kwargs: Any) -> ExecOutcome:
        self.settle()
        with tracing.span("sandbox.exec", self._span_attributes("command")) as span:
            return _traced(span, self.box.run_command(argv, **kwargs))

    def _span_attributes(self, kind: str) -> dict[str, Any]:
        """An execution span's attributes: its kind, and how many executions (leases) its
        container has served, this one included (above 1: a recycled container)."""
        return {"skillopt.exec.kind": kind, "skillopt.container.executions": self.handle.executions}

    def kill(self) -> None:
        self.box.kill()  # at once: never after a placement

    def remaining_s(self) -> float | None:
        return self.box.remaining_s()

    def __getattr__(self, name: str) -> Any:
        # write_file, list_files, write_skill: after the placement
        self.settle()
        return getattr(self.box, name)


def _traced(span: Any, outcome: ExecOutcome) -> ExecOutcome:
    """``outcome``, its exit told to ``span`` (an execution's span: no output, no code)."""
    if span.is_recording():
        span.set_attributes(
            {"skillopt.exec.timed_out": outcome.timed_out, "skillopt.exec.oom_killed": outcome.oom_killed}
        )
        if outcome.exit_code is not None:
            span.set_attribute("process.exit.code", outcome.exit_code)
    return outcome
