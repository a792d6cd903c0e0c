"""Prometheus metrics of one sandbox host (``skillopt serve --metrics-listen HOST:PORT``).

Components hold a :class:`Metrics` recorder and call it at the few points where an event
happens (a rollout ends, a model call through the gateway ends, a provider fails, a request is
refused); the default, :data:`NO_METRICS`, does nothing, so a host without ``--metrics-listen``
pays one no-op call per event. State that already lives somewhere (the warm pools, sessions, the
blob cache, running rollouts, the host's health) is read when Prometheus scrapes, by a custom
collector, never updated on a hot path.

Nothing secret is exported: no prompt, completion, key or token; tenants appear by their hash
(``t-…``, :mod:`sandbox.service.tenants`). Every label takes values from a bounded set: envs and
agents of the registry (requests are validated before they count), configured providers and
images, the typed infrastructure kinds, the host's tenants. ``prometheus-client`` is an optional
extra (``skillopt[metrics]``), imported only when metrics are asked for. Each host has its own
``CollectorRegistry``, so several servers can share a process (tests, the embedded sandbox).
"""

from __future__ import annotations

import collections
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog

from sandbox.runtime.recycling import RESET_BUCKETS_S
from skillopt.errors import ConfigError
from skillopt.types import RolloutRequest, RolloutResult, Usage

if TYPE_CHECKING:
    from sandbox.runtime.pool import PoolManager
    from sandbox.service.admission import RolloutAdmission, RolloutHandle
    from sandbox.service.blobs import BlobStore
    from sandbox.service.sessions import SessionManager

__all__ = [
    "NO_METRICS",
    "HostState",
    "Metrics",
    "MetricsServer",
    "PrometheusMetrics",
    "require_client",
    "start_metrics_server",
]

log = structlog.get_logger("skillopt.sandbox.metrics")

#: Seconds, from a warm container's acquisition (milliseconds) to a long agent rollout (minutes).
BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
#: A whole rollout: coarser, since it is labelled by env and agent (the exposition's largest
#: part, and what a scrape costs grows with it).
ROLLOUT_BUCKETS_S = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)

#: Refusals at the door, by the typed error's class (anything else is "other").
_REFUSALS = {
    "HostFull": "host_full",
    "Draining": "draining",
    "InvalidRequest": "invalid_request",
    "BlobsMissing": "blobs_missing",
    "SkillPackageInvalid": "skill_package_invalid",
    "ImageMissing": "image_missing",
    "DeadlineExceeded": "deadline_exceeded",
    "Unauthenticated": "unauthenticated",
}


class Metrics:
    """The recorder components call; this base records nothing (metrics off)."""

    def rollout_finished(
        self,
        handle: RolloutHandle,
        request: RolloutRequest,
        result: RolloutResult | None,
        *,
        wait_s: float,
        error: BaseException | None = None,
    ) -> None:
        """A rollout ended: ``result`` (or ``error`` when it ended without a row); ``wait_s``
        it spent admitted before a worker took it."""

    def rollout_refused(self, error: BaseException) -> None:
        """A ``Run`` was refused before it was admitted."""

    def model_call(self, provider: str, seconds: float, usage: Usage, *, status: int, replayed: bool) -> None:
        """One model call through the gateway ended (answered, replayed or refused)."""

    def gateway_error(self, provider: str, kind: str) -> None:
        """A provider failed a call after the gateway's retries (``kind``: the typed kind)."""


#: What every component holds until a host turns metrics on.
NO_METRICS = Metrics()


@dataclass
class HostState:
    """Where the collector reads the host's live state at scrape time."""

    host_id: str
    version: str
    admission: RolloutAdmission
    pools: PoolManager
    blobs: BlobStore
    sessions: SessionManager | None = None
    #: 1 while the host can take rollouts (its health), 0 while not.
    serving: Callable[[], bool] = lambda: True
    #: Engine errors the host's checks met, by kind (read, not reset).
    engine_errors: Callable[[], dict[str, int]] = dict


def _outcome(result: RolloutResult | None, error: BaseException | None) -> str:
    """``scored`` or the typed infrastructure kind (a bounded set)."""
    if result is not None:
        return "scored" if result.infra_error is None else str(result.infra_error.kind)
    kind = getattr(error, "kind", None)
    return str(kind) if kind is not None else "internal"


