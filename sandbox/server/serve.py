"""Start, run and drain a sandbox service.

``serve(config)`` is a context manager yielding a :class:`RunningServer` (with the bound port);
leaving it drains: health NOT_SERVING → refuse new rollouts (UNAVAILABLE) → wait up to
``drain_grace_s`` for running ones → cancel the rest → stop the server → remove every
container this process owns.
"""

from __future__ import annotations

import contextlib
import ipaddress
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import docker.errors
import grpc
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from sandbox.api.tracing import server_interceptors
from sandbox.api.v1 import sandbox_pb2_grpc as pb_grpc
from sandbox.gateway.cache import ExchangeCache
from sandbox.gateway.connection import GatewayLimits
from sandbox.gateway.core import Gateway
from sandbox.gateway.http import GatewayServer
from sandbox.runtime.docker.network import GatewayNetwork
from sandbox.runtime.docker.runtime import DockerRuntime
from sandbox.runtime.pool import PoolManager
from sandbox.runtime.spec import ContainerSpec, RuntimeConfig
from sandbox.server.fusion_http import start_http_api
from sandbox.server.hostwatch import SERVICE_NAME, HostWatch
from sandbox.server.interceptors import TokenAuthInterceptor
from sandbox.server.listeners import health_listener, metrics_listener
from sandbox.server.servicer import SandboxServicer
from sandbox.service.admission import RolloutAdmission
from sandbox.service.config import ServiceConfig, SessionConfig
from sandbox.service.languages import resolve_code_image
from sandbox.service.rollout import RolloutService
from sandbox.service.sessions import SessionManager
from sandbox.service.tenants import TenantTokens
from sandbox.service.validation import host_cpus
from skillopt.envs.registry import available_envs, env_spec
from skillopt.errors import ConfigError
from skillopt.grader_pool import GraderPool
from skillopt.models.profiles import ProviderProfile
from skillopt.units import MiB

__all__ = ["RunningServer", "ServerConfig", "check_listen_address", "serve", "server_credentials"]

log = structlog.get_logger("skillopt.sandbox.server")


@dataclass(frozen=True, kw_only=True)
class ServerConfig:
    """Everything a sandbox service runs with. ``skillopt serve`` builds it from the host's
    configuration (:func:`sandbox.server.host_config.server_config`), with every file read."""

    listen: str = "127.0.0.1:50051"
    token: str | None = None
    #: Tokens the host accepts besides ``token``, each one a tenant: ``(token, max_sessions)``
    #: per line of a token file (``sandbox.service.tenants``).
    tenants: tuple[tuple[str, int], ...] = ()
    insecure: bool = False
    tls_cert_file: str = ""
    tls_key_file: str = ""
    #: With a CA, clients must present a certificate signed by it (mTLS).
    tls_client_ca_file: str = ""
    #: Largest gRPC message accepted (the service's own file limits apply below this).
    max_message_bytes: int = 80 * MiB
    drain_grace_s: float = 30.0
    #: Keepalive pings a client may send on an idle stream, at most one per this many seconds
    #: (the controller pings every 30 s; faster ones count as abuse and cost a GOAWAY).
    min_client_ping_interval_s: float = 10.0
    runtime: RuntimeConfig
    service: ServiceConfig
    #: Sessions (the general sandbox API: CreateSession, Exec, files).
    sessions: SessionConfig = field(default_factory=SessionConfig)
    providers: dict[str, ProviderProfile] = field(default_factory=dict)
    reflection: bool = True
    #: Record/replay store of model exchanges ("" = none: only mode "off" is available).
    gateway_cache_dir: str = ""
    #: Default cache mode for rollouts that do not choose one: off, record, replay.
    gateway_cache_mode: str = "off"
    #: Exec agents (agent CLIs in containers on the gateway network): auto (when this host can
    #: firewall the network, i.e. runs as root), on (fail if it cannot), off.
    exec_agents: str = "auto"
    #: What one exec-agent container may use of the gateway's HTTP front end.
    gateway_limits: GatewayLimits = field(default_factory=GatewayLimits)
    #: Per-attempt timeout of the gateway's calls to a model provider.
    gateway_upstream_timeout_s: float = 600.0
    #: A second, plaintext listener serving only ``grpc.health.v1`` (the same status as the
    #: main port, NOT_SERVING while draining), for probes that cannot speak TLS or present a
    #: client certificate: Kubernetes' gRPC probes. "" = none.
    health_listen: str = ""
    #: A plaintext HTTP listener serving Prometheus metrics (``/metrics``, no token: nothing
    #: secret in them; needs ``skillopt[metrics]``). "" = none.
    metrics_listen: str = ""
    #: How often the host checks that it can serve: its container engine answers, and its state
    #: dir has at least ``min_free_bytes`` free. Failing either turns health NOT_SERVING (so
    #: controllers stop placing here) until it passes again.
    host_check_interval_s: float = 2.0
    min_free_bytes: int = 16 * MiB
    #: The SandboxFusion-compatible HTTP API (POST /run_code, /run_jupyter: ``sandbox.server.
    #: fusion_http``), "" = off. Beyond loopback it needs a token, as ``listen`` does.
    http_listen: str = ""
    #: The image of its code runs; "" = skillopt-runtime-polyglot:latest when built here, else
    #: the runtime image (python and bash only).
    code_image: str = ""


