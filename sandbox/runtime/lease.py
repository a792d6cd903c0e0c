"""A leased sandbox as an env's agent sees it: :class:`LeasedSandbox` shows any
:class:`sandbox.runtime.base.RolloutSandbox` as :class:`skillopt.agents.sandbox.Sandbox` (where
a missing or refused file reads as ``None``: to an agent both mean "no such output")."""

from __future__ import annotations

import threading
from typing import Any

import structlog

from sandbox.runtime.base import RolloutSandbox, SandboxHandle, SandboxRuntime
from skillopt.errors import SandboxFileMissing, SandboxFileRefused

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

    def read_file(self, path: str, *, max_bytes: int) -> bytes | None:
        try:
            return self.box.read_file(path, max_bytes=max_bytes)
        except SandboxFileMissing:
            return None
        except SandboxFileRefused as exc:
            log.info("sandbox.read_refused", path=path[:200], reason=exc.message)
            return None

    def __getattr__(self, name: str) -> Any:
        # run_command, run_python, write_file, list_files, write_skill, kill, remaining_s
        return getattr(self.box, name)
