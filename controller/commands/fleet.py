"""``skillopt fleet status``: every sandbox host's health, capacity and environment at a glance."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from controller.fleet.access import add_fleet_arguments
from skillopt.errors import SkillOptError

if TYPE_CHECKING:
    from controller.fleet.status import HostReport

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "fleet",
        help="inspect a fleet of sandbox hosts (health, capacity, image digests)",
        description="Inspect the sandbox hosts a run would use.",
    )
    fsub = p.add_subparsers(dest="fleet_command", metavar="COMMAND")
    fsub.required = True
    s = fsub.add_parser(
        "status",
        help="health, capacity, in-flight rollouts, runtimes and digests of every host",
        description=(
            "Probe every host: health, capacity, free and in-flight rollouts, container runtime and "
            "gVisor availability, runtime image digest, runner, service build and version. Exits 1 "
            "when a host is down (or draining, or refuses the token) or the hosts differ in what "
            "they would run, 2 on bad arguments. Examples:\n"
            "  skillopt fleet status --endpoints h1:50051,h2:50051 --token-file T\n"
            "  skillopt fleet status --endpoints dns:///skillopt-sandbox.skillopt.svc.cluster.local:50051 \\\n"
            "      --token-file T --tls-ca ca.crt --tls-cert client.crt --tls-key client.key   # docker/k8s (mTLS)\n"
            "  skillopt fleet status --config my.yaml      # its sandbox.endpoints, token and TLS files\n"
            "  SKILLOPT_ENDPOINTS=h1:50051 SKILLOPT_TOKEN_FILE=T skillopt fleet status"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument("--config", help="take the sandbox.* keys (endpoints, token, TLS) from this config")
    s.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override")
    add_fleet_arguments(s, config_keys=True)
    s.add_argument("--timeout", type=float, default=5.0, help="seconds per host (default 5)")
    s.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    s.set_defaults(func=run)
    _register_http(fsub)


def _register_http(fsub: argparse._SubParsersAction) -> None:
    h = fsub.add_parser(
        "http",
        help="serve the SandboxFusion-compatible HTTP API (/run_code, /run_jupyter) in front of the fleet",
        description=(
            "One URL for SandboxFusion clients in front of the hosts' own HTTP APIs (each started with "
            "`skillopt serve --http-listen`): every request goes to the live host with the most free "
            "slots that serves its language; a host that is down, full or draining is skipped; one "
            "that dies while it runs a request gives that request SandboxError. Callers' tokens are "
            "the hosts' (the endpoint URL http://HOST:PORT/t/TOKEN, or 'Authorization: Bearer "
            "TOKEN'); --token-file is what this front itself shows the hosts' gRPC ports "
            "(docs/http-api.md). Examples:\n"
            "  skillopt fleet http --endpoints h1:50051,h2:50051 --token-file T --listen 0.0.0.0:8080\n"
            "  skillopt fleet http --endpoints dns:///skillopt-sandbox.skillopt.svc.cluster.local:50051 \\\n"
            "      --token-file T --tls-ca ca.crt --listen 0.0.0.0:8080"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    h.add_argument("--config", help="take the sandbox.* keys (endpoints, token, TLS) from this config")
    h.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override")
    add_fleet_arguments(h, config_keys=True)
    h.add_argument(
        "--listen",
        default="127.0.0.1:8080",
        metavar="HOST:PORT",
        help="where to serve the API (default 127.0.0.1:8080; port 0: any free one). Beyond loopback it "
        "needs --token-file (the hosts then check every caller's token) or --insecure",
    )
    h.add_argument("--port-file", help="write the bound port here once listening")
    h.add_argument(
        "--wait",
        type=float,
        default=60.0,
        help="longest wait of a request for a free host before a 503 with Retry-After (s, default 60)",
    )
    h.add_argument(
        "--isolation",
        choices=["", "gvisor"],
        default=None,
        help="require this isolation of every request's container: placed only on hosts whose code runs "
        "run under it, and checked again by the host (default: sandbox.isolation of --config, else none; "
        "a request may also send its own 'isolation')",
    )
    h.add_argument("--insecure", action="store_true", help="allow a non-loopback --listen without a token")
    h.set_defaults(func=run_http)


def run_http(args: argparse.Namespace) -> int:
    import signal
    import threading
    from pathlib import Path

    from controller.fleet.executor import FleetExecutor
    from controller.fleet.http_front import FleetHttpFront
    from sandbox.server.serve import check_listen_address
    from skillopt.logs import configure_logging

    configure_logging(json=True, level="info")  # JSON lines on stderr: stdout says where it listens
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        channels = _channels(args)
        check_listen_address(args.listen, token="set" if channels[0].token else None, insecure=args.insecure)
        isolation = args.isolation if args.isolation is not None else _config_isolation(args)
        fleet = FleetExecutor(channels, workers=1)
        try:
            front = FleetHttpFront(fleet, listen=args.listen, wait_s=args.wait, isolation=isolation)
        except (OSError, ValueError) as exc:
            fleet.close()
            print(f"skillopt fleet http: cannot listen on {args.listen}: {exc}", file=sys.stderr)
            return 2
    except (SkillOptError, OSError) as exc:
        print(f"skillopt fleet http: {getattr(exc, 'message', exc)}", file=sys.stderr)
        return 2
    try:
        if args.port_file:
            tmp = Path(args.port_file + ".tmp")
            tmp.write_text(str(front.port))
            tmp.replace(args.port_file)
        print(f"skillopt fleet http listening on port {front.port}", flush=True)
        while not stop.wait(0.25):  # bounded: signal handlers run only when the main thread wakes
            pass
    finally:
        front.close()
    return 0


def _config_isolation(args: argparse.Namespace) -> str:
    from skillopt.config import load_config

    return load_config(args.config, list(args.set)).sandbox.isolation if args.config else ""


def _channels(args: argparse.Namespace):
    from controller.fleet.access import access_from_args
    from skillopt.config import load_config

    config = load_config(args.config, list(args.set)).sandbox.to_dict() if args.config else None
    return access_from_args(args, config=config).channels()


def run(args: argparse.Namespace) -> int:
    from controller.fleet.status import fleet_problems, probe_fleet

    try:
        reports = probe_fleet(_channels(args), timeout_s=args.timeout)
    except (SkillOptError, OSError) as exc:
        print(f"skillopt fleet status: {getattr(exc, 'message', exc)}", file=sys.stderr)
        return 2
    problems = fleet_problems(reports)
    if args.json:
        print(json.dumps({"ok": not problems, "problems": problems, "hosts": [r.to_dict() for r in reports]}))
    else:
        _table(reports)
        for p in problems:
            print(f"problem: {p}")
        print("fleet: ok" if not problems else f"fleet: {len(problems)} problem(s)")
    return 1 if problems else 0


def _packages(r) -> str:
    """The skill packages a host mounts, e.g. "200 files, 8 MiB"; "no" (SKILL.md alone)."""
    if r.skill_package_max_files <= 0:
        return "no"
    return f"{r.skill_package_max_files} files, {r.skill_package_max_bytes / (1024 * 1024):g} MiB"


def _reuse(r: HostReport) -> str:
    """The host's container recycling policy, e.g. "64 x, 600 s"; "off" (a fresh container per
    execution)."""
    if r.reuse_max_executions <= 0:
        return "off"
    return f"{r.reuse_max_executions} x, {r.reuse_max_age_s:g} s"


def _table(reports) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(show_lines=False)
    for col in (
        "address",
        "host",
        "health",
        "capacity",
        "free",
        "in flight",
        "sessions",
        "packages",
        "languages",
        "reuse",
        "runtime",
        "gVisor",
        "runtime image",
        "service",
        "engine",
    ):
        t.add_column(col)
    for r in reports:
        digest = ", ".join(
            d[7:19] if d.startswith("sha256:") else (d[:12] or "missing") for d in r.image_digests.values()
        )
        t.add_row(
            r.address,
            r.host or "-",
            r.health + (" (refuses us)" if r.health == "SERVING" and r.error else ""),
            str(r.capacity) if r.host else "-",
            str(r.free_slots) if r.host else "-",
            str(r.running) if r.host else "-",
            f"{r.sessions}/{r.max_sessions}" if r.host else "-",
            _packages(r) if r.host else "-",
            (",".join(r.languages) + f" :{r.http_port}" if r.languages else "none") if r.host else "-",
            _reuse(r) if r.host else "-",
            _runtimes(r),
            ("yes" if r.gvisor else "no") if r.host else "-",
            digest or "-",
            f"{r.version} {r.service_build[:12]}".strip() or "-",
            r.engine_version or "-",
        )
    Console(soft_wrap=True, width=200).print(t)


def _runtimes(r: HostReport) -> str:
    """The rollout containers' runtime, and any other one some agents run under (exec agents
    on the gateway network: ``runsc-net`` beside ``runsc``, or ``runc`` when they fall back)."""
    others = sorted(set(r.agent_runtimes.values()) - {r.container_runtime})
    return (r.container_runtime or "-") + (f" (exec agents: {', '.join(others)})" if others else "")