def check_listen_address(listen: str, *, token: str | None, insecure: bool) -> None:
    """Refuse to listen beyond loopback without a token unless explicitly ``insecure``.

    Raises:
        ConfigError: explaining how to fix it.
    """
    host = listen.rsplit(":", 1)[0].strip("[]")
    if token or insecure:
        return
    if host in ("localhost", ""):
        if host == "":
            raise ConfigError(f"{listen!r} listens on every interface; give --token-file or pass --insecure")
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ConfigError(
            f"refusing to listen on non-loopback address {listen!r} without a token: "
            "give --token-file (or SKILLOPT_SANDBOX_TOKEN), or pass --insecure for a trusted network"
        )


@dataclass
class RunningServer:
    server: grpc.Server
    port: int
    service: RolloutService
    admission: RolloutAdmission
    health: health.HealthServicer
    servicer: SandboxServicer
    #: The gateway's HTTP front end (None: exec agents unavailable on this host).
    front: GatewayServer | None = None
    #: Port of the health-only listener (0: none).
    health_port: int = 0
    #: Port of the SandboxFusion-compatible HTTP API (0: none).
    http_port: int = 0
    #: Port of the metrics listener (0: none).
    metrics_port: int = 0
    stopped: threading.Event = field(default_factory=threading.Event)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


def server_credentials(config: ServerConfig) -> grpc.ServerCredentials | None:
    """The TLS credentials ``config`` asks for (``None``: plaintext), with every file read now.

    Refuses half a TLS configuration instead of silently serving plaintext: a key or client CA
    without a certificate, a certificate without a key, and unreadable or empty files.

    Raises:
        ConfigError: one line naming the flag and the file.
    """
    if not config.tls_cert_file:
        for value, flag in (
            (config.tls_key_file, "--tls-key"),
            (config.tls_client_ca_file, "--tls-client-ca"),
        ):
            if value:
                raise ConfigError(
                    f"{flag} needs --tls-cert (refusing to serve plaintext with a TLS option set)"
                )
        return None
    if not config.tls_key_file:
        raise ConfigError("--tls-cert needs --tls-key (the certificate's private key)")

    def read(path: str, flag: str) -> bytes:
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise ConfigError(f"{flag} {path}: cannot read it ({exc.strerror or exc})") from exc
        if b"-----BEGIN" not in data:
            raise ConfigError(f"{flag} {path}: not a PEM file")
        return data

    cert = read(config.tls_cert_file, "--tls-cert")
    key = read(config.tls_key_file, "--tls-key")
    ca = read(config.tls_client_ca_file, "--tls-client-ca") if config.tls_client_ca_file else None
    return grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=ca, require_client_auth=ca is not None
    )


@contextlib.contextmanager
def serve(config: ServerConfig) -> Iterator[RunningServer]:
    """Start the service; drain and clean up on exit.

    Every configuration error (listen address, TLS files, container runtime, exec agents
    required but unavailable) is raised as :class:`ConfigError` before the server listens, and
    whatever was started by then (warm containers, the gateway network) is removed again.
    """
    tokens = tenant_tokens(config)
    check_listen_address(config.listen, token="set" if tokens else None, insecure=config.insecure)
    if config.http_listen:
        check_listen_address(config.http_listen, token="set" if tokens else None, insecure=config.insecure)
    creds = server_credentials(config)  # before any container exists: a bad file leaves nothing
    # Teardown runs in reverse: drain → pools → containers → gateway network → gateway.
    with contextlib.ExitStack() as cleanup:
        host = _build(config, cleanup)
        servicer = SandboxServicer(
            host.service, host.admission, sessions=host.sessions, tenants=tokens or None
        )
        server, health_servicer = _grpc_server(config, servicer, tokens)
        watch = HostWatch(
            host.runtime,
            host.pools,
            health_servicer,
            host_id=config.runtime.host_id,
            min_free_bytes=config.min_free_bytes,
            interval_s=config.host_check_interval_s,
        )
        servicer.host_check = watch.check_now
        metrics_port = metrics_listener(
            config.metrics_listen, host, servicer, watch, cleanup
        )  # stops after the drain
        port = _bind(server, config.listen, creds)
        health_server, health_port = health_listener(
            config.health_listen, health_servicer
        )  # bound, not started
        server.start()
        if health_server is not None:
            health_server.start()
            cleanup.callback(lambda: health_server.stop(grace=1.0).wait())  # after the drain
        for name in ("", SERVICE_NAME):
            health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
        running = RunningServer(
            server, port, host.service, host.admission, health_servicer, servicer, host.front, health_port
        )
        running.metrics_port = metrics_port
        cleanup.callback(running.stopped.set)
        cleanup.callback(_drain, running, config.drain_grace_s)
        if config.http_listen:  # its door closes first when the host drains
            http = start_http_api(
                config.http_listen,
                image=host.code_image,
                runtime=host.runtime,
                sessions=host.sessions,
                tokens=tokens,
                max_body_bytes=config.service.max_request_bytes,
            )
            cleanup.callback(http.close)
            running.http_port = servicer.http_port = http.port
            servicer.languages = http.runner.config.languages
        reaper = threading.Thread(
            target=_reap_loop,
            args=(host.runtime, config.runtime.reap_interval_s, running.stopped),
            daemon=True,
        )
        reaper.start()
        threading.Thread(target=watch.loop, args=(running.stopped,), daemon=True).start()
        log.info(
            "server.started",
            listen=config.listen,
            port=port,
            host=config.runtime.host_id,
            capacity=config.service.capacity,
            tls=bool(creds),
            auth=bool(tokens),
            tenants=len(tokens),
            providers=sorted(config.providers),
        )
        yield running
    log.info("server.stopped", host=config.runtime.host_id)


