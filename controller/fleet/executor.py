"""A fleet of sandbox hosts as one :class:`RolloutExecutor`.

Placement is on reported capacity (``Describe`` at start, then our own in-flight count): each
rollout goes to the live host with the most free slots. Whether a failed rollout runs again is
decided in one place, from what the failure did to the work (``policy.py``): never started →
placed again at no cost, started and lost → another attempt with the same ``rollout_id``
(preferably elsewhere), final → its row stands. What a failure says about its *host* is noted
here: a host that failed a connect or a stream is marked *down* (a circuit breaker) and never
chosen again until its health ``Watch`` stream, re-opened with backoff, reports it serving; a
draining one likewise; a full one (another client filled it) is backed off, exponentially, and
waited for, never dropping the rollout.

Endpoints may be DNS names (``dns:///NAME:PORT``, e.g. a Kubernetes headless Service): every
address the name resolves to is one host, and the name is re-resolved while the fleet runs, so
hosts that appear join placement and hosts that disappear leave it (``discovery.py``).

Every request ends as exactly one row. When no host has been usable for ``down_timeout_s``
the batch stops with :class:`SandboxUnavailable` (the run can be resumed once a host is back)
rather than turning every remaining rollout into an infrastructure row. The client deadline is
the task timeout plus slack; the host itself bounds the rollout's wall time and kills its
container.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import structlog

from controller.client.sandbox_client import ChannelConfig, HealthWatch, SandboxClient
from controller.fleet import discovery
from controller.fleet.hosts import FleetEvent, HostHealth, HostState
from controller.fleet.policy import Decision, RetryPolicy, Tries, error_row
from controller.fleet.script_checks import check_scripts_on_hosts
from skillopt.errors import (
    Cancelled,
    Draining,
    HostFull,
    InvalidRequest,
    RolloutTimeout,
    SandboxUnavailable,
    SkillOptError,
    SkillPackageUnsupported,
)
from skillopt.observability import tracing
from skillopt.skill.checks import DEFAULT_SELF_TEST_TIMEOUT_S, ScriptCheck
from skillopt.types import HostDescription, RolloutRequest, RolloutResult, SkillVersion

__all__ = ["FleetExecutor"]

log = structlog.get_logger("skillopt.controller.fleet")

_FULL_BACKOFF_MIN_S = 0.25
_FULL_BACKOFF_MAX_S = 5.0
_WATCH_BACKOFF_MAX_S = 15.0


class FleetExecutor:
    """Runs rollouts over one or more sandbox hosts.

    Args:
        channels: one per host.
        workers: rollouts in flight at once (bounded further by the hosts' capacity).
        rpc_slack_s: client deadline = the request's wall time + this slack.
        max_attempts: attempts per rollout that started and failed for infrastructure reasons.
        down_timeout_s: stop the batch when no host has been usable this long.
        describe_timeout_s: deadline of the start-up ``Describe`` per host.
        resolve_interval_s: how often ``dns:///`` endpoints are resolved again.
        on_event: called with a :class:`FleetEvent` on host state changes and retries
            (``host_added`` / ``host_removed`` for hosts found or lost by DNS).

    Raises:
        InvalidRequest: no endpoints.
        SkillOptError: a host refused us (bad token, TLS), or no host is reachable.
    """

    def __init__(
        self,
        channels: Sequence[ChannelConfig],
        *,
        workers: int,
        rpc_slack_s: float = 60.0,
        max_attempts: int = 3,
        down_timeout_s: float = 300.0,
        describe_timeout_s: float = 10.0,
        resolve_interval_s: float = 30.0,
        on_event: Callable[[FleetEvent], None] | None = None,
    ) -> None:
        if not channels:
            raise InvalidRequest("no sandbox endpoints given")
        self.max_workers = max(1, workers)
        self._pin: str = ""
        self._pin_refuses = True
        #: Agent image tag → the digest the run is pinned to (see :meth:`pin`).
        self._agent_pins: dict[str, str] = {}
        self.rpc_slack_s = rpc_slack_s
        self.policy = RetryPolicy(max_attempts=max_attempts)
        self.down_timeout_s = down_timeout_s
        self.on_event = on_event
        self._cond = threading.Condition()
        self._closed = threading.Event()
        self._host_ids: set[str] = set()
        self._watches: dict[str, HealthWatch] = {}
        self._all_down_since: float | None = None
        #: Hosts named as unable to mount a skill package (each said once).
        self._skipped: set[str] = set()
        self.hosts_state: list[HostState] = []
        self._sources = list(channels)
        self._describe_timeout_s = describe_timeout_s
        #: Address → why it could not be reached at start (said if no host is).
        self._unreachable: dict[str, str] = {}
        try:
            for source in self._sources:
                for ch in discovery.expand(source):
                    if not any(h.address == ch.address for h in self.hosts_state):
                        self.hosts_state.append(self._connect(ch, describe_timeout_s))
        except BaseException:
            self.close()
            raise
        if not any(h.health is not HostHealth.DOWN for h in self.hosts_state):
            names = ", ".join(c.address for c in self._sources)
            why = "; ".join(self._unreachable.values()) or "no address behind the names"
            self.close()
            raise SandboxUnavailable(
                f"no sandbox host is reachable ({names}): {why}. Start them (skillopt serve) or check "
                "--endpoints, --token-file and --tls-* (or their sandbox.* keys)"
            )
        for host in self.hosts_state:
            self._start_watch(host)
        if any(discovery.is_dns(c.address) for c in self._sources):
            threading.Thread(
                target=self._resolve_loop, args=(resolve_interval_s,), daemon=True, name="fleet-resolve"
            ).start()

    # -- hosts -------------------------------------------------------------------------------

    def _connect(self, ch: ChannelConfig, timeout_s: float) -> HostState:
        client = SandboxClient(ch)
        try:
            info = client.describe(timeout_s=timeout_s)
        except (SandboxUnavailable, RolloutTimeout) as exc:
            # Reachable later, perhaps: start it down and let its health watch bring it up.
            log.warning("fleet.host_unreachable", address=ch.address, error=exc.message)
            self._unreachable[ch.address] = exc.message
            return HostState(client=client, address=ch.address, capacity=1, health=HostHealth.DOWN)
        except SkillOptError as exc:
            client.close()
            raise type(exc)(f"sandbox host {ch.address} is not usable: {exc.message}") from exc
        host = HostState(
            client=client,
            address=ch.address,
            capacity=1,
            health=HostHealth.DRAINING if info.draining else HostHealth.UP,
        )
        self._apply_info(host, info)
        log.info(
            "fleet.host",
            address=ch.address,
            host=info.host,
            capacity=info.capacity,
            digests=dict(info.image_digests),
        )
        return host

    @property
    def workers(self) -> int:
        """Rollouts in flight at once: the requested workers, bounded by the hosts' capacity."""
        with self._cond:
            return max(1, min(self.max_workers, sum(h.capacity for h in self.hosts_state)))

    def hosts(self) -> list[str]:
        return sorted(self._host_ids) or [h.address for h in self.hosts_state]

    def providers(self) -> dict[str, tuple[str, ...]]:
        """Provider profiles each reachable host reported (address → names)."""
        return {h.address: h.providers for h in self.hosts_state if h.host_id}

    # -- pinned environment ------------------------------------------------------------------

    def pin(
        self, digest: str, *, refuse: bool = True, agent_images: Mapping[str, str] | None = None
    ) -> list[str]:
        """Pin the fleet to one runtime image digest (and ``agent_images``: the run's agent
        image tag → digest, e.g. TextWorld's game image): a host that runs another is never
        chosen (``refuse``) or only reported (``refuse=False``), now and when it joins later.

        Returns:
            One line per host whose digest differs.
        """
        with self._cond:
            self._pin, self._pin_refuses = digest, refuse
            self._agent_pins = {k: v for k, v in (agent_images or {}).items() if v}
            hosts = list(self.hosts_state)
        for host in hosts:
            self._apply_pin(host)
        return [h.excluded or self._mismatch(h) for h in hosts if self._mismatch(h)]

    def _mismatch(self, host: HostState) -> str:
        return host.mismatch(self._pin, self._agent_pins)

    def _apply_pin(self, host: HostState) -> None:
        reason = self._mismatch(host)
        with self._cond:
            host.excluded = reason if self._pin_refuses else ""
            self._cond.notify_all()
        if reason:
            log.warning(
                "fleet.image_mismatch", address=host.address, reason=reason, refused=self._pin_refuses
            )

    def image_digests(self) -> dict[str, dict[str, str]]:
        """Runtime image digests per host that answered ``Describe`` (address → tag → digest)."""
        with self._cond:
            return {h.address: dict(h.image_digests) for h in self.hosts_state if h.host_id}

    def agent_image_digests(self) -> dict[str, dict[str, str]]:
        """Agent image digests per host that answered ``Describe`` (address → tag → digest)."""
        with self._cond:
            return {h.address: dict(h.agent_image_digests) for h in self.hosts_state if h.host_id}

    def agent_runtimes(self) -> dict[str, dict[str, str]]:
        """The OCI runtime of each agent per host that answered ``Describe`` (address →
        ``env/agent`` → runtime)."""
        with self._cond:
            return {h.address: dict(h.agent_runtimes) for h in self.hosts_state if h.host_id}

    def _emit(self, kind: str, host: HostState, detail: str = "", rollout_id: str = "") -> None:
        if self.on_event is not None:
            try:
                self.on_event(
                    FleetEvent(kind=kind, address=host.address, detail=detail, rollout_id=rollout_id)
                )
            except Exception:  # an observer must never break placement
                log.exception("fleet.on_event_failed")

    def _set_health(self, host: HostState, health: HostHealth, reason: str = "") -> None:
        with self._cond:
            if host.health is health:
                return
            host.health = health
            host.history.append((time.monotonic(), health))
            self._cond.notify_all()
        log.warning("fleet.host_" + health.value, address=host.address, reason=reason[:300])
        self._emit("host_up" if health is HostHealth.UP else "host_down", host, reason[:300])

    def _start_watch(self, host: HostState) -> None:
        threading.Thread(
            target=self._watch, args=(host,), daemon=True, name=f"fleet-watch-{host.address}"
        ).start()

    def _resolve_loop(self, interval_s: float) -> None:
        """Re-resolve the ``dns:///`` endpoints: new addresses join, vanished ones leave."""
        while not self._closed.wait(interval_s):
            try:
                self.resolve()
            except Exception:  # discovery must never take the fleet down
                log.exception("fleet.resolve_failed")

    def resolve(self) -> None:
        """Resolve the ``dns:///`` endpoints once now (also done every ``resolve_interval_s``)."""
        for source in self._sources:
            if not discovery.is_dns(source.address):
                continue
            found = {ch.address: ch for ch in discovery.expand(source)}
            with self._cond:
                known = {h.address: h for h in self.hosts_state if not h.gone}
            for address, ch in found.items():
                if address in known:
                    continue
                host = self._connect(ch, self._describe_timeout_s)
                with self._cond:
                    self.hosts_state.append(host)
                    self._cond.notify_all()
                self._start_watch(host)
                log.info("fleet.host_added", address=address, source=source.address)
                self._emit("host_added", host, source.address)
            for address, host in known.items():
                if address in found or not self._from(source, host):
                    continue
                with self._cond:
                    host.gone = True
                    call = self._watches.pop(address, None)
                    # Out of placement at once; forgotten once nothing runs there any more.
                    if host.in_flight == 0:
                        self.hosts_state.remove(host)
                        host.client.close()
                self._set_health(host, HostHealth.DOWN, "no longer resolves")
                if call is not None:
                    call.cancel()
                self._emit("host_removed", host, source.address)

    @staticmethod
    def _from(source: ChannelConfig, host: HostState) -> bool:
        """Whether ``host`` was found through ``source`` (its name is the TLS/server name)."""
        name, _ = discovery.parse_dns(source.address)
        return host.client.config.tls_server_name == (source.tls_server_name or name)

    def _mark_down(self, host: HostState, health: HostHealth, reason: str) -> None:
        """The run path saw the host fail: take it out of placement and re-open its health watch
        (a Watch only reports changes, so a fresh stream is what tells whether it serves)."""
        self._set_health(host, health, reason)
        with self._cond:
            call = self._watches.pop(host.address, None)
        if call is not None:
            call.cancel()

    def _watch(self, host: HostState) -> None:
        """Follow the host's health ``Watch`` stream; re-open it with backoff while it fails."""
        backoff = 0.5
        while not self._closed.is_set() and not host.gone:
            try:
                call = host.client.watch_health()
                with self._cond:
                    if self._closed.is_set():
                        call.cancel()
                        return
                    self._watches[host.address] = call
                for serving in call:
                    if serving:
                        if host.health is not HostHealth.UP:
                            self._refresh(host)
                        backoff = 0.5
                    else:
                        self._set_health(host, HostHealth.DRAINING, "health: not serving")
            except SkillOptError as exc:
                if self._closed.is_set():
                    return
                if host.health is HostHealth.UP:
                    self._set_health(host, HostHealth.DOWN, f"health watch ended: {exc.message}")
            if self._closed.wait(backoff):
                return
            backoff = min(_WATCH_BACKOFF_MAX_S, backoff * 2)

    def _refresh(self, host: HostState) -> None:
        """A host serves (again): re-read its capacity, then take it back into placement."""
        try:
            info = host.client.describe(timeout_s=10.0)
        except SkillOptError as exc:
            log.warning("fleet.describe_failed", address=host.address, error=exc.message)
            return
        self._apply_info(host, info)
        self._set_health(host, HostHealth.DRAINING if info.draining else HostHealth.UP, "health: serving")

    def _apply_info(self, host: HostState, info: HostDescription) -> None:
        """Take what a ``Describe`` said into the host's state (then check the image pin)."""
        with self._cond:
            host.apply(info)
        self._apply_pin(host)

    def take(self, avoid: set[str], *, usable: Callable[[HostState], bool], until: float) -> HostState | None:
        """Take a slot on the live host with the most free slots among those ``usable`` says
        may serve (``avoid``: hosts tried already, taken only when no other is free), waiting
        for one until ``until`` (``time.monotonic()``); None then. The caller gives it back with
        :meth:`give_back` (the fleet's HTTP front places requests this way).

        Raises:
            SandboxUnavailable: no host has been usable for ``down_timeout_s``.
        """
        return self._pick(avoid, threading.Event(), usable=usable, until=until)

    def give_back(self, host: HostState, *, full: bool = False, ok: bool = False) -> None:
        """Return a slot of :meth:`take` (``full``: the host said it is full, back off from it;
        ``ok``: it served)."""
        self._release(host, full=full, ok=ok)

    def mark_down(self, host: HostState, reason: str, *, draining: bool = False) -> None:
        """The host failed (or said it drains): out of placement until its health watch sees
        it serve again."""
        self._mark_down(host, HostHealth.DRAINING if draining else HostHealth.DOWN, reason)

    def _pick(
        self,
        avoid: set[str],
        stop: threading.Event,
        skill: SkillVersion | None = None,
        *,
        usable: Callable[[HostState], bool] | None = None,
        until: float = math.inf,
    ) -> HostState | None:
        """Take a slot on the best usable host, waiting for one; None when ``stop`` is set (or
        ``until``, a ``time.monotonic()``, has passed). With ``skill`` (a package), a host that
        cannot mount it is not usable for it (the batch named such hosts before it began,
        :meth:`_skip_hosts_without_packages`); likewise a host ``usable`` says no to.

        Raises:
            SandboxUnavailable: no host has been usable for ``down_timeout_s``.
        """
        with self._cond:
            while not stop.is_set() and not self._closed.is_set():
                now = time.monotonic()
                if now >= until:
                    return None
                up = [
                    h
                    for h in self.hosts_state
                    if h.health is HostHealth.UP
                    and not h.gone
                    and not h.excluded
                    and (skill is None or not h.package_refusal(skill))
                    and (usable is None or usable(h))
                ]
                free = [h for h in up if h.in_flight < h.capacity and h.full_until <= now]
                preferred = [h for h in free if h.address not in avoid] or free
                if preferred:
                    self._all_down_since = None
                    # Ties go to the host placed on longest ago: one-at-a-time work spreads.
                    host = max(
                        preferred, key=lambda h: (h.capacity - h.in_flight, -h.failures, -h.last_placement)
                    )
                    host.in_flight += 1
                    host.placements += 1
                    host.last_placement = now
                    return host
                if up:
                    self._all_down_since = None
                else:
                    self._all_down_since = self._all_down_since or now
                    if now - self._all_down_since > self.down_timeout_s:
                        raise SandboxUnavailable(
                            f"no sandbox host has been reachable for {self.down_timeout_s:.0f} s "
                            f"({', '.join(h.address for h in self.hosts_state)}); continue with --resume "
                            "once a host is back"
                        )
                waits = [h.full_until - now for h in up if h.full_until > now]
                # Woken when a slot frees or a host comes back; bounded to notice `stop`, a full
                # host's backoff ending, and the down timeout.
                self._cond.wait(min([1.0, *waits, until - now]))
        return None

    def _release(self, host: HostState, *, full: bool = False, ok: bool = False) -> None:
        with self._cond:
            host.in_flight -= 1
            if host.gone and host.in_flight == 0 and host in self.hosts_state:
                self.hosts_state.remove(host)
                host.client.close()
            if full:
                host.full_backoff_s = min(
                    _FULL_BACKOFF_MAX_S, max(_FULL_BACKOFF_MIN_S, host.full_backoff_s * 2)
                )
                host.full_until = time.monotonic() + host.full_backoff_s
            elif ok:
                host.full_backoff_s = 0.0
                host.failures = 0
            self._cond.notify_all()

    # -- running -----------------------------------------------------------------------------

    def run(
        self,
        requests: Sequence[RolloutRequest],
        *,
        on_result: Callable[[RolloutResult], None],
        stop: threading.Event,
    ) -> None:
        if not requests:
            return
        self._skip_hosts_without_packages(requests)
        parent = tracing.current()  # each rollout's span nests under the caller's (None: off)
        with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="fleet") as pool:
            futures = [pool.submit(self._one, req, on_result, stop, parent) for req in requests]
            try:
                for f in futures:
                    f.result()
            except BaseException:
                stop.set()  # e.g. every host down: let the other rollouts return too
                raise

    def _skip_hosts_without_packages(self, requests: Sequence[RolloutRequest]) -> None:
        """Before any rollout: name each host that cannot mount the batch's skill packages (it
        predates packages, or a package exceeds its limits), which placement then skips for
        them; refuse the batch when no host can.

        Raises:
            SkillPackageUnsupported: a package no host that answered can mount.
        """
        skills = list(dict.fromkeys(r.skill for r in requests if r.skill.files))  # each version once
        if not skills:
            return
        with self._cond:
            hosts = [h for h in self.hosts_state if h.host_id and not h.gone]
        for skill in skills:
            refusals = {h.address: h.package_refusal(skill) for h in hosts}
            for host in hosts:
                reason = refusals[host.address]
                if reason and host.address not in self._skipped:
                    self._skipped.add(host.address)
                    log.warning("fleet.host_skipped", address=host.address, skill=skill.name, reason=reason)
                    self._emit("host_skipped", host, reason)
            if hosts and all(refusals.values()):
                raise SkillPackageUnsupported(
                    f"no sandbox host can mount skill package {skill.name!r}: " + "; ".join(refusals.values())
                )

    def _one(
        self,
        req: RolloutRequest,
        on_result: Callable[[RolloutResult], None],
        stop: threading.Event,
        parent: Any = None,
    ) -> None:
        # The rollout over all its attempts: each attempt's RPC is a client span under it.
        with tracing.span("rollout", tracing.rollout_attributes(req), parent=parent) as span:
            row = self._attempts(req, stop)
            if row is not None:
                span.set_attributes(tracing.result_attributes(row))
        if row is not None and not stop.is_set():
            on_result(row)

    def _attempts(self, req: RolloutRequest, stop: threading.Event) -> RolloutResult | None:
        """Run ``req`` until a row stands (:class:`RetryPolicy` decides); None when ``stop``."""
        tries = Tries(self.policy)
        while not stop.is_set():
            host = self._pick(tries.tried, stop, req.skill if req.skill.files else None)
            if host is None:
                return None
            t0 = time.monotonic()
            row = self._call(host, req, stop)
            if stop.is_set():
                return None
            if row.infra_error is None:
                return row
            decision = tries.after(row, host.address)
            if decision is Decision.GIVE_UP:
                return tries.standing(req, row, ",".join(h.address for h in self.hosts_state))
            if decision is Decision.RETRY:
                with self._cond:
                    host.failures += 1
                log.info("fleet.retry", rollout_id=req.rollout_id, host=host.address, attempt=tries.attempts,
                         kind=row.infra_error.kind.value, seconds=round(time.monotonic() - t0, 2))  # fmt: skip
                self._emit("retry", host, row.fail_reason, req.rollout_id)
        return None

    def _call(self, host: HostState, req: RolloutRequest, stop: threading.Event) -> RolloutResult:
        """One run of ``req`` on ``host`` (whose slot it gives back): the host's row, or the row
        its failure stands for. What the failure says about the host is noted here."""
        wall = req.limits.wall_time_s or 600.0
        try:
            row = host.client.run(req, timeout_s=wall + self.rpc_slack_s, cancel=stop)
        except SkillOptError as exc:
            self._release(host, full=isinstance(exc, HostFull))
            if isinstance(exc, HostFull):  # someone else filled it (another controller): back off
                self._emit("host_full", host, exc.message, req.rollout_id)
            elif isinstance(exc, Draining) or (isinstance(exc, Cancelled) and exc.retryable):
                self._mark_down(host, HostHealth.DRAINING, exc.message)  # (cancelled by its drain)
            elif isinstance(exc, SandboxUnavailable):
                self._mark_down(host, HostHealth.DOWN, exc.message)
            return error_row(req, exc, host.address, wall_s=wall)
        self._release(host, ok=True)
        if row.host:
            with self._cond:
                self._host_ids.add(row.host)
        return row

    # -- script checks -----------------------------------------------------------------------

    def check_scripts(
        self,
        spec: SkillVersion,
        paths: Sequence[str],
        *,
        self_test_timeout_s: float = DEFAULT_SELF_TEST_TIMEOUT_S,
    ) -> list[ScriptCheck]:
        """Check the scripts of ``spec`` that ``paths`` name (created or changed files under
        ``scripts/``; others and deleted ones get no verdict) in one sandbox session on the
        live host with the most free session slots (:mod:`controller.fleet.script_checks`).

        Returns:
            One :class:`ScriptCheck` per script, in input order. No exception for a host that
            cannot help: with no session anywhere each script is ``unchecked`` (failed).
        """
        with self._cond:
            hosts = [h for h in self.hosts_state if not h.gone]
        return check_scripts_on_hosts(hosts, spec, paths, self_test_timeout_s=self_test_timeout_s)

    def close(self) -> None:
        """Stop the health watches and close every channel."""
        self._closed.set()
        with self._cond:
            watches = list(self._watches.values())
            self._cond.notify_all()
        for call in watches:
            call.cancel()
        for host in self.hosts_state:
            host.client.close()

    def __enter__(self) -> FleetExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
