"""What one container spec's warm pool holds (:class:`SpecPool`, the pool manager's, under its
lock) and what a host reports of it (:class:`PoolStats`)."""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field

from sandbox.runtime.base import SandboxHandle
from sandbox.runtime.spec import ContainerSpec
from skillopt.errors import InfraError

__all__ = ["PoolStats", "SpecPool"]


@dataclass
class SpecPool:
    """One container spec's pool: its idle containers (fresh, and reset ones per tenant), its
    acquisitions waiting or announced, its creations in flight and its counters. Owned by the
    :class:`~sandbox.runtime.pool.PoolManager`, under its lock."""

    spec: ContainerSpec
    #: Fresh containers, bound to no tenant yet (first come, first served).
    idle: collections.deque[SandboxHandle] = field(default_factory=collections.deque)
    #: Reset containers kept for their tenant, by tenant id (the most recently reset last).
    recycled: dict[str, collections.deque[SandboxHandle]] = field(default_factory=dict)
    #: Resets in flight, by tenant id: an acquisition of that tenant waits for one.
    resetting: collections.Counter[str] = field(default_factory=collections.Counter)
    #: Acquisitions served by a reset container.
    reused_total: int = 0
    creating: int = 0
    #: One ticket per acquisition waiting, oldest first: only the oldest takes a container.
    queue: collections.deque[object] = field(default_factory=collections.deque)
    last_used: float = field(default_factory=time.monotonic)
    consecutive_failures: int = 0
    last_error: InfraError | None = None
    created_total: int = 0
    acquired_total: int = 0
    acquired_warm: int = 0
    #: Acquisitions announced ahead (:meth:`PoolManager.expect`) and not made yet.
    expected: int = 0
    #: Containers acquired and not released yet (rollouts' and sessions').
    leased: int = 0

    @property
    def waiters(self) -> int:
        """Acquisitions waiting, and those announced: the maintainer creates for both."""
        return len(self.queue) + self.expected

    @property
    def recycled_count(self) -> int:
        return sum(len(q) for q in self.recycled.values())


@dataclass(frozen=True)
class PoolStats:
    spec_key: str
    image: str
    idle: int
    creating: int
    waiters: int
    created_total: int
    acquired_total: int
    acquired_warm: int
    #: Containers acquired and not released yet; idle containers the pool keeps ready.
    leased: int = 0
    target: int = 0
    #: Reset containers idle for their tenants; acquisitions they served.
    recycled: int = 0
    reused_total: int = 0
