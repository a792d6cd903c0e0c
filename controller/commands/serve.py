"""``skillopt serve``: run a sandbox service on this host."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import signal
import socket
import sys
import threading
import uuid
from pathlib import Path

from skillopt.errors import ConfigError, SkillOptError
from skillopt.grader_pool import default_workers

__all__ = ["register"]

MiB = 1024 * 1024


def default_host_id(listen: str) -> str:
    """A host id unique per service on this machine: ``<hostname>-<port>``, or with port 0 (a
    free port picked at start) ``<hostname>-<6 random hex>``."""
    port = listen.rsplit(":", 1)[-1] if ":" in listen else ""
    suffix = port if port.isdigit() and int(port) > 0 else uuid.uuid4().hex[:6]
    return f"{socket.gethostname()}-{suffix}"


def _default_state_dir() -> str:
    if os.geteuid() == 0:
        return "/var/lib/skillopt/sandbox"
    return str(Path.home() / ".cache" / "skillopt" / "sandbox")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="run a sandbox service (gRPC) that executes rollouts in hardened containers",
        description=(
            "Run the sandbox service: rollouts arrive over gRPC, run in single-use hardened Docker "
            "containers from a warm pool, are graded on this host and streamed back. Listening "
            "beyond loopback requires a token (or --insecure)."
        ),
    )
    p.add_argument(
        "--listen", default="127.0.0.1:50051", help="HOST:PORT to listen on (port 0 = any free port)"
    )
    p.add_argument(
        "--token-file",
        help="file holding the bearer token clients must send (or env SKILLOPT_SANDBOX_TOKEN); one token "
        "per line makes each line a tenant whose sessions no other token sees, optionally followed by "
        "max_sessions=N (that tenant's cap)",
    )
    p.add_argument("--insecure", action="store_true", help="allow a non-loopback listener without a token")
    p.add_argument("--tls-cert", default="", help="PEM certificate chain for TLS")
    p.add_argument("--tls-key", default="", help="PEM private key for TLS")
    p.add_argument(
        "--tls-client-ca", default="", help="PEM CA; clients must present a certificate it signed (mTLS)"
    )
    p.add_argument(
        "--host-id",
        default="",
        help="this host's id (container labels, results, fleet status); default: the machine's name and "
        "the listen port (HOSTNAME-50051), or HOSTNAME-<random> with port 0, so that several services on "
        "one machine are told apart",
    )
    p.add_argument(
        "--state-dir", default=_default_state_dir(), help="host dir for per-container files and the lock"
    )
    p.add_argument(
        "--capacity", type=int, default=max(2, (os.cpu_count() or 2)), help="max concurrent rollouts"
    )
    p.add_argument(
        "--pool-size",
        type=int,
        default=None,
        help="idle warm containers per spec (default: capacity; twice the capacity under --runtime runsc, "
        "whose containers start slower)",
    )
    p.add_argument("--max-creations", type=int, default=2, help="containers created at once")
    p.add_argument(
        "--grader-workers",
        type=int,
        default=default_workers(),
        help="processes that grade outputs off the rollout threads (default: one per core, at most 4; "
        "0: grade in the rollout's thread)",
    )
    p.add_argument("--image", default="skillopt-runtime:latest", help="rollout runtime image")
    p.add_argument("--runtime", default="", help="OCI runtime, e.g. runsc (gVisor); default: engine default")
    p.add_argument(
        "--require-runtime",
        action="store_true",
        help="refuse agents that cannot run under --runtime instead of running them under the engine "
        "default (exec agents on a runsc host run under runsc-net, its networked sibling, when the "
        "engine has it: scripts/setup.sh --gvisor registers both); Describe and every result say "
        "which runtime was used either way",
    )
    p.add_argument("--memory-mb", type=int, default=1024, help="default memory limit per rollout container")
    p.add_argument("--cpus", type=float, default=1.0, help="default CPU limit per rollout container")
    p.add_argument("--providers", help="YAML file of model provider profiles (see skillopt.models.profiles)")
    p.add_argument(
        "--provider",
        action="append",
        default=[],
        metavar="NAME=KIND,base_url=URL[,api_key_env=VAR]",
        help="add a model provider profile (repeatable)",
    )
    p.add_argument("--gateway-cache-dir", default="", help="record/replay store of model exchanges")
    p.add_argument(
        "--gateway-cache-mode",
        choices=("off", "record", "replay"),
        default="off",
        help="default model cache mode for rollouts that do not choose one (replay: a miss is an error)",
    )
    p.add_argument(
        "--exec-agents",
        choices=("auto", "on", "off"),
        default="auto",
        help="agent CLIs in containers on the firewalled gateway network (needs root for iptables)",
    )
    p.add_argument(
        "--simulate",
        nargs="?",
        const="on",
        choices=("on", "noisy"),
        help="also serve the offline simulation's target (scripted models, no key): provider profiles "
        "'sim' (OpenAI APIs) and 'sim-anthropic' (Messages), for `skillopt train --simulate on|noisy "
        "--endpoints ...`. Both values serve both targets (deterministic and noisy): the run's "
        "--simulate chooses by the model it asks for",
    )
    p.add_argument(
        "--health-listen",
        default="",
        help="HOST:PORT of a plaintext listener serving only grpc.health.v1 (e.g. for Kubernetes' "
        "gRPC probes, which cannot do TLS); it reports NOT_SERVING while draining, like the main port",
    )
    p.add_argument(
        "--http-listen",
        default="",
        help="HOST:PORT of a SandboxFusion-compatible HTTP API (POST /run_code, /run_jupyter; off unless "
        "given): each request runs in a fresh hardened container. Tokens as on gRPC: 'Authorization: "
        "Bearer T' or the endpoint URL http://HOST:PORT/t/T (docs/http-api.md); beyond loopback it needs "
        "a token (or --insecure)",
    )
    p.add_argument(
        "--code-image",
        default="",
        help="image of the HTTP API's code runs (default: skillopt-runtime-polyglot:latest when built "
        "here, else --image, which runs python and bash only)",
    )
    p.add_argument("--http-port-file", help="write the HTTP API's bound port here once listening")
    p.add_argument(
        "--metrics-listen",
        default="",
        metavar="HOST:PORT",
        help="serve Prometheus metrics over plaintext HTTP at /metrics on this address (off unless "
        "given; no token: nothing secret in them; needs skillopt[metrics]; docs/observability.md)",
    )
    p.add_argument(
        "--max-sessions",
        type=int,
        default=64,
        help="most live sessions (the general sandbox API) on this host, all tokens together; "
        "further creates are refused with a retry hint (0: no sessions)",
    )
    p.add_argument(
        "--session-image",
        action="append",
        default=[],
        help="an image sessions may ask for besides --image (repeatable; must be built on this host)",
    )
    p.add_argument(
        "--session-idle-ttl", type=float, default=600.0, help="idle TTL of a session that asks for none (s)"
    )
    p.add_argument(
        "--blob-cache-mb",
        type=int,
        default=1024,
        help="memory for the request files and skills clients send once and then name by "
        "SHA-256 (corpora, workbooks, skills), all tokens together, least recently used out first "
        "(0: keep nothing, every request sends its files)",
    )
    # Defaults come from skillopt.skill.package.PackageLimits (imported when serving: it loads
    # the standard's YAML parser, too slow for every CLI start).
    p.add_argument(
        "--skill-max-files",
        type=int,
        default=None,
        help="most files (SKILL.md included) of a skill package this host mounts (default 200); a "
        "larger package is refused before anything runs, naming the rule; Describe reports the limit "
        "(0: mount SKILL.md alone, as hosts before packages did; clients send packages elsewhere)",
    )
    p.add_argument(
        "--skill-max-mb",
        type=float,
        default=None,
        help="most MiB of one skill package, all its files together (default 8)",
    )
    p.add_argument("--port-file", help="write the bound port here once listening")
    p.add_argument(
        "--drain-grace", type=float, default=30.0, help="seconds to let rollouts finish on SIGTERM"
    )
    p.add_argument(
        "--exit-with-parent",
        action="store_true",
        help="drain and exit when stdin reaches EOF (the embedded sandbox: its controller holds the pipe)",
    )
    p.add_argument("--log-format", choices=("json", "console"), default="json")
    p.add_argument("--log-level", default="info")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from skillopt.logs import configure_logging

    configure_logging(json=args.log_format == "json", level=args.log_level)
    args.host_id = args.host_id or default_host_id(args.listen)
    from controller.cli import start_tracing

    if not start_tracing(
        "skillopt-host", **{"skillopt.host.id": args.host_id, "service.instance.id": args.host_id}
    ):
        return 2
    with contextlib.ExitStack() as stack:
        specs = list(args.provider)
        if args.simulate:
            from skillopt.testing.simulation import simulation_profiles, simulation_server

            specs += simulation_profiles(stack.enter_context(simulation_server()))
        return _serve(args, specs)


def _serve(args: argparse.Namespace, provider_specs: list[str]) -> int:
    from sandbox.runtime.spec import ContainerSpec, RuntimeConfig, default_pool_size
    from sandbox.server.serve import ServerConfig, serve, server_credentials
    from sandbox.service.config import DEFAULT_LIMITS, ServiceConfig, SessionConfig
    from sandbox.service.tenants import parse_token_file
    from skillopt.models.profiles import load_profiles, validate_profiles
    from skillopt.skill.package import PackageLimits

    try:
        if args.grader_workers < 0:
            raise ConfigError(f"--grader-workers must be 0 or more, got {args.grader_workers}")
        token = None
        tenants: list[tuple[str, int]] = []
        if args.token_file:
            tenants = parse_token_file(
                Path(args.token_file).read_text(), source=f"token file {args.token_file}"
            )
        elif os.environ.get("SKILLOPT_SANDBOX_TOKEN"):
            token = os.environ["SKILLOPT_SANDBOX_TOKEN"]
        if args.blob_cache_mb < 0:
            raise ConfigError(f"--blob-cache-mb must be 0 or more, got {args.blob_cache_mb}")
        package_limits = PackageLimits(
            max_files=PackageLimits().max_files if args.skill_max_files is None else args.skill_max_files,
            max_bytes=PackageLimits().max_bytes
            if args.skill_max_mb is None
            else int(args.skill_max_mb * MiB),
        )
        if package_limits.max_files < 0 or package_limits.max_bytes < 1:
            raise ConfigError("--skill-max-files must be 0 or more and --skill-max-mb positive")
        if args.max_sessions < 0:
            raise ConfigError(f"--max-sessions must be 0 or more, got {args.max_sessions}")
        providers = load_profiles(file=args.providers, specs=provider_specs)
        validate_profiles(providers)  # every configured provider builds, or the host does not start
        spec = ContainerSpec(
            image=args.image, runtime=args.runtime, memory_bytes=args.memory_mb * MiB, cpus=args.cpus
        )
        limits = dataclasses.replace(DEFAULT_LIMITS, memory_bytes=spec.memory_bytes, cpus=spec.cpus)
        config = ServerConfig(
            listen=args.listen,
            token=token,
            tenants=tuple(tenants),
            sessions=SessionConfig(
                max_sessions=args.max_sessions,
                extra_images=tuple(args.session_image),
                default_idle_ttl_s=args.session_idle_ttl,
            ),
            insecure=args.insecure,
            tls_cert_file=args.tls_cert,
            tls_key_file=args.tls_key,
            tls_client_ca_file=args.tls_client_ca,
            drain_grace_s=args.drain_grace,
            runtime=RuntimeConfig(
                host_id=args.host_id,
                state_dir=args.state_dir,
                pool_size=default_pool_size(args.capacity, args.runtime)
                if args.pool_size is None
                else args.pool_size,
                max_concurrent_creations=args.max_creations,
            ),
            service=ServiceConfig(
                host_id=args.host_id,
                capacity=args.capacity,
                base_spec=spec,
                default_limits=limits,
                require_runtime=args.require_runtime,
                grader_workers=args.grader_workers,
                blob_cache_bytes=args.blob_cache_mb * 1024 * 1024,
                package_limits=package_limits,
            ),
            providers=providers,
            gateway_cache_dir=args.gateway_cache_dir,
            gateway_cache_mode=args.gateway_cache_mode,
            exec_agents=args.exec_agents,
            health_listen=args.health_listen,
            http_listen=args.http_listen,
            code_image=args.code_image,
            metrics_listen=args.metrics_listen,
        )
        if args.metrics_listen:
            from sandbox.observability.metrics import parse_listen, require_client

            parse_listen(args.metrics_listen)  # refuse before anything starts
            require_client()
        server_credentials(config)  # half a TLS setup or a missing file: refuse before anything starts
    except (ConfigError, OSError) as exc:
        print(f"skillopt serve: {getattr(exc, 'message', exc)}", file=sys.stderr)
        return 2

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    # A hang-up (its terminal or ssh session closed) drains like SIGTERM: unhandled, it killed
    # the host on the spot, failing its running rollouts and leaving their containers behind
    # until the next reaper (found by bench/bench_soak.py's host cycles).
    signal.signal(signal.SIGHUP, lambda *_: stop.set())
    if args.exit_with_parent:
        # The parent never writes; EOF means it is gone (even after kill -9): clean up.
        def wait_for_eof() -> None:
            sys.stdin.buffer.read()
            stop.set()

        threading.Thread(target=wait_for_eof, daemon=True).start()
    try:
        with serve(config) as running:
            if args.port_file:
                tmp = Path(args.port_file + ".tmp")
                tmp.write_text(str(running.port))
                tmp.replace(args.port_file)
            if args.http_port_file and running.http_port:
                tmp = Path(args.http_port_file + ".tmp")
                tmp.write_text(str(running.http_port))
                tmp.replace(args.http_port_file)
            print(f"skillopt sandbox {args.host_id} listening on port {running.port}", flush=True)
            if running.http_port:  # after: the line above is the first, which callers wait for
                print(
                    f"skillopt sandbox {args.host_id} serves /run_code on port {running.http_port}",
                    flush=True,
                )
            # Wait with a timeout, not forever: a signal the kernel delivers to one of gRPC's
            # threads leaves the main thread asleep in the lock, and Python runs signal handlers
            # only in the main thread, when it next executes bytecode. An unbounded wait could
            # sleep through SIGTERM (seen in CI: no drain within 60 s); this one notices it
            # within a quarter of a second.
            while not stop.wait(0.25):
                pass
    except SkillOptError as exc:
        print(f"skillopt serve: {exc.message}", file=sys.stderr)
        return 2
    return 0
