"""Warm pools of pre-started rollout containers, recycled within a tenant.

A cold container costs ~0.2 s of wall time to create and start plus ~0.1 s for the runner's
imports here, and creations serialize badly under concurrency, so each :class:`ContainerSpec`
in use keeps ``pool_size`` idle containers ready; a background maintainer refills the pool, with
at most ``max_concurrent_creations`` creations in flight across all pools (concurrent creations
slow each other down: moby#42096).

Recycling (``docs/recycling.md``): a fresh container is bound to the tenant of its first lease.
When it comes back it is reset to a verified clean slate (:meth:`SandboxRuntime.reset`, on a
worker thread) and kept idle for that tenant alone, under the runtime's policy: at most
``reuse_max_executions`` executions and ``reuse_max_age_s`` of age, never after anything spoiled
it (a kill, a timeout, an out-of-memory kill, an output cap, a runner or engine error), never
without a tenant. A tenant's acquisition takes its own reset container first, waits for one
whose reset is in flight (a few milliseconds) rather than take a fresh one, and takes a fresh
one otherwise. Anything else is destroyed, as every container was before recycling: the
engine's create/remove churn (~390 containers/min at most on this 2-core machine) then caps
only a tenant's first executions.

Acquisition never creates a container itself: it registers demand and waits, and the maintainer
creates for ``idle target + waiters``. That keeps the creation cap global. Waiters are served
first come, first served (when whichever thread woke first took a ready container, late
arrivals overtook waiting rollouts under sustained load: the longest wait was 5.6 s against a
median of 0.7 s, ``bench/bench_sandbox.py``).

Refills of the warm target wait for a burst of acquisitions to pass (``refill_delay_s``), and
so do removals of used containers: a container's whole life costs the engine ~0.15 s of CPU and
its runner's start ~0.09 s (2026-12-05), and eight creations started with eight rollouts took
the CPU those rollouts needed to start.

Bounded whatever the requests: only the ``max_warm_pools`` most recently used specs (and the
prewarmed default) keep warm containers, idle containers over all pools are capped at
``idle_cap``, and a pool with nothing idle, nothing in flight and nobody waiting is forgotten
once it is not warm any more. Closing aborts creations in flight and removes in parallel, so a
host with nothing running stops within seconds.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import structlog

from sandbox.runtime.base import SandboxHandle, SandboxRuntime, SlotState
from sandbox.runtime.pool_state import PoolStats, SpecPool
from sandbox.runtime.recycling import RecycleStats, Recycling
from sandbox.runtime.spec import ContainerSpec
from skillopt.errors import (
    Cancelled,
    ContainerStartFailed,
    Draining,
    ImageMissing,
    InfraError,
    RolloutTimeout,
)

__all__ = ["PoolManager", "PoolStats"]

log = structlog.get_logger("skillopt.sandbox.pool")

# After this many consecutive creation failures of one spec, waiters are failed with the last
# error instead of waiting for their deadline (a broken image stays broken).
_FAIL_FAST_AFTER = 3


class PoolManager:
    """Owns every pool of one runtime. Thread-safe."""

    def __init__(self, runtime: SandboxRuntime, *, default_spec: ContainerSpec | None = None) -> None:
        self.runtime = runtime
        self.config = runtime.config
        self._pools: dict[str, SpecPool] = {}
        self._default_key = default_spec.key if default_spec is not None else ""
        self._cond = threading.Condition()
        self._closing = False
        self._creators = ThreadPoolExecutor(
            max_workers=self.config.max_concurrent_creations, thread_name_prefix="pool-create"
        )
        self._destroyers = ThreadPoolExecutor(max_workers=4, thread_name_prefix="pool-destroy")
        self._destroying = 0  # released containers whose removal has not finished
        # Resets wait on a runner a few milliseconds each: never behind a slow removal.
        self._resetters = ThreadPoolExecutor(max_workers=4, thread_name_prefix="pool-reset")
        #: The recycling policy and what it did.
        self.recycling = Recycling(self.config)
        #: Container creations that failed (all specs): the metrics' engine errors.
        self.create_failures = 0
        self._in_flight = 0
        # The burst of acquisitions in progress: its first and its last (monotonic), or None.
        self._burst: tuple[float, float] | None = None
        self._maintainer = threading.Thread(target=self._maintain, name="pool-maintainer", daemon=True)
        if default_spec is not None:
            self._pool(default_spec)
        self._maintainer.start()

    # -- public ------------------------------------------------------------------------------

    def acquire(
        self,
        spec: ContainerSpec,
        *,
        timeout_s: float,
        cancel: threading.Event | None = None,
        expected: bool = False,
        tenant: str = "",
    ) -> SandboxHandle:
        """Take a container for ``spec``: for a ``tenant``, one of its own reset containers
        when there is one (or when one's reset is in flight, that one), else an idle fresh one,
        waiting for one if none is ready. ``expected``: this acquisition was announced with
        :meth:`expect` and takes the announcement's place. The container is bound to
        ``tenant`` (""; never reused) and counts one more execution.

        Raises:
            RolloutTimeout: none became ready within ``timeout_s``.
            ImageMissing / ContainerStartFailed: creation keeps failing for this spec.
            Draining: the pool manager is shutting down.
            Cancelled: ``cancel`` was set while it waited.
        """
        deadline = time.monotonic() + timeout_s
        with self._cond:
            pool = self._pool(spec)
            pool.last_used = time.monotonic()
            pool.acquired_total += 1
            if expected:
                pool.expected = max(0, pool.expected - 1)
            handle = self._take_recycled(pool, tenant)
            while handle is None and pool.resetting[tenant] and tenant:
                # Its own container is milliseconds from ready: a fresh one would cost the
                # engine a whole container to replace.
                self._check_waiting(pool, deadline, timeout_s, cancel)
                self._cond.wait(min(max(deadline - time.monotonic(), 0.001), 1.0))
                handle = self._take_recycled(pool, tenant)
            if handle is None:
                handle = self._take_fresh(pool, deadline, timeout_s, cancel, tenant)
            handle.state = SlotState.LEASED
            handle.tenant = handle.tenant or tenant
            handle.executions += 1
            pool.leased += 1
            return handle

    def _take_recycled(self, pool: SpecPool, tenant: str) -> SandboxHandle | None:
        """One of ``tenant``'s reset containers, the most recently reset first (its runner's
        pages are the warmest), or None."""
        queue = pool.recycled.get(tenant) if tenant else None
        while queue:
            handle = queue.pop()
            if not queue:
                del pool.recycled[tenant]
            if self.runtime.alive(handle):
                pool.acquired_warm += 1
                pool.reused_total += 1
                self._cond.notify_all()  # the idle count changed: refills may start
                return handle
            self.recycling.not_reused("dead")
            self._destroy_async(handle)
            queue = pool.recycled.get(tenant)
        return None

    def _take_fresh(
        self,
        pool: SpecPool,
        deadline: float,
        timeout_s: float,
        cancel: threading.Event | None,
        tenant: str,
    ) -> SandboxHandle:
        """An idle fresh container, first come first served, waiting for one (a reset
        container of ``tenant`` that becomes ready meanwhile is taken instead)."""
        warm = len(pool.idle) > len(pool.queue)
        ticket = object()
        pool.queue.append(ticket)
        self._cond.notify_all()
        try:
            while True:
                while pool.idle and pool.queue[0] is ticket:
                    handle = pool.idle.popleft()
                    if self.runtime.alive(handle):
                        pool.queue.popleft()
                        if warm:
                            pool.acquired_warm += 1
                        now = time.monotonic()
                        self._burst = (self._burst[0] if self._burst else now, now)
                        self._cond.notify_all()  # the next waiter's turn; refill
                        return handle
                    self._destroy_async(handle)
                recycled = self._take_recycled(pool, tenant)
                if recycled is not None:
                    return recycled
                self._check_waiting(pool, deadline, timeout_s, cancel)
                # Woken by every creation and reset; the bound only covers cancellation.
                self._cond.wait(min(max(deadline - time.monotonic(), 0.001), 1.0))
        finally:
            if ticket in pool.queue:  # took one, gave up (timeout, cancel, failure): next in line
                pool.queue.remove(ticket)
                self._cond.notify_all()

    def _check_waiting(
        self, pool: SpecPool, deadline: float, timeout_s: float, cancel: threading.Event | None
    ) -> None:
        """Raise what ends a wait for a container (closing, a broken image, cancel, timeout)."""
        if self._closing:
            raise Draining("sandbox host is shutting down")
        if pool.last_error is not None and pool.consecutive_failures >= _FAIL_FAST_AFTER:
            raise pool.last_error
        if cancel is not None and cancel.is_set():
            raise Cancelled("rollout cancelled while waiting for a container")
        if deadline - time.monotonic() <= 0:
            raise RolloutTimeout(
                f"no rollout container became ready within {timeout_s:.1f}s ({pool.creating} being created)"
            )

    def release(self, handle: SandboxHandle) -> None:
        """Give a used container back: reset for its tenant in the background when the
        recycling policy allows (see the module), else destroyed in the background."""
        why = self.recycling.why_not(handle, closing=self._closing)
        with self._cond:
            pool = self._pools.get(handle.spec.key)
            if pool is not None:
                pool.leased = max(0, pool.leased - 1)
            self._cond.notify_all()
            if why or pool is None:
                if not why:
                    self.recycling.not_reused("forgotten")
                self._destroy_async(handle)
                return
            pool.resetting[handle.tenant] += 1
        handle.state = SlotState.DRAINING  # not idle until its reset is verified
        try:
            self._resetters.submit(self._reset_one, pool, handle)
        except RuntimeError:  # closing
            self._reset_done(pool, handle, ok=False)

    def _reset_one(self, pool: SpecPool, handle: SandboxHandle) -> None:
        self._reset_done(pool, handle, ok=self.recycling.reset(self.runtime, handle))

    def _reset_done(self, pool: SpecPool, handle: SandboxHandle, *, ok: bool) -> None:
        with self._cond:
            pool.resetting[handle.tenant] -= 1
            if pool.resetting[handle.tenant] <= 0:
                del pool.resetting[handle.tenant]
            if ok and not self._closing and handle.spec.key in self._pools:
                handle.state = SlotState.IDLE
                handle.idle_since = time.monotonic()
                pool.recycled.setdefault(handle.tenant, collections.deque()).append(handle)
            else:  # counted as being removed before it stops counting as reset (wait_released)
                self._destroy_async(handle)
            self._cond.notify_all()

    def recycle_stats(self) -> RecycleStats:
        return self.recycling.stats()

    def expect(self, spec: ContainerSpec, count: int = 1) -> None:
        """Announce ``count`` acquisitions of ``spec`` to come (a negative count withdraws
        them): containers are made for them (after a burst of acquisitions, like refills, and
        on top of the warm target), so each finds its container ready. For a rollout's fresh
        grading container, asked for when its episode ends (each container is still used once;
        one announced and never taken is an idle container of the pool)."""
        with self._cond:
            pool = self._pool(spec)
            pool.expected = max(0, pool.expected + count)
            self._cond.notify_all()

    def prewarm(self, spec: ContainerSpec) -> None:
        """Start keeping a pool for ``spec``."""
        with self._cond:
            self._pool(spec).last_used = time.monotonic()
            self._cond.notify_all()

    def wait_ready(self, spec: ContainerSpec, count: int, *, timeout_s: float, tenant: str = "") -> bool:
        """Block until ``count`` idle containers of ``spec`` are ready (fresh; ``tenant``'s reset too)."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            pool = self._pool(spec)
            while len(pool.idle) + (len(pool.recycled.get(tenant, ())) if tenant else 0) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._closing:
                    return False
                if pool.last_error is not None and pool.consecutive_failures >= _FAIL_FAST_AFTER:
                    raise pool.last_error
                self._cond.wait(remaining)
            return True

    def wait_settled(self, *, timeout_s: float) -> bool:
        """Block until no creation is in flight, nobody waits, and the bounds hold (at most
        ``max_warm_pools`` pools, at most ``idle_cap`` idle containers); for tests and
        benchmarks. Returns False if that did not happen within ``timeout_s``."""

        def settled() -> bool:
            pools = list(self._pools.values())
            return (
                self._in_flight == 0
                and not any(p.waiters or p.resetting for p in pools)
                and len(pools) <= self.config.max_warm_pools
                and sum(len(p.idle) + p.recycled_count for p in pools) <= self.config.idle_cap
            )

        with self._cond:
            return self._cond.wait_for(settled, timeout=timeout_s)

    def stats(self) -> list[PoolStats]:
        with self._cond:
            warm = self._warm_keys(time.monotonic())
            return [
                PoolStats(
                    spec_key=k,
                    image=p.spec.image,
                    idle=len(p.idle),
                    creating=p.creating,
                    waiters=p.waiters,
                    created_total=p.created_total,
                    acquired_total=p.acquired_total,
                    acquired_warm=p.acquired_warm,
                    leased=p.leased,
                    target=(self.config.pool_size if k in warm else 0) + p.expected,
                    recycled=p.recycled_count,
                    reused_total=p.reused_total,
                )
                for k, p in self._pools.items()
            ]

    def close(self, *, timeout_s: float = 20.0) -> None:
        """Stop refilling, abort creations in flight and remove every idle container (leased
        ones are the caller's), in parallel and within about ``timeout_s``."""
        with self._cond:
            self._closing = True
            idle = [
                h
                for p in self._pools.values()
                for h in (*p.idle, *(h for q in p.recycled.values() for h in q))
            ]
            for p in self._pools.values():
                p.idle.clear()
                p.recycled.clear()
            self._cond.notify_all()
        self.runtime.abort_creations()  # a creation waiting for its runner gives up now
        deadline = time.monotonic() + timeout_s
        self._maintainer.join(timeout=5)
        for h in idle:
            self._destroy_async(h)
        self._creators.shutdown(wait=False, cancel_futures=True)
        self._resetters.shutdown(wait=False, cancel_futures=False)  # each ends in a removal
        for t in list(getattr(self._resetters, "_threads", ())):
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        self._destroyers.shutdown(wait=False, cancel_futures=False)
        for ex in (self._creators, self._destroyers):
            for t in list(getattr(ex, "_threads", ())):
                t.join(timeout=max(0.0, deadline - time.monotonic()))

    # -- internals ---------------------------------------------------------------------------

    def _pool(self, spec: ContainerSpec) -> SpecPool:
        pool = self._pools.get(spec.key)
        if pool is None:
            pool = self._pools[spec.key] = SpecPool(spec=spec)
        return pool

    def _destroy_async(self, handle: SandboxHandle) -> None:
        handle.state = SlotState.DRAINING
        with self._cond:
            self._destroying += 1
        try:
            self._destroyers.submit(self._destroy_counted, handle)
        except RuntimeError:  # executor shut down
            self._destroy_counted(handle)

    def _destroy_counted(self, handle: SandboxHandle) -> None:
        try:
            self._after_burst()  # a removal costs the engine CPU too (measured: see _refill_at)
            self.runtime.destroy(handle)
        finally:
            with self._cond:
                self._destroying -= 1
                self._cond.notify_all()

    def creation_problem(self) -> str:
        """Why the default spec's warm pool cannot be refilled ("" when its last creation
        succeeded): the host watch reports it, since every rollout would fail the same way (an
        engine that is shutting down still answers pings but creates nothing). Only for a host
        that keeps a warm pool: one without never creates ahead of a rollout, so it could not
        notice the recovery."""
        if self.config.pool_size == 0:
            return ""
        with self._cond:
            pool = self._pools.get(self._default_key)
            if pool is None or pool.consecutive_failures == 0 or pool.last_error is None:
                return ""
            return f"container creation failing ({pool.consecutive_failures}x): {pool.last_error.message}"

    def retry_creations(self) -> None:
        """Let the default pool try one more creation after it stopped on repeated failures
        (the host watch calls this while it reports :meth:`creation_problem`)."""
        with self._cond:
            pool = self._pools.get(self._default_key)
            if pool is not None and pool.consecutive_failures >= _FAIL_FAST_AFTER:
                pool.consecutive_failures = _FAIL_FAST_AFTER - 1
            self._cond.notify_all()

    def wait_released(self, *, timeout_s: float) -> bool:
        """Block until every container given back so far is reset (and idle for its tenant)
        or removed (container and host directories). Returns False if some reset or removal is
        still running after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._destroying or any(p.resetting for p in self._pools.values()):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True

    def holds(self, name: str) -> str:
        """Where the pool holds container ``name``: ``idle`` (fresh), ``recycled`` (reset, kept
        for its tenant) or "" (leased, being reset or removed, or not the pool's)."""
        with self._cond:
            for pool in self._pools.values():
                if any(h.name == name for h in pool.idle):
                    return "idle"
                if any(h.name == name for q in pool.recycled.values() for h in q):
                    return "recycled"
            return ""

    def _warm_keys(self, now: float) -> set[str]:
        """Specs that keep warm containers: the default and the most recently used others."""
        recent = sorted(
            (
                p
                for k, p in self._pools.items()
                if k != self._default_key and now - p.last_used < self.config.pool_idle_ttl_s
            ),
            key=lambda p: -p.last_used,
        )
        keys = {
            p.spec.key for p in recent[: max(0, self.config.max_warm_pools - (1 if self._default_key else 0))]
        }
        if (
            self._default_key in self._pools
            and now - self._pools[self._default_key].last_used < self.config.pool_idle_ttl_s
        ):
            keys.add(self._default_key)
        return keys

    def _after_burst(self) -> None:
        """Wait until the burst of acquisitions in progress is over (at most 5x
        ``refill_delay_s`` after it began; at once when closing)."""
        with self._cond:
            while not self._closing:
                left = self._refill_at() - time.monotonic()
                if left <= 0:
                    return
                self._cond.wait(left)

    def _refill_at(self) -> float:
        """When warm refills and removals of used containers may start (monotonic); 0 = now.
        Eight rollouts starting at once on this 2-core host: first instruction p50 92 ms and
        p99 189 ms with both right away, 66 / 144 ms with refills after the burst, 47 / 96 ms
        with removals after it too (bench/bench_sandbox.py, concurrency 8)."""
        if self._burst is None:
            return 0.0
        first, last = self._burst
        delay = self.config.refill_delay_s
        return min(last + delay, first + 5 * delay)

    def _want(self, pool: SpecPool, warm: bool, idle_room: int, refill: bool = True) -> int:
        """How many more containers this pool should have in flight (waiters first; warm
        containers only for warm pools, within the host's idle cap, once ``refill``; announced
        ones once ``refill`` too, on top of the warm target: a creation during a burst of
        rollout starts would slow them down, and the announced acquisition comes later)."""
        waiting = max(0, len(pool.queue) - len(pool.idle) - pool.creating)
        if pool.consecutive_failures >= _FAIL_FAST_AFTER and pool.waiters == 0:
            return 0  # stop hammering a broken image; a new acquire retries
        if waiting:
            return waiting
        if not refill:
            return 0
        target = (self.config.pool_size if warm else 0) + pool.expected
        # Announced ones are demand: reset containers filling the idle cap never hold them back.
        return max(0, min(target - len(pool.idle) - pool.creating, max(idle_room, 0) + pool.expected))

    def _maintain(self) -> None:
        while True:
            with self._cond:
                if self._closing:
                    return
                now = time.monotonic()
                warm = self._warm_keys(now)
                stale: list[SandboxHandle] = []
                for key, pool in list(self._pools.items()):
                    keep_warm = key in warm or pool.waiters > 0
                    pool.idle = self._fresh_kept(pool.idle, keep_warm, stale)
                    for tenant, queue in list(pool.recycled.items()):
                        kept = self._fresh_kept(queue, keep_warm, stale, max_age_s=self.recycling.max_age_s)
                        if kept:
                            pool.recycled[tenant] = kept
                        else:
                            del pool.recycled[tenant]
                    busy = pool.idle or pool.recycled or pool.resetting or pool.leased
                    if key not in warm and not busy and not pool.creating and not pool.waiters:
                        del self._pools[key]  # forgotten; a later acquire starts it again
                stale += self._over_idle_cap()
                for h in stale:  # counted as being removed while still under the lock (wait_released)
                    self._destroy_async(h)
                idle_room = self.config.idle_cap - sum(
                    len(p.idle) + p.recycled_count + p.creating for p in self._pools.values()
                )
                refill_at = self._refill_at()
                refill = now >= refill_at
                if refill:
                    self._burst = None
                # Round-robin over pools so one busy spec cannot starve another.
                started = True
                while started and self._in_flight < self.config.max_concurrent_creations:
                    started = False
                    for pool in sorted(self._pools.values(), key=lambda p: -p.waiters):
                        if self._in_flight >= self.config.max_concurrent_creations:
                            break
                        want = self._want(pool, pool.spec.key in warm, idle_room, refill)
                        if want > 0:
                            if pool.waiters <= len(pool.idle) + pool.creating:
                                idle_room -= 1  # a warm container, not one for a waiter
                            pool.creating += 1
                            self._in_flight += 1
                            self._creators.submit(self._create_one, pool)
                            started = True
                self._cond.notify_all()  # pools trimmed or forgotten: tell wait_settled
                self._cond.wait(timeout=5.0 if refill else max(0.01, refill_at - now))

    def _fresh_kept(
        self,
        idle: collections.deque[SandboxHandle],
        keep_warm: bool,
        stale: list[SandboxHandle],
        *,
        max_age_s: float | None = None,
    ) -> collections.deque[SandboxHandle]:
        """The idle containers of ``idle`` still worth keeping; the others go to ``stale``:
        too old (``max_idle_s``, and ``max_age_s`` for reset ones), dead, or of a pool that is
        not warm any more (its memory given back)."""
        keep: collections.deque[SandboxHandle] = collections.deque()
        limit = min(self.config.max_idle_s, max_age_s if max_age_s is not None else self.config.max_idle_s)
        for h in idle:
            if time.time() - h.created_at > limit or not keep_warm or not self.runtime.alive(h):
                stale.append(h)
            else:
                keep.append(h)
        return keep

    def _over_idle_cap(self) -> list[SandboxHandle]:
        """Idle containers beyond the host-wide cap, which go: the least recently used first,
        fresh or reset (a fresh one only from a pool nobody waits on)."""
        pools = list(self._pools.values())
        excess = sum(len(p.idle) + p.recycled_count for p in pools) - self.config.idle_cap
        if excess <= 0:
            return []
        idle = [(h, p, "") for p in pools if p.waiters == 0 for h in p.idle]
        idle += [(h, p, t) for p in pools for t, q in p.recycled.items() for h in q]
        out = []
        for h, p, tenant in sorted(idle, key=lambda x: x[0].idle_since)[:excess]:
            queue = p.recycled[tenant] if tenant else p.idle
            queue.remove(h)
            if tenant and not queue:
                del p.recycled[tenant]
            out.append(h)
        return out

    def _create_one(self, pool: SpecPool) -> None:
        handle: SandboxHandle | None = None
        error: InfraError | None = None
        try:
            handle = self.runtime.create(pool.spec)
        except (ContainerStartFailed, ImageMissing, InfraError) as exc:
            error = exc
            log.warning("pool.create_failed", spec=pool.spec.key, image=pool.spec.image, error=exc.message)
        except Exception as exc:  # never let the maintainer's worker die silently
            error = ContainerStartFailed(f"unexpected error creating a container: {exc!r}")
            log.exception("pool.create_crashed", spec=pool.spec.key)
        with self._cond:
            pool.creating -= 1
            self._in_flight -= 1
            if handle is not None:
                pool.created_total += 1
                pool.consecutive_failures = 0
                pool.last_error = None
                if self._closing:
                    handle_to_drop: SandboxHandle | None = handle
                else:
                    handle_to_drop = None
                    handle.idle_since = time.monotonic()
                    pool.idle.append(handle)
            else:
                handle_to_drop = None
                pool.consecutive_failures += 1
                pool.last_error = error
                self.create_failures += 1
            self._cond.notify_all()
        if handle_to_drop is not None:
            with contextlib.suppress(Exception):
                self.runtime.destroy(handle_to_drop)