def _first_exec_s(handle: RolloutHandle) -> float | None:
    """Accepted → first execution sent, from the progress events the rollout already emits."""
    accepted = None
    for time_ns, event in handle.events:
        if event.phase == "accepted":
            accepted = time_ns
        elif event.phase == "exec" and accepted is not None:
            return (time_ns - accepted) / 1e9
    return None


def require_client() -> Any:
    """The ``prometheus_client`` module.

    Raises:
        ConfigError: it is not installed (saying how to install it).
    """
    try:
        import prometheus_client
    except ImportError as exc:
        raise ConfigError(
            "--metrics-listen needs prometheus-client: pip install 'skillopt[metrics]'"
        ) from exc
    return prometheus_client


class PrometheusMetrics(Metrics):
    """The recorder of a host with ``--metrics-listen``: its own registry, the event metrics,
    and a collector of the live state.

    Raises:
        ConfigError: ``prometheus-client`` is not installed.
    """

    def __init__(self, state: HostState | None = None) -> None:
        prom = require_client()
        # No ``*_created`` series beside every counter and histogram: a timestamp per series
        # that no query here needs (one more series each, and scrape time).
        prom.disable_created_metrics()
        self.registry = prom.CollectorRegistry(auto_describe=True)

        def hist(name: str, doc: str, labels: tuple[str, ...] = (), buckets: tuple = BUCKETS_S) -> Any:
            return prom.Histogram(name, doc, labels, registry=self.registry, buckets=buckets)

        def counter(name: str, doc: str, labels: tuple[str, ...]) -> Any:
            return prom.Counter(name, doc, labels, registry=self.registry)

        self.rollouts = counter(
            "skillopt_rollouts", "Rollouts finished, by env, agent and outcome", ("env", "agent", "outcome")
        )
        self.refused = counter("skillopt_rollouts_refused", "Run requests refused at the door", ("reason",))
        self.duration = hist(
            "skillopt_rollout_duration_seconds",
            "Whole rollout on the host (admitted to row)",
            ("env", "agent"),
            ROLLOUT_BUCKETS_S,
        )
        self.admission_wait = hist(
            "skillopt_rollout_admission_wait_seconds", "Admitted until a worker took the rollout"
        )
        self.acquire = hist("skillopt_rollout_container_acquire_seconds", "Leasing the rollout's container")
        self.first_instruction = hist(
            "skillopt_rollout_first_instruction_seconds",
            "Rollout accepted until its first execution was sent",
        )
        self.execution = hist("skillopt_rollout_execution_seconds", "Each execution in a rollout's sandbox")
        self.grading = hist("skillopt_rollout_grading_seconds", "A rollout's grading (trusted side)")
        self.model_seconds = hist(
            "skillopt_gateway_model_call_duration_seconds", "Model calls through the gateway", ("provider",)
        )
        self.model_calls = counter(
            "skillopt_gateway_model_calls", "Model calls through the gateway", ("provider", "result")
        )
        self.tokens = counter(
            "skillopt_gateway_tokens", "Tokens of model calls (input includes cached)", ("provider", "type")
        )
        self.gateway_errors = counter(
            "skillopt_gateway_errors", "Provider failures after the gateway's retries", ("provider", "kind")
        )
        if state is not None:
            self.registry.register(_HostCollector(state, prom))

    def rollout_finished(
        self,
        handle: RolloutHandle,
        request: RolloutRequest,
        result: RolloutResult | None,
        *,
        wait_s: float,
        error: BaseException | None = None,
    ) -> None:
        self.rollouts.labels(request.env, request.agent, _outcome(result, error)).inc()
        self.admission_wait.observe(wait_s)
        if result is None:
            return
        timings = result.timings_s  # the stages the service and the agent already time
        if "total" in timings:
            self.duration.labels(request.env, request.agent).observe(timings["total"])
        if "acquire" in timings:
            self.acquire.observe(timings["acquire"])
        if timings.get("grade"):
            self.grading.observe(timings["grade"])
        for ex in result.trace.executions:
            self.execution.observe(ex.duration_s)
        first = _first_exec_s(handle)
        if first is not None:
            self.first_instruction.observe(first)

    def rollout_refused(self, error: BaseException) -> None:
        self.refused.labels(_REFUSALS.get(type(error).__name__, "other")).inc()

    def model_call(self, provider: str, seconds: float, usage: Usage, *, status: int, replayed: bool) -> None:
        result = "replayed" if replayed else ("ok" if status < 400 else "error")
        self.model_calls.labels(provider, result).inc()
        self.model_seconds.labels(provider).observe(seconds)
        for kind, n in (
            ("input", usage.prompt_tokens),
            ("output", usage.completion_tokens),
            ("cached_input", usage.cached_input_tokens),
        ):
            if n:
                self.tokens.labels(provider, kind).inc(n)

    def gateway_error(self, provider: str, kind: str) -> None:
        self.gateway_errors.labels(provider, kind).inc()


