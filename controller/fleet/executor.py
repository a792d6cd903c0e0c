"""A fleet of sandbox hosts as one :class:`RolloutExecutor`.

Placement is on reported capacity (``Describe`` at start, then our own in-flight count): each
rollout goes to the host with the most free slots. A retryable infrastructure failure is tried
again, with the same ``rollout_id``, on another host when there is one (the id makes a retry
on a host that already ran it a replay, never a second run). The client deadline is the task
timeout plus slack; the host itself bounds the rollout's wall time and kills its container.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import structlog

from controller.client.sandbox_client import ChannelConfig, SandboxClient
from skillopt.errors import Cancelled, HostFull, InfraError, InvalidRequest, SkillOptError
from skillopt.types import InfraError as InfraErrorInfo
from skillopt.types import InfraErrorKind, RolloutRequest, RolloutResult

__all__ = ["FleetExecutor", "HostState"]

log = structlog.get_logger("skillopt.controller.fleet")


@dataclass
class HostState:
    client: SandboxClient
    address: str
    capacity: int
    in_flight: int = 0
    failures: int = 0


class FleetExecutor:
    """Runs rollouts over one or more sandbox hosts.

    Args:
        channels: one per host.
        workers: rollouts in flight at once (bounded further by the hosts' capacity).
        rpc_slack_s: client deadline = the request's wall time + this slack.
        max_attempts: attempts per rollout for retryable infrastructure failures.
    """

    def __init__(
        self,
        channels: Sequence[ChannelConfig],
        *,
        workers: int,
        rpc_slack_s: float = 60.0,
        max_attempts: int = 3,
        on_event: Callable[[str, object], None] | None = None,
    ) -> None:
        if not channels:
            raise InvalidRequest("no sandbox endpoints given")
        self.hosts_state: list[HostState] = []
        for ch in channels:
            client = SandboxClient(ch)
            try:
                info = client.describe(timeout_s=30)
            except SkillOptError as exc:
                client.close()
                raise type(exc)(f"sandbox host {ch.address} is not usable: {exc.message}") from exc
            self.hosts_state.append(
                HostState(client=client, address=ch.address, capacity=max(1, info.capacity))
            )
            log.info(
                "fleet.host",
                address=ch.address,
                host=info.host,
                capacity=info.capacity,
                digests=dict(info.image_digests),
            )
        self.workers = max(1, min(workers, sum(h.capacity for h in self.hosts_state)))
        self.rpc_slack_s = rpc_slack_s
        self.max_attempts = max_attempts
        self.on_event = on_event
        self._lock = threading.Condition()
        self._host_ids: set[str] = set()

    def hosts(self) -> list[str]:
        return sorted(self._host_ids) or [h.address for h in self.hosts_state]

    def _pick(self, avoid: set[str], stop: threading.Event) -> HostState | None:
        with self._lock:
            while not stop.is_set():
                free = [h for h in self.hosts_state if h.in_flight < h.capacity]
                preferred = [h for h in free if h.address not in avoid] or free
                if preferred:
                    host = max(preferred, key=lambda h: (h.capacity - h.in_flight, -h.failures))
                    host.in_flight += 1
                    return host
                self._lock.wait(1.0)  # woken when a slot frees; bounded to notice `stop`
        return None

    def _release(self, host: HostState) -> None:
        with self._lock:
            host.in_flight -= 1
            self._lock.notify_all()

    def run(
        self,
        requests: Sequence[RolloutRequest],
        *,
        on_result: Callable[[RolloutResult], None],
        stop: threading.Event,
    ) -> None:
        if not requests:
            return
        with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="fleet") as pool:
            futures = [pool.submit(self._one, req, on_result, stop) for req in requests]
            for f in futures:
                f.result()

    def _one(
        self, req: RolloutRequest, on_result: Callable[[RolloutResult], None], stop: threading.Event
    ) -> None:
        tried: set[str] = set()
        last: RolloutResult | None = None
        wall = req.limits.wall_time_s or 600.0
        for attempt in range(1, self.max_attempts + 1):
            if stop.is_set():
                return
            host = self._pick(tried, stop)
            if host is None:
                return
            tried.add(host.address)
            t0 = time.monotonic()
            try:
                row = host.client.run(req, timeout_s=wall + self.rpc_slack_s, cancel=stop)
            except HostFull:
                # Someone else filled it (another controller): retry after a slot frees.
                self._release(host)
                tried.discard(host.address)
                continue
            except Cancelled as exc:
                self._release(host)
                if stop.is_set():
                    return
                row = _infra_row(req, InfraErrorKind.CANCELLED, exc.message, host.address)
            except InvalidRequest as exc:
                self._release(host)
                row = _infra_row(
                    req,
                    InfraErrorKind.INTERNAL,
                    f"host refused the request: {exc.message}",
                    host.address,
                    retryable=False,
                )
            except InfraError as exc:
                self._release(host)
                host.failures += 1
                row = _infra_row(req, exc.kind, exc.message, host.address, retryable=exc.retryable)
                if exc.kind == InfraErrorKind.TIMEOUT:
                    row = _timeout_row(req, wall, host.address)
            except SkillOptError as exc:  # e.g. UNAUTHENTICATED: configuration, not transient
                self._release(host)
                row = _infra_row(req, InfraErrorKind.INTERNAL, exc.message, host.address, retryable=False)
            else:
                self._release(host)
                if row.host:
                    with self._lock:
                        self._host_ids.add(row.host)
            last = row
            if row.infra_error is None or not row.infra_error.is_retryable or attempt == self.max_attempts:
                break
            log.info(
                "fleet.retry",
                rollout_id=req.rollout_id,
                host=host.address,
                kind=row.infra_error.kind.value,
                attempt=attempt,
                seconds=round(time.monotonic() - t0, 2),
            )
        if last is not None and not stop.is_set():
            on_result(last)


def _infra_row(
    req: RolloutRequest, kind: InfraErrorKind, message: str, host: str, *, retryable: bool | None = None
) -> RolloutResult:
    return RolloutResult(
        id=req.task.id,
        rollout_id=req.rollout_id,
        phase="infra",
        fail_reason=f"infra-{kind.value}: {message}",
        host=host,
        infra_error=InfraErrorInfo(kind=kind, message=message, retryable=retryable),
    )


def _timeout_row(req: RolloutRequest, wall_s: float, host: str) -> RolloutResult:
    """The reference's timeout row (``task-timeout-<N>s``), typed: the host was asked to stop at
    the wall time and the client deadline expired too; the server killed the container."""
    return RolloutResult(
        id=req.task.id,
        rollout_id=req.rollout_id,
        phase="timeout",
        fail_reason=f"task-timeout-{int(wall_s)}s",
        host=host,
        infra_error=InfraErrorInfo(
            kind=InfraErrorKind.TIMEOUT, message=f"no result within {wall_s:.0f}s", retryable=False
        ),
    )
