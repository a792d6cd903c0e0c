"""Rollouts in flight and recently finished, by rollout id (idempotency, capacity, cancel).

A ``Run`` for an id this host already has never starts a second rollout: the caller subscribes
to the existing one and gets its events and result. A finished rollout's result is kept for a
while (bounded by count and bytes) so a client that lost the stream can fetch it again.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from sandbox.service.validation import approx_size_bytes
from skillopt.envs.base import ProgressEvent
from skillopt.errors import Draining, HostFull, InvalidRequest
from skillopt.types import RolloutResult

__all__ = ["RolloutAdmission", "RolloutHandle"]


@dataclass(eq=False)
class RolloutHandle:
    """One rollout's shared state: events so far, the result, the cancel flag, subscribers."""

    rollout_id: str
    fingerprint: str
    cancel: threading.Event = field(default_factory=threading.Event)
    events: list[tuple[int, ProgressEvent]] = field(default_factory=list)
    result: RolloutResult | None = None
    error: BaseException | None = None
    subscribers: int = 0
    started_at: float = field(default_factory=time.monotonic)
    finished_at: float | None = None
    size_bytes: int = 0
    cancelled_by: str = ""
    _cond: threading.Condition = field(default_factory=threading.Condition)
    #: Called once by whoever cancels (kills the container); set by the service.
    on_cancel: Callable[[], None] | None = None

    @property
    def done(self) -> bool:
        return self.result is not None or self.error is not None

    def emit(self, event: ProgressEvent) -> None:
        with self._cond:
            self.events.append((time.time_ns(), event))
            self._cond.notify_all()

    def finish(self, result: RolloutResult | None, error: BaseException | None = None) -> None:
        with self._cond:
            self.result, self.error = result, error
            self.finished_at = time.monotonic()
            # The killer closes over the whole running rollout (its request: skill package,
            # input files): a retained handle kept it, uncounted, up to 512 of them (the soak's
            # RSS slope, bench/README.md). A finished rollout has nothing left to kill.
            self.on_cancel = None
            if result is not None:
                # The whole retained result (trace, prompts, exchanges, artifacts) and the
                # events: what a finished rollout really keeps in memory.
                self.size_bytes = approx_size_bytes(result) + approx_size_bytes(self.events)
            self._cond.notify_all()

    def wait_done(self, timeout_s: float) -> bool:
        """Block until the rollout has finished (or ``timeout_s`` passed); returns ``done``."""
        with self._cond:
            return self._cond.wait_for(lambda: self.done, timeout=timeout_s)

    def request_cancel(self, reason: str) -> bool:
        """Cancel if still running; returns whether this call cancelled it."""
        with self._cond:
            if self.done or self.cancel.is_set():
                return False
            self.cancel.set()
            self.cancelled_by = reason
            callback = self.on_cancel
            self._cond.notify_all()
        if callback is not None:
            callback()
        return True

    def follow(
        self, stop: threading.Event | None = None
    ) -> Iterator[tuple[int, ProgressEvent] | RolloutResult]:
        """Yield every event (from the first) and finally the result; raises the rollout's
        error if it failed outside the result path. Stops early when ``stop`` is set."""
        index = 0
        while True:
            with self._cond:
                while index >= len(self.events) and not self.done:
                    if stop is not None and stop.is_set():
                        return
                    self._cond.wait(timeout=1.0)  # bounded only to notice `stop`
                pending = self.events[index:]
                index = len(self.events)
                done = self.done and not pending
            yield from pending
            if done:
                if self.error is not None:
                    raise self.error
                assert self.result is not None
                yield self.result
                return


class RolloutAdmission:
    """Admission control and idempotency for one host."""

    def __init__(
        self, *, capacity: int, max_retained: int = 512, max_retained_bytes: int = 256 << 20
    ) -> None:
        self.capacity = capacity
        self.max_retained = max_retained
        self.max_retained_bytes = max_retained_bytes
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._running: dict[str, RolloutHandle] = {}
        self._finished: collections.OrderedDict[str, RolloutHandle] = collections.OrderedDict()
        self._finished_bytes = 0
        self.draining = False

    def admit(self, rollout_id: str, fingerprint: str) -> tuple[RolloutHandle, bool]:
        """Return ``(handle, is_new)``. A new handle takes a slot until :meth:`complete`.

        Raises:
            InvalidRequest: the id is known with a different request.
            Draining: the host is shutting down (only for new ids).
            HostFull: every slot is taken (only for new ids).
        """
        with self._lock:
            existing = self._running.get(rollout_id) or self._finished.get(rollout_id)
            if existing is not None:
                if existing.fingerprint != fingerprint:
                    raise InvalidRequest(
                        f"rollout id {rollout_id!r} was already used for a different request; "
                        "use a new id per distinct rollout"
                    )
                existing.subscribers += 1
                return existing, False
            if self.draining:
                raise Draining("sandbox host is draining; send the rollout to another host")
            if len(self._running) >= self.capacity:
                raise HostFull(
                    f"sandbox host is full ({len(self._running)}/{self.capacity} rollouts running); "
                    "retry later or on another host"
                )
            handle = RolloutHandle(rollout_id=rollout_id, fingerprint=fingerprint, subscribers=1)
            self._running[rollout_id] = handle
            return handle, True

    def leave(self, handle: RolloutHandle) -> int:
        """A subscriber went away; returns how many remain."""
        with self._lock:
            handle.subscribers -= 1
            return handle.subscribers

    def complete(self, handle: RolloutHandle) -> None:
        """Move a finished rollout from running to retained (frees its slot)."""
        with self._lock:
            self._running.pop(handle.rollout_id, None)
            self._idle.notify_all()
            if handle.result is None:
                return  # failed outside the result path: nothing worth replaying
            info = handle.result.infra_error
            if info is not None and info.is_retryable:
                return  # a retry of this id must run it again, not replay the failure
            self._finished[handle.rollout_id] = handle
            self._finished_bytes += handle.size_bytes
            while self._finished and (
                len(self._finished) > self.max_retained or self._finished_bytes > self.max_retained_bytes
            ):
                _, old = self._finished.popitem(last=False)
                self._finished_bytes -= old.size_bytes

    def wait_idle(self, timeout_s: float) -> bool:
        """Block until no rollout is running (or ``timeout_s`` passed); returns whether idle."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._running, timeout=max(0.0, timeout_s))

    def get(self, rollout_id: str) -> RolloutHandle | None:
        with self._lock:
            return self._running.get(rollout_id) or self._finished.get(rollout_id)

    def running(self) -> list[RolloutHandle]:
        with self._lock:
            return list(self._running.values())

    @property
    def running_count(self) -> int:
        with self._lock:
            return len(self._running)