class _HostCollector:
    """Gauges and counters read from the host's live state when Prometheus scrapes."""

    def __init__(self, state: HostState, prom: Any) -> None:
        self.state = state
        self.core = prom.metrics_core

    def describe(self) -> Iterator[Any]:
        return iter(())  # unchecked: the families depend on the live state

    def collect(self) -> Iterator[Any]:
        s, core = self.state, self.core
        info = core.InfoMetricFamily("skillopt_host", "This sandbox host", labels=("host", "version"))
        info.add_metric([s.host_id, s.version], {})
        yield info
        yield core.GaugeMetricFamily(
            "skillopt_host_serving", "1 while the host takes rollouts", value=int(s.serving())
        )
        yield core.GaugeMetricFamily(
            "skillopt_host_draining", "1 while the host drains", value=int(s.admission.draining)
        )
        yield core.GaugeMetricFamily(
            "skillopt_rollouts_running", "Rollouts running now", value=s.admission.running_count
        )
        yield core.GaugeMetricFamily(
            "skillopt_rollout_capacity", "Rollouts the host runs at once", value=s.admission.capacity
        )
        yield from self._pools()
        yield from self._sessions()
        yield from self._blobs()
        engine = core.CounterMetricFamily(
            "skillopt_engine_errors", "Container engine errors the host met", labels=("kind",)
        )
        for kind, n in sorted(s.engine_errors().items()):
            engine.add_metric([kind], n)
        yield engine

    def _pools(self) -> Iterator[Any]:
        core = self.core
        containers = core.GaugeMetricFamily(
            "skillopt_pool_containers", "Containers of a pool, by state", labels=("image", "spec", "state")
        )
        target = core.GaugeMetricFamily(
            "skillopt_pool_target_containers", "Idle containers a pool keeps ready", labels=("image", "spec")
        )
        waiters = core.GaugeMetricFamily(
            "skillopt_pool_waiters", "Acquisitions waiting or announced", labels=("image", "spec")
        )
        acquired = core.CounterMetricFamily(
            "skillopt_pool_acquisitions", "Containers leased, warm or not", labels=("image", "spec", "warm")
        )
        created = core.CounterMetricFamily(
            "skillopt_pool_containers_created", "Containers created", labels=("image", "spec")
        )
        reused = core.CounterMetricFamily(
            "skillopt_pool_reuses",
            "Acquisitions served by a tenant's reset container",
            labels=("image", "spec"),
        )
        for p in self.state.pools.stats():
            key = [p.image, p.spec_key[:12]]
            for state, n in (
                ("idle", p.idle),
                ("recycled", p.recycled),
                ("leased", p.leased),
                ("starting", p.creating),
            ):
                containers.add_metric([*key, state], n)
            target.add_metric(key, p.target)
            waiters.add_metric(key, p.waiters)
            acquired.add_metric([*key, "true"], p.acquired_warm)
            acquired.add_metric([*key, "false"], p.acquired_total - p.acquired_warm)
            created.add_metric(key, p.created_total)
            reused.add_metric(key, p.reused_total)
        yield from (containers, target, waiters, acquired, created, reused)
        yield from self._recycling()

    def _recycling(self) -> Iterator[Any]:
        """Container recycling: the policy, resets (count and duration), failed resets and
        containers destroyed instead of reset, each by its reason (a bounded set)."""
        core, r = self.core, self.state.pools.recycle_stats()
        yield core.GaugeMetricFamily(
            "skillopt_container_reuse_max_executions",
            "Most executions a container serves for its tenant (0: recycling off)",
            value=r.max_executions,
        )
        bounds = [*(f"{b:g}" for b in RESET_BUCKETS_S), "+Inf"]
        yield core.HistogramMetricFamily(
            "skillopt_container_reset_seconds",
            "Resets of a used container to a verified clean slate, and their duration",
            buckets=list(zip(bounds, r.reset_buckets, strict=True)),
            sum_value=r.reset_seconds_sum,
        )
        failures = core.CounterMetricFamily(
            "skillopt_container_reset_failures",
            "Resets that failed (the container destroyed)",
            labels=("reason",),
        )
        for reason, n in sorted(r.reset_failures.items()):
            failures.add_metric([reason], n)
        skipped = core.CounterMetricFamily(
            "skillopt_containers_not_reused",
            "Used containers destroyed instead of reset, by why (what spoiled them, or the policy)",
            labels=("reason",),
        )
        for reason, n in sorted(r.not_reused.items()):
            skipped.add_metric([reason], n)
        yield from (failures, skipped)

    def _sessions(self) -> Iterator[Any]:
        core, sessions = self.core, self.state.sessions
        live = core.GaugeMetricFamily(
            "skillopt_sessions", "Live sessions, by tenant hash", labels=("tenant",)
        )
        by_tenant = collections.Counter(sessions.tenant_counts()) if sessions is not None else {}
        for tenant, n in sorted(by_tenant.items()):
            live.add_metric([tenant], n)
        yield live
        maximum = sessions.config.max_sessions if sessions is not None else 0
        yield core.GaugeMetricFamily("skillopt_sessions_max", "Most live sessions", value=maximum)
        for name, doc, attr in (
            ("created", "Sessions created", "created_total"),
            ("reaped", "Sessions ended by their idle TTL or lifetime", "reaped_total"),
            ("refused", "Session creations refused for room", "refused_total"),
        ):
            value = getattr(sessions, attr) if sessions is not None else 0
            yield core.CounterMetricFamily(f"skillopt_sessions_{name}", doc, value=value)

    def _blobs(self) -> Iterator[Any]:
        core, stats = self.core, self.state.blobs.stats()
        yield core.CounterMetricFamily(
            "skillopt_blob_cache_hits", "Files named by hash and kept", value=stats["hits"]
        )
        yield core.CounterMetricFamily(
            "skillopt_blob_cache_misses", "Files named by hash and not kept", value=stats["misses"]
        )
        yield core.CounterMetricFamily(
            "skillopt_blob_cache_evictions", "Files evicted for room", value=stats["evicted"]
        )
        yield core.GaugeMetricFamily("skillopt_blob_cache_bytes", "Bytes kept", value=stats["bytes"])
        yield core.GaugeMetricFamily(
            "skillopt_blob_cache_capacity_bytes", "Bytes the cache may keep", value=stats["capacity_bytes"]
        )