def _bind(server: grpc.Server, listen: str, creds: grpc.ServerCredentials | None) -> int:
    """Bind ``server`` to ``listen`` (TLS with ``creds``) and return the port it got.

    Raises:
        ConfigError: the address cannot be bound (taken, malformed, not this host's).
    """
    try:
        return server.add_secure_port(listen, creds) if creds else server.add_insecure_port(listen)
    except RuntimeError as exc:
        raise ConfigError(f"cannot listen on {listen}: {exc}") from exc


@dataclass
class _Host:
    """What a service is made of (:func:`_build`), before it listens."""

    runtime: DockerRuntime
    pools: PoolManager
    service: RolloutService
    admission: RolloutAdmission
    sessions: SessionManager
    #: The gateway's HTTP front end (None: exec agents unavailable on this host).
    front: GatewayServer | None
    #: The image of the HTTP API's code runs ("": no HTTP API).
    code_image: str = ""


def _build(config: ServerConfig, cleanup: contextlib.ExitStack) -> _Host:
    """The gateway, the container runtime and its warm pools, the exec agents' network, the
    grader, the rollout service and the sessions, each one's teardown pushed on ``cleanup``.

    Raises:
        ConfigError: the container runtime or the CPU limit cannot be had here, or exec
            agents are required and unavailable.
    """
    gateway = Gateway(
        config.providers,
        cache=ExchangeCache(config.gateway_cache_dir) if config.gateway_cache_dir else None,
        default_mode=config.gateway_cache_mode,
        upstream_timeout_s=config.gateway_upstream_timeout_s,
    )
    cleanup.callback(gateway.close)
    after_containers: list[Callable[[], None]] = []  # the network goes once nothing is on it
    cleanup.callback(lambda: [close() for close in after_containers])
    runtime = DockerRuntime(config.runtime)
    cleanup.callback(runtime.close)
    spec: ContainerSpec = config.service.base_spec
    runtime.check_runtime(spec.runtime)
    if spec.cpus > host_cpus():
        raise ConfigError(
            f"default CPU limit {spec.cpus:g} exceeds this host's {host_cpus():g} cores (--cpus)"
        )
    report = runtime.reap(startup=True)
    if report.containers:
        log.info("reaper.startup", removed=len(report.containers))
    pools = PoolManager(runtime, default_spec=spec)
    cleanup.callback(pools.close)
    network, front, unavailable = _exec_network(config, runtime, gateway, after_containers)
    grader = None
    if config.service.grader_workers > 0:
        grader = GraderPool(
            config.service.grader_workers,
            preload=sorted({m for name in available_envs() for m in env_spec(name).grader_modules}),
        )
        cleanup.callback(grader.close)  # after the drain: running rollouts still grade
    service = RolloutService(
        config.service,
        runtime,
        pools,
        config.providers,
        gateway=gateway,
        gateway_url=front.url if front else None,
        exec_network=network.name if network else "none",
        exec_unavailable=unavailable,
        grader=grader,
    )
    # Code runs (the HTTP API) are sessions of their own image: the sessions may use it.
    code_image = resolve_code_image(config.code_image, runtime, spec.image) if config.http_listen else ""
    extra = (*config.sessions.extra_images, code_image) if code_image else config.sessions.extra_images
    sessions = SessionManager(
        replace(config.sessions, extra_images=extra),
        host_id=config.runtime.host_id,
        pools=pools,
        runtime=runtime,
        base_spec=spec,
        gateway_spec=service.exec_spec if network is not None else None,
        default_limits=config.service.default_limits,
        max_limits=config.service.max_limits,
        max_lifetime_cap_s=config.runtime.max_container_lifetime_s,
    )
    cleanup.callback(sessions.close)  # before the pools close: sessions give their containers back
    admission = RolloutAdmission(capacity=config.service.capacity)
    return _Host(runtime, pools, service, admission, sessions, front, code_image)


