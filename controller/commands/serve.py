"""``skillopt serve``: run a sandbox service on this host.

The flags are made from the host's configuration model
(:class:`sandbox.server.host_config.HostConfig`): one flag per key, its help the key's
description, its default the model's. ``--config host.yaml`` reads the same keys from a file; the
flags given override the file; ``--print-config`` prints the result and exits.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args, get_origin

from controller.commands.flags import CommandParser
from skillopt.errors import ConfigError, SkillOptError

if TYPE_CHECKING:
    from pydantic.fields import FieldInfo

    from sandbox.server.host_config import HostConfig
    from sandbox.server.serve import ServerConfig

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="run a sandbox service (gRPC) that executes rollouts in hardened containers",
        description=(
            "Run the sandbox service: rollouts arrive over gRPC, run in hardened Docker containers "
            "from a warm pool, are graded on this host and streamed back. Listening beyond "
            "loopback requires a token (or --insecure). Every flag is also a key of a --config "
            "file (docs/host.md)."
        ),
    )
    p.add_argument(
        "--config",
        metavar="FILE",
        help="YAML file of this host's configuration: the flags below as keys (listen: ..., "
        "max_sessions: ...; docs/host.md); a flag given overrides the file's key",
    )
    p.add_argument(
        "--print-config",
        action="store_true",
        help="print the effective configuration as YAML (defaults, --config file and flags merged; "
        "the token never shown) and exit",
    )
    assert isinstance(p, CommandParser)  # controller.cli's sub-command parsers are
    p.add_arguments_later(_add_flags)
    p.set_defaults(func=run)


def _add_flags(p: argparse.ArgumentParser) -> None:
    """One flag per key of the host's configuration (added when ``serve`` is parsed: the model
    imports pydantic, which other commands need not load at start)."""
    from sandbox.server.host_config import HostConfig

    for name, field in HostConfig.model_fields.items():
        flag, options = _argument(name, field)
        p.add_argument(flag, **options)


def _argument(name: str, field: FieldInfo) -> tuple[str, dict[str, Any]]:
    """The flag of key ``name`` and its ``add_argument`` options, from the field's declaration.

    Every flag defaults to None (not given), so that a key of the --config file stays unless
    the flag is given; ``--help`` says the model's default.
    """
    from sandbox.server.host_config import flag_of
    from skillopt.validation import Canonical, base_type

    flag = flag_of(name)
    kind = base_type(field.annotation)
    options: dict[str, Any] = {"dest": name, "default": None, "help": _help(field)}
    if flag.metavar:
        options["metavar"] = flag.metavar
    if kind is bool:
        options["action"] = argparse.BooleanOptionalAction
    elif get_origin(kind) is tuple:
        options["action"] = "append"
    elif get_origin(kind) is Literal:
        if not any(isinstance(m, Canonical) for m in field.metadata):  # a Canonical one: any case
            options["choices"] = get_args(kind)
        if flag.const:
            options.update(nargs="?", const=flag.const)
    elif kind in (int, float):
        options["type"] = kind
    return flag.name, options


def _help(field: FieldInfo) -> str:
    """The key's description, in one paragraph, and its default when it has one worth saying."""
    text = " ".join((field.description or "").split())
    default = field.get_default(call_default_factory=True)
    if default not in (None, "", (), False):
        text += f" [default: {default}]"
    return text.replace("%", "%%")


def run(args: argparse.Namespace) -> int:
    from sandbox.server.host_config import HostConfig, config_yaml, load_host_config

    try:
        host, origins = load_host_config(
            args.config, {name: getattr(args, name) for name in HostConfig.model_fields}
        )
    except ConfigError as exc:
        print(f"skillopt serve: {exc.message}", file=sys.stderr)
        return 2
    if args.print_config:
        print(config_yaml(host, origins), end="")
        return 0
    from skillopt.logs import configure_logging

    configure_logging(json=host.log_format == "json", level=host.log_level)
    from controller.cli import start_tracing

    if not start_tracing(
        "skillopt-host", **{"skillopt.host.id": host.host_id, "service.instance.id": host.host_id}
    ):
        return 2
    with contextlib.ExitStack() as stack:
        specs: list[str] = []
        if host.simulate != "off":
            from skillopt.testing.simulation import simulation_profiles, simulation_server

            specs += simulation_profiles(stack.enter_context(simulation_server()))
        return _serve(host, specs)


def _serve(host: HostConfig, provider_specs: list[str]) -> int:
    """Build the server's configuration (every file read now: a bad one refuses the start, exit
    2), then run it until SIGTERM, SIGINT, SIGHUP or, with exit_with_parent, stdin's EOF."""
    from sandbox.server.host_config import server_config

    try:
        config = server_config(host, provider_specs=provider_specs)
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
    if host.exit_with_parent:
        # The parent never writes; EOF means it is gone (even after kill -9): clean up.
        def wait_for_eof() -> None:
            sys.stdin.buffer.read()
            stop.set()

        threading.Thread(target=wait_for_eof, daemon=True).start()
    try:
        _run_until(stop, config, host)
    except SkillOptError as exc:
        print(f"skillopt serve: {exc.message}", file=sys.stderr)
        return 2
    return 0


def _run_until(stop: threading.Event, config: ServerConfig, host: HostConfig) -> None:
    """Serve ``config`` until ``stop`` is set, then drain; the port files and the "listening on
    port N" line (which spawning processes wait for) once it listens."""
    from sandbox.server.serve import serve

    with serve(config) as running:
        _write_port(host.port_file, running.port)
        _write_port(host.http_port_file, running.http_port)
        print(f"skillopt sandbox {host.host_id} listening on port {running.port}", flush=True)
        if running.http_port:  # after: the line above is the first, which callers wait for
            print(f"skillopt sandbox {host.host_id} serves /run_code on port {running.http_port}", flush=True)
        # Wait with a timeout, not forever: a signal the kernel delivers to one of gRPC's
        # threads leaves the main thread asleep in the lock, and Python runs signal handlers
        # only in the main thread, when it next executes bytecode. An unbounded wait could
        # sleep through SIGTERM (seen in CI: no drain within 60 s); this one notices it
        # within a quarter of a second.
        while not stop.wait(0.25):
            pass


def _write_port(path: str, port: int) -> None:
    """Write ``port`` to ``path`` whole (a reader never sees half of it); nothing when either is
    unset."""
    if path and port:
        tmp = Path(path + ".tmp")
        tmp.write_text(str(port))
        tmp.replace(path)
