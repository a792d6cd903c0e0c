"""Sessions: hardened containers a client drives command by command (the general sandbox API).

A session is one container from the same warm pool and with the same defaults as a rollout's
(no network, read-only root, non-root user, no capabilities, limits). It belongs to the tenant
(token) that created it: every lookup is by ``(tenant, id)``, so another token's session is
indistinguishable from a missing one. It ends when destroyed, when no call touched it for its
idle TTL (a command in flight counts as a touch for as long as it runs), at its maximum
lifetime, or when the host drains (after the grace period). Caps are checked before a container
is taken: host-wide and per tenant, refused with :class:`~skillopt.errors.SessionLimit` and a
retry hint, never by degrading a running session. What a session may ask for (image, limits,
TTLs, labels, files, each command's bounds) is :class:`~sandbox.service.session_policy.SessionPolicy`.
"""

from __future__ import annotations

import builtins
import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import structlog

from sandbox.runtime.base import SandboxHandle, SandboxRuntime, SessionSandbox
from sandbox.runtime.pool import PoolManager
from sandbox.runtime.spec import ContainerSpec
from sandbox.service.config import SessionConfig
from sandbox.service.isolation import check_isolation
from sandbox.service.session_policy import SessionPolicy, SessionRequest
from sandbox.service.tenants import Tenant
from skillopt.agents.sandbox import ExecOutcome
from skillopt.errors import Draining, SessionLimit, UnknownSession
from skillopt.types import Limits

__all__ = ["Session", "SessionManager"]

log = structlog.get_logger("skillopt.sandbox.sessions")


@dataclass(eq=False)
class Session:
    """One live session (the manager's record; the container is ``box``)."""

    id: str
    tenant: Tenant
    box: SessionSandbox
    spec: ContainerSpec
    network: str
    labels: dict[str, str]
    limits: Limits
    idle_ttl_s: float
    created_ns: int
    created_at: float  # monotonic
    max_expires_at: float  # monotonic
    last_used: float  # monotonic
    busy: int = 0

    def idle_expires_at(self) -> float:
        return self.last_used + self.idle_ttl_s

    def expires_in(self, now: float) -> float:
        """Seconds until this session ends if nothing touches it."""
        idle = float("inf") if self.busy else self.idle_expires_at() - now
        return max(0.0, min(idle, self.max_expires_at - now))

    def wall_ns(self, monotonic_at: float) -> int:
        return self.created_ns + int((monotonic_at - self.created_at) * 1e9)