def _exec_network(
    config: ServerConfig, runtime: DockerRuntime, gateway: Gateway, closers: list[Callable[[], None]]
) -> tuple[GatewayNetwork | None, GatewayServer | None, str]:
    """The firewalled gateway network and the gateway's HTTP front end on it, or why not."""
    if config.exec_agents == "off":
        return None, None, "disabled on this host (--exec-agents off)"
    network = front = None
    try:
        network = GatewayNetwork(runtime.client, config.runtime.host_id, runtime.owner.label())
        front = GatewayServer(gateway, network.gateway_ip, limits=config.gateway_limits)
        network.firewall(front.port)
    except (ConfigError, OSError, docker.errors.DockerException) as exc:
        unavailable = getattr(exc, "message", str(exc))
        if front is not None:
            front.close()
        if network is not None:
            network.close()
        if config.exec_agents == "on":
            raise ConfigError(f"exec agents requested but unavailable: {unavailable}") from exc
        log.warning("gateway.exec_agents_unavailable", reason=unavailable)
        return None, None, unavailable
    closers += [front.close, network.close]
    return network, front, ""


def tenant_tokens(config: ServerConfig) -> TenantTokens:
    """The tokens ``config`` accepts (empty: no authentication): ``tenants`` and ``token``."""
    entries = list(config.tenants)
    if config.token and config.token not in {t for t, _ in entries}:
        entries.append((config.token, 0))
    return TenantTokens(entries)


def _grpc_server(
    config: ServerConfig, servicer: SandboxServicer, tokens: TenantTokens
) -> tuple[grpc.Server, health.HealthServicer]:
    capacity = config.service.capacity
    # Every running rollout and every session's command in flight holds a handler thread for
    # as long as it streams (64 sessions each looping commands hit the old bound).
    sessions = config.sessions.max_sessions
    server = grpc.server(
        ThreadPoolExecutor(max_workers=4 * capacity + 16 + 2 * sessions, thread_name_prefix="grpc"),
        # Tracing first (when on): a refused call shows in the caller's trace too.
        interceptors=[
            *server_interceptors(),
            TokenAuthInterceptor(tokens or None, host=config.runtime.host_id),
        ],
        options=[
            ("grpc.max_receive_message_length", config.max_message_bytes),
            ("grpc.max_send_message_length", config.max_message_bytes),
            ("grpc.keepalive_time_ms", 30_000),
            ("grpc.keepalive_timeout_ms", 10_000),
            # The server-side name (a wrong name is silently ignored: the default 5 min then made
            # clients' 30 s keepalive pings on idle streams "too_many_pings" and cost a GOAWAY).
            ("grpc.http2.min_ping_interval_without_data_ms", int(config.min_client_ping_interval_s * 1000)),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.so_reuseport", 0),
        ],
        # A backstop only: rollouts beyond capacity are refused by the admission with a message.
        maximum_concurrent_rpcs=8 * capacity + 32 + 4 * sessions,
    )
    pb_grpc.add_SandboxServicer_to_server(servicer, server)
    health_servicer = health.HealthServicer(experimental_non_blocking=True)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    if config.reflection:
        reflection.enable_server_reflection(
            (SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), server
        )
    return server, health_servicer


def _reap_loop(runtime: DockerRuntime, interval_s: float, stopped: threading.Event) -> None:
    while not stopped.wait(interval_s):
        try:
            runtime.reap()
        except Exception:  # the reaper must never die
            log.exception("reaper.failed")


def _drain(running: RunningServer, grace_s: float) -> None:
    running.admission.draining = True
    sessions = running.servicer.sessions
    if sessions is not None:
        sessions.draining = True
    running.health.enter_graceful_shutdown()
    start = time.monotonic()
    # Only running rollouts and live sessions are waited for: an idle host goes straight on to
    # teardown.
    if not running.admission.wait_idle(grace_s):
        for handle in running.admission.running():
            handle.request_cancel("service draining")
        running.admission.wait_idle(10.0)  # cancelled rollouts kill their containers at once
    if sessions is not None:
        sessions.drain(max(0.0, grace_s - (time.monotonic() - start)))
    # Give streams a moment to deliver their final messages (health watchers end here too).
    running.server.stop(grace=2.0 if running.admission.running_count == 0 else 5.0).wait()
    running.servicer.shutdown(wait=True)
