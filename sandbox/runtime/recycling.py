"""Container recycling's policy and its counters (``docs/recycling.md``): which used container
is reset for its tenant rather than destroyed, one reset done on a worker thread with its
outcome logged, and the figures metrics and ``fleet status`` show. The warm pool
(``pool.PoolManager``) keeps the reset containers per tenant and asks this module what to do."""

from __future__ import annotations

import bisect
import collections
import threading
import time
from dataclasses import dataclass

import structlog

from sandbox.runtime.base import SandboxHandle, SandboxRuntime
from sandbox.runtime.spec import RuntimeConfig
from skillopt.errors import SandboxResetFailed

__all__ = ["RESET_BUCKETS_S", "RecycleStats", "Recycling"]

log = structlog.get_logger("skillopt.sandbox.pool")

#: Upper bounds (seconds) of the reset-duration histogram.
RESET_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0)


@dataclass(frozen=True)
class RecycleStats:
    """The recycling of every pool of a host, for metrics and ``fleet status``."""

    #: The policy (0 executions: recycling off).
    max_executions: int
    max_age_s: float
    #: Resets that succeeded, and their durations' histogram (cumulative counts per bound of
    #: :data:`RESET_BUCKETS_S`, the last one +Inf).
    resets_total: int
    reset_seconds_sum: float
    reset_buckets: tuple[int, ...]
    #: Resets that failed, by reason (:class:`~skillopt.errors.SandboxResetFailed`).
    reset_failures: dict[str, int]
    #: Containers given back and destroyed instead of reset, by reason (what spoiled them, or
    #: the policy: ``max-executions``, ``max-age``, ``off``, ``no-tenant``, ``closing``).
    not_reused: dict[str, int]


class Recycling:
    """The policy of one runtime's pools, and what it did. Thread-safe."""

    def __init__(self, config: RuntimeConfig) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._resets = 0
        self._reset_seconds = 0.0
        self._buckets = [0] * (len(RESET_BUCKETS_S) + 1)
        self._failures: collections.Counter[str] = collections.Counter()
        self._not_reused: collections.Counter[str] = collections.Counter()

    @property
    def max_age_s(self) -> float:
        """The oldest a container may be to be reset and reused: the policy's bound, never past
        the containers' hard lifetime (the reaper's)."""
        return min(self.config.reuse_max_age_s, self.config.max_container_lifetime_s)

    def why_not(self, handle: SandboxHandle, *, closing: bool) -> str:
        """Why the policy destroys ``handle`` rather than reset it ("" = reset it); counted."""
        why = self._why_not(handle, closing=closing)
        if why:
            self.not_reused(why)
        return why

    def _why_not(self, handle: SandboxHandle, *, closing: bool) -> str:
        if self.config.reuse_max_executions == 0:
            return "off"
        if handle.taint:
            return handle.taint
        if not handle.tenant:
            return "no-tenant"
        if closing:
            return "closing"
        if handle.executions >= self.config.reuse_max_executions:
            return "max-executions"
        if time.time() - handle.created_at >= self.max_age_s:
            return "max-age"
        return ""

    def not_reused(self, reason: str) -> None:
        """Count a used container destroyed rather than reset (``reason``: a bounded word)."""
        with self._lock:
            self._not_reused[reason] += 1

    def reset(self, runtime: SandboxRuntime, handle: SandboxHandle) -> bool:
        """Reset ``handle`` (:meth:`SandboxRuntime.reset`); whether it may be reused. A failure
        is counted by its reason and logged, never raised."""
        try:
            report = runtime.reset(handle)
        except SandboxResetFailed as exc:
            reason, message = exc.reason, exc.message
        except Exception as exc:  # never let a reset worker die silently; the container goes
            reason, message = "crashed", repr(exc)
            log.exception("pool.reset_crashed", container=handle.name)
        else:
            if report.restored:
                log.info(
                    "pool.reset_restored",
                    container=handle.name,
                    tenant=handle.tenant,
                    restored=report.restored,
                )
            with self._lock:
                self._resets += 1
                self._reset_seconds += report.duration_s
                self._buckets[bisect.bisect_left(RESET_BUCKETS_S, report.duration_s)] += 1
            return True
        with self._lock:
            self._failures[reason] += 1
        log.warning(
            "pool.reset_failed",
            container=handle.name,
            tenant=handle.tenant,
            executions=handle.executions,
            reason=reason,
            error=message[:500],
        )
        return False

    def stats(self) -> RecycleStats:
        with self._lock:
            buckets, total = [], 0
            for n in self._buckets:
                total += n
                buckets.append(total)
            return RecycleStats(
                max_executions=self.config.reuse_max_executions,
                max_age_s=self.config.reuse_max_age_s,
                resets_total=self._resets,
                reset_seconds_sum=self._reset_seconds,
                reset_buckets=tuple(buckets),
                reset_failures=dict(self._failures),
                not_reused=dict(self._not_reused),
            )