def parse_listen(listen: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:9464`` for IPv6) as a bind address.

    Raises:
        ConfigError: not of that form.
    """
    match = re.fullmatch(r"\[?([^\[\]]*?)\]?:(\d{1,5})", listen.strip())
    if match is None or int(match.group(2)) > 65535:
        raise ConfigError(f"--metrics-listen {listen!r}: expected HOST:PORT (e.g. 0.0.0.0:9464)")
    return match.group(1) or "0.0.0.0", int(match.group(2))


@dataclass
class MetricsServer:
    """The plaintext ``/metrics`` listener of a host."""

    server: Any
    thread: threading.Thread
    port: int

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def start_metrics_server(listen: str, metrics: PrometheusMetrics) -> MetricsServer:
    """Serve ``metrics`` on ``listen`` over plaintext HTTP (any path; ``/metrics`` by
    convention), without a token: nothing in them is secret.

    Raises:
        ConfigError: a malformed address, or one that cannot be bound.
    """
    from prometheus_client import start_http_server

    host, port = parse_listen(listen)
    try:
        server, thread = start_http_server(port, addr=host, registry=metrics.registry)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {listen} (--metrics-listen): {exc.strerror or exc}") from exc
    bound = int(server.server_port)
    log.info("server.metrics_listener", listen=listen, port=bound)
    return MetricsServer(server, thread, bound)