class SessionManager:
    """Creates, finds, expires and destroys the sessions of one host. Thread-safe.

    Args:
        config: the host's session policy.
        host_id: this host's id (reported in every session).
        pools: the host's warm pools (``acquire``/``release``).
        runtime: the container runtime (leases, kills).
        base_spec, gateway_spec, default_limits, max_limits, max_lifetime_cap_s: what sessions
            may ask for (:class:`~sandbox.service.session_policy.SessionPolicy`).
    """

    def __init__(
        self,
        config: SessionConfig,
        *,
        host_id: str,
        pools: PoolManager,
        runtime: SandboxRuntime,
        base_spec: ContainerSpec,
        gateway_spec: ContainerSpec | None,
        default_limits: Limits,
        max_limits: Limits,
        max_lifetime_cap_s: float,
    ) -> None:
        self.config = config
        self.host_id = host_id
        self.pools = pools
        self.runtime = runtime
        self.policy = SessionPolicy(
            config,
            host_id=host_id,
            base_spec=base_spec,
            gateway_spec=gateway_spec,
            default_limits=default_limits,
            max_limits=max_limits,
            max_lifetime_cap_s=max_lifetime_cap_s,
        )
        self._sessions: dict[str, Session] = {}
        #: Sessions created since the host started (for Describe-style counters and tests).
        self.created_total = 0
        #: Sessions ended by their idle TTL or lifetime, and creations refused for room.
        self.reaped_total = 0
        self.refused_total = 0
        self._reserved: dict[str, int] = {}  # tenant id -> creations in flight
        self._buffered = 0  # bytes of file and stdin transfers held in memory now
        self._cond = threading.Condition()
        self.draining = False
        self._closed = False
        self._reaper = threading.Thread(target=self._reap_loop, name="session-reaper", daemon=True)
        self._reaper.start()

    # -- queries -----------------------------------------------------------------------------

    def count(self) -> int:
        with self._cond:
            return len(self._sessions)

    def tenant_counts(self) -> dict[str, int]:
        """Live sessions by tenant id (a hash of its token)."""
        with self._cond:
            counts: dict[str, int] = {}
            for s in self._sessions.values():
                counts[s.tenant.id] = counts.get(s.tenant.id, 0) + 1
            return counts

    def wait_count(self, at_most: int, *, timeout_s: float) -> bool:
        """Block until at most ``at_most`` sessions are live (``False``: not within ``timeout_s``)."""
        with self._cond:
            return self._cond.wait_for(lambda: len(self._sessions) <= at_most, timeout_s)

    def list(self, tenant: Tenant) -> list[Session]:
        with self._cond:
            return sorted(
                (s for s in self._sessions.values() if s.tenant == tenant), key=lambda s: s.created_ns
            )

    def get(self, tenant: Tenant, session_id: str) -> Session:
        """The tenant's session ``session_id``.

        Raises:
            UnknownSession: none of this tenant's (another tenant's looks the same).
        """
        with self._cond:
            session = self._sessions.get(session_id)
            if session is None or session.tenant != tenant:
                raise UnknownSession(
                    f"no session {session_id[:64]!r} of this token on host {self.host_id} "
                    "(destroyed, expired, or never created here)"
                )
            session.last_used = time.monotonic()
            return session

    # -- lifecycle ---------------------------------------------------------------------------

    def create(self, tenant: Tenant, request: SessionRequest) -> Session:
        """A new session for ``tenant``, seeded with the request's skill and files.

        Raises:
            InvalidRequest: an image off the allow-list, an unknown network, bad limits, labels
                or file names, files beyond the host's limit.
            SessionLimit: no room (host-wide or under the tenant's cap); ``retry_after_s`` says
                when the soonest session ends.
            Draining: the host is shutting down.
            ImageMissing, ContainerStartFailed, RolloutTimeout: no container could be had.
            IsolationUnavailable: the container would not give the required ``isolation``.
        """
        granted = self.policy.admit(request)
        if request.isolation:
            check_isolation(
                request.isolation,
                runtime=self.runtime.runtime_name(granted.spec),
                host_id=self.host_id,
                what=f"a session on the {granted.network!r} network",
                base_runtime=self.policy.base_spec.runtime,
                available=self.runtime.available_runtimes(),
            )
        self._reserve(tenant)
        session_id = "s-" + uuid.uuid4().hex
        handle: SandboxHandle | None = None
        try:
            handle = self.pools.acquire(
                granted.spec, timeout_s=self.config.acquire_timeout_s, tenant=tenant.id
            )
            box = self.runtime.lease(
                handle, f"session/{session_id}", output_limit_bytes=int(granted.limits.output_bytes or 0)
            )
            if request.skill is not None:
                box.write_skill(request.skill)
            for name, data in granted.files:
                box.write_path(name, data)
            now = time.monotonic()
            session = Session(
                id=session_id,
                tenant=tenant,
                box=box,
                spec=granted.spec,
                network=granted.network,
                labels=granted.labels,
                limits=granted.limits,
                idle_ttl_s=granted.idle_ttl_s,
                created_ns=time.time_ns(),
                created_at=now,
                max_expires_at=now + granted.lifetime_s,
                last_used=now,
            )
        except BaseException:
            if handle is not None:
                self.runtime.kill(handle)
                self.pools.release(handle)
            with self._cond:
                self._unreserve(tenant)
            raise
        with self._cond:
            self._unreserve(tenant)
            self._sessions[session_id] = session
            self.created_total += 1
            self._cond.notify_all()
        log.info(
            "session.created",
            session=session_id,
            tenant=tenant.id,
            container=box.handle.name,
            image=granted.spec.image,
        )
        return session

    def destroy(self, tenant: Tenant, session_id: str) -> bool:
        """Destroy the tenant's session now; ``False`` when it does not exist (any more)."""
        with self._cond:
            session = self._sessions.get(session_id)
            if session is None or session.tenant != tenant:
                return False
            del self._sessions[session_id]
            self._cond.notify_all()
        self._remove(session, "destroyed")
        return True

    def extend(self, tenant: Tenant, session_id: str, idle_ttl_s: float) -> Session:
        """Touch a session and optionally give it a new idle TTL (never past its lifetime)."""
        session = self.get(tenant, session_id)
        with self._cond:
            if idle_ttl_s:
                session.idle_ttl_s = self.policy.idle_ttl(idle_ttl_s)
            session.last_used = time.monotonic()
        return session

    @contextlib.contextmanager
    def using(self, tenant: Tenant, session_id: str) -> Iterator[Session]:
        """The tenant's session, held busy (never idle-expired) while the block runs."""
        session = self.hold(tenant, session_id)
        try:
            yield session
        finally:
            self.release(session)

    def hold(self, tenant: Tenant, session_id: str) -> Session:
        """The tenant's session, marked busy until :meth:`release` (for work that outlives the
        calling thread: a command runs on, and releases, in its own thread)."""
        session = self.get(tenant, session_id)
        with self._cond:
            session.busy += 1
        return session

    def release(self, session: Session) -> None:
        with self._cond:
            session.busy -= 1
            session.last_used = time.monotonic()
            self._cond.notify_all()

    # -- operations --------------------------------------------------------------------------

    def exec(
        self,
        session: Session,
        argv: builtins.list[str],
        *,
        on_output: Callable[[int, bytes], None],
        cwd: str = "",
        env: Mapping[str, str] | None = None,
        timeout_s: float = 0.0,
        stdin: bytes = b"",
        output_limit_bytes: int = 0,
        user: str = "",
        cancelled: threading.Event | None = None,
        python: str = "",
    ) -> ExecOutcome:
        """Run one command in ``session`` (see :meth:`SessionSandbox.exec_streaming`, also for
        ``cancelled`` and ``python``); its outcome (the output went to ``on_output``).

        Raises:
            UserUnsupported: ``user`` names someone other than the session's user.
            InvalidRequest: empty argv, bad timeout or output cap, stdin beyond the host limit.
        """
        self.policy.check_command(user=user, stdin_bytes=len(stdin))
        timeout = self.policy.exec_timeout(timeout_s)
        cap = self.policy.output_cap(output_limit_bytes)
        remaining = session.max_expires_at - time.monotonic()
        return session.box.exec_streaming(
            argv,
            timeout_s=max(0.5, min(timeout, remaining)),
            on_output=on_output,
            cwd=cwd,
            env=env,
            stdin=stdin,
            output_limit_bytes=cap,
            cancelled=cancelled,
            python=python,
        )

    @contextlib.contextmanager
    def buffering(self, size: int) -> Iterator[None]:
        """Room for ``size`` bytes of a transfer in host memory while the block runs."""
        reserved = self.reserve_buffer(size)
        try:
            yield
        finally:
            self.release_buffer(reserved)

    def reserve_buffer(self, size: int) -> int:
        """Take ``size`` bytes of the host's transfer budget (waiting for other transfers to
        finish, at most ``config.buffer_wait_s``); returns what to give back to
        :meth:`release_buffer`.

        Raises:
            SessionLimit: no room within the wait.
        """
        size = min(max(size, 0), self.config.max_buffered_bytes)
        with self._cond:
            if not self._cond.wait_for(
                lambda: self._buffered + size <= self.config.max_buffered_bytes, self.config.buffer_wait_s
            ):
                raise SessionLimit(
                    f"host {self.host_id} is moving {self._buffered} bytes for sessions already; retry shortly",
                    retry_after_s=1.0,
                )
            self._buffered += size
        return size

    def release_buffer(self, size: int) -> None:
        with self._cond:
            self._buffered -= size
            self._cond.notify_all()

    # -- drain and close ---------------------------------------------------------------------

    def drain(self, grace_s: float) -> None:
        """Refuse new sessions, let live ones go on for up to ``grace_s``, then destroy the rest."""
        with self._cond:
            self.draining = True
            end = time.monotonic() + grace_s
            while self._sessions and time.monotonic() < end:
                self._cond.wait(end - time.monotonic())
        self.close()

    def close(self) -> None:
        """Destroy every session now and stop the reaper."""
        with self._cond:
            self._closed = True
            self.draining = True
            sessions = list(self._sessions.values())
            self._sessions.clear()
            self._cond.notify_all()
        for session in sessions:
            self._remove(session, "host closing")

    # -- internals ---------------------------------------------------------------------------

    def _reserve(self, tenant: Tenant) -> None:
        with self._cond:
            if self.draining:
                raise Draining(f"host {self.host_id} is draining: create the session on another host")
            now = time.monotonic()
            live = len(self._sessions) + sum(self._reserved.values())
            if live >= self.config.max_sessions:
                self.refused_total += 1
                raise SessionLimit(
                    f"host {self.host_id} holds its maximum of {self.config.max_sessions} sessions; "
                    "retry later or on another host",
                    retry_after_s=self._soonest_end(now, None),
                )
            mine = sum(1 for s in self._sessions.values() if s.tenant == tenant) + self._reserved.get(
                tenant.id, 0
            )
            if tenant.max_sessions and mine >= tenant.max_sessions:
                self.refused_total += 1
                raise SessionLimit(
                    f"this token's cap of {tenant.max_sessions} sessions on host {self.host_id} is reached; "
                    "destroy one of them or wait for one to expire",
                    retry_after_s=self._soonest_end(now, tenant),
                )
            self._reserved[tenant.id] = self._reserved.get(tenant.id, 0) + 1

    def _unreserve(self, tenant: Tenant) -> None:
        self._reserved[tenant.id] -= 1
        if not self._reserved[tenant.id]:
            del self._reserved[tenant.id]

    def _soonest_end(self, now: float, tenant: Tenant | None) -> float:
        ends = [s.expires_in(now) for s in self._sessions.values() if tenant is None or s.tenant == tenant]
        finite = [e for e in ends if e != float("inf")]
        return round(min(finite), 3) if finite else 1.0

    def _remove(self, session: Session, why: str) -> None:
        """End ``session``: its container back to the pool, which resets it for the tenant's
        next session or code run (every process the session left is killed then) or removes
        it. A command still running is killed first, and its container is not reused."""
        handle = session.box.handle
        if session.busy:
            self.runtime.kill(handle)
        self.pools.release(handle)
        log.info("session.ended", session=session.id, tenant=session.tenant.id, reason=why)

    def _reap_loop(self) -> None:
        while True:
            expired: list[tuple[Session, str]] = []
            with self._cond:
                if self._closed:
                    return
                now = time.monotonic()
                for session in list(self._sessions.values()):
                    if now >= session.max_expires_at:
                        expired.append((session, "maximum lifetime reached"))
                    elif not session.busy and now >= session.idle_expires_at():
                        expired.append((session, "idle TTL lapsed"))
                for session, _ in expired:
                    del self._sessions[session.id]
                self.reaped_total += len(expired)
                if expired:
                    self._cond.notify_all()
                else:
                    waits = [s.expires_in(now) for s in self._sessions.values()]
                    self._cond.wait(min([w for w in waits if w != float("inf")] + [5.0]) + 0.01)
            for session, why in expired:
                try:
                    self._remove(session, why)
                except Exception:  # the reaper must never die
                    log.exception("session.reap_failed", session=session.id)
