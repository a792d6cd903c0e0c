"""The host's side listeners beside its gRPC port: health-only gRPC (for probes that cannot do
TLS) and Prometheus metrics over plaintext HTTP. Each is off unless its flag asks for it."""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import structlog
from grpc_health.v1 import health, health_pb2_grpc

from sandbox.server.hostwatch import HostWatch
from sandbox.server.servicer import SandboxServicer
from skillopt.errors import ConfigError

log = structlog.get_logger("skillopt.sandbox.server")

__all__ = ["health_listener", "metrics_listener"]


def health_listener(listen: str, health_servicer: health.HealthServicer) -> tuple[grpc.Server | None, int]:
    """The health-only plaintext listener on ``listen`` (``--health-listen``), bound but not started,
    and its port; ``(None, 0)`` when none is asked for. It shares the main server's health
    servicer, so draining shows on both.

    Raises:
        ConfigError: the address cannot be bound.
    """
    if not listen:
        return None, 0
    server = grpc.server(ThreadPoolExecutor(max_workers=2, thread_name_prefix="health"))
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    try:
        port = server.add_insecure_port(listen)
    except RuntimeError as exc:
        raise ConfigError(f"cannot listen on {listen} (--health-listen): {exc}") from exc
    log.info("server.health_listener", listen=listen, port=port)
    return server, port


def metrics_listener(
    listen: str,
    host: Any,
    servicer: SandboxServicer,
    watch: HostWatch,
    cleanup: contextlib.ExitStack,
) -> int:
    """Start the metrics listener ``listen`` asks for (``--metrics-listen``; its port, 0: none)
    and hand its recorder to the servicer and the gateway. ``host`` is what the server is made
    of (``serve._Host``: admission, pools, sessions, service).

    Raises:
        ConfigError: prometheus-client is missing, or the address cannot be bound.
    """
    if not listen:
        return 0
    from sandbox.observability.metrics import HostState, PrometheusMetrics, start_metrics_server
    from skillopt import __version__

    state = HostState(
        host_id=host.service.config.host_id,
        version=__version__,
        admission=host.admission,
        pools=host.pools,
        blobs=servicer.blobs,
        sessions=host.sessions,
        serving=lambda: watch.serving,
        engine_errors=lambda: {
            "unreachable": watch.engine_unreachable,
            "container_create": host.pools.create_failures,
        },
    )
    metrics = PrometheusMetrics(state)
    listener = start_metrics_server(listen, metrics)
    cleanup.callback(listener.close)
    servicer.metrics = host.service.gateway.metrics = metrics
    return listener.port
