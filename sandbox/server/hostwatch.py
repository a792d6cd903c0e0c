"""Health that follows what the host can do (:class:`HostWatch`): NOT_SERVING while its
container engine does not answer, its warm pool cannot be refilled or its state dir is full."""

from __future__ import annotations

import threading
import time

import structlog
from grpc_health.v1 import health, health_pb2

from sandbox.api.v1 import sandbox_pb2 as pb
from sandbox.runtime.base import SandboxRuntime
from sandbox.runtime.pool import PoolManager

__all__ = ["SERVICE_NAME", "HostWatch", "host_problem"]

log = structlog.get_logger("skillopt.sandbox.server")

#: The Sandbox service's full name (its health status is set under it and under "").
SERVICE_NAME = pb.DESCRIPTOR.services_by_name["Sandbox"].full_name


def host_problem(
    runtime: SandboxRuntime, pools: PoolManager, min_free_bytes: int, *, ping: bool = True
) -> str:
    """Why this host cannot take rollouts now ("" when it can): its engine does not answer
    (``ping``: one round trip to the engine), its warm pool cannot be refilled, or its
    storage for sandboxes is nearly full."""
    return (
        (runtime.engine_problem() if ping else "")
        or pools.creation_problem()
        or runtime.storage_problem(min_free_bytes)
    )


class HostWatch:
    """Health follows what the host can do: NOT_SERVING while :func:`host_problem` finds one
    (a restarting engine, a full disk), SERVING again once it passes, so controllers stop
    placing here meanwhile. Checked every ``interval_s`` and at every rollout's
    admission (:meth:`check_now`), so a fault is seen by the first rollout it would hit.
    Draining wins: after it the status no longer changes (``enter_graceful_shutdown``).

    At admission the engine is pinged only when no ping succeeded in the last
    :attr:`PING_MAX_AGE_S`: a ping is an HTTP round trip that cost every rollout 1-3 ms of
    start latency (and engine CPU under load). The pool's creation failures and the disk check,
    both local, still run every time; a rollout admitted within that second of an engine fault
    fails as a retryable infra row, like one that was already running."""

    #: How long a successful engine ping stands for the engine's health at admission.
    PING_MAX_AGE_S = 1.0

    def __init__(
        self,
        runtime: SandboxRuntime,
        pools: PoolManager,
        health_servicer: health.HealthServicer,
        *,
        host_id: str,
        min_free_bytes: int,
        interval_s: float,
    ) -> None:
        self.runtime, self.pools, self.health = runtime, pools, health_servicer
        self.host_id, self.min_free_bytes, self.interval_s = host_id, min_free_bytes, interval_s
        self._lock = threading.Lock()
        self._serving = True
        self._pinged_at = float("-inf")  # monotonic time of the last successful engine ping
        #: Checks that found the container engine unreachable (the metrics' engine errors).
        self.engine_unreachable = 0

    def check_now(self, *, fresh: bool = False) -> str:
        """The current problem ("" = none), with health updated to match; ``fresh`` pings the
        engine even when a recent ping succeeded (the periodic check does)."""
        ping = fresh or not self._serving or time.monotonic() - self._pinged_at > self.PING_MAX_AGE_S
        problem = host_problem(self.runtime, self.pools, self.min_free_bytes, ping=ping)
        if problem.startswith("container engine unreachable"):
            self.engine_unreachable += 1
        elif ping:
            self._pinged_at = time.monotonic()
        with self._lock:
            if bool(problem) != (not self._serving):
                self._serving = not problem
                status = (
                    health_pb2.HealthCheckResponse.SERVING
                    if self._serving
                    else health_pb2.HealthCheckResponse.NOT_SERVING
                )
                for name in ("", SERVICE_NAME):
                    self.health.set(name, status)
                if self._serving:
                    log.info("host.serving_again", host=self.host_id)
                else:
                    log.warning("host.not_serving", host=self.host_id, reason=problem)
        return problem

    @property
    def serving(self) -> bool:
        """Whether the last check found the host able to take rollouts."""
        return self._serving

    def loop(self, stopped: threading.Event) -> None:
        while not stopped.wait(self.interval_s):
            try:
                if self.check_now(fresh=True):
                    self.pools.retry_creations()  # no rollout comes to try: probe the recovery
            except Exception:  # the watch must never die
                log.exception("host.check_failed")
