"""``skillopt sandbox create|exec|cp|shell|ls|rm``: sessions on remote sandbox hosts.

Every command reaches the fleet as every other command does (:mod:`controller.fleet.access`):
``--endpoints`` (a comma list, repeatable) or ``$SKILLOPT_ENDPOINTS``; the token from
``--token-file`` or ``$SKILLOPT_TOKEN_FILE`` (a file), else ``$SKILLOPT_SANDBOX_TOKEN`` (the
token itself); TLS from ``--tls-ca`` and, for mutual TLS, ``--tls-cert``/``--tls-key`` (or
``$SKILLOPT_TLS_CA``, ``$SKILLOPT_TLS_CERT``, ``$SKILLOPT_TLS_KEY``). A session is named
by its id (``skillopt sandbox create`` prints it); ``exec`` and ``shell`` without ``--session``
use a session of their own, destroyed when they end. ``cp`` names the remote side
``SESSION:PATH``, like ``docker cp``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

from skillopt.errors import SkillOptError, UnknownSession

__all__ = ["add_remote_options", "register_remote", "run_remote_exec"]


def add_remote_options(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """The fleet flags every session command takes (:func:`controller.fleet.access.add_fleet_arguments`)."""
    from controller.fleet.access import add_fleet_arguments

    add_fleet_arguments(p)


def register_remote(ssub: argparse._SubParsersAction) -> None:
    c = ssub.add_parser("create", help="create a session on a remote sandbox host and print its id")
    add_remote_options(c)
    c.add_argument(
        "--image", default="", help="image from the host's allow-list (default: its runtime image)"
    )
    c.add_argument("--memory-mb", type=int, default=0, help="memory limit in MiB (default: the host's)")
    c.add_argument("--cpus", type=float, default=0.0)
    c.add_argument("--idle-ttl", type=float, default=0.0, help="seconds idle before the host destroys it")
    c.add_argument("--max-lifetime", type=float, default=0.0, help="seconds after which it ends regardless")
    c.add_argument("--network", choices=("none", "gateway"), default="none")
    c.add_argument("--label", action="append", default=[], metavar="KEY=VALUE")
    c.add_argument("--json", action="store_true", help="print the session as JSON")
    c.set_defaults(func=run_create)

    cp = ssub.add_parser("cp", help="copy a file to or from a session (SESSION:PATH names the remote side)")
    add_remote_options(cp)
    cp.add_argument("src")
    cp.add_argument("dst")
    cp.set_defaults(func=run_cp)

    sh = ssub.add_parser(
        "shell",
        help="run commands typed line by line in a session (sh -c per line; not a terminal)",
    )
    add_remote_options(sh)
    sh.add_argument("--session", default="", help="session id (default: a new one, destroyed at exit)")
    sh.add_argument("--timeout", type=float, default=600.0, help="seconds per command")
    sh.set_defaults(func=run_shell)

    ls = ssub.add_parser("ls", help="list this token's sessions on the hosts")
    add_remote_options(ls)
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=run_ls)

    rm = ssub.add_parser("rm", help="destroy sessions")
    add_remote_options(rm)
    rm.add_argument("session_ids", nargs="+")
    rm.set_defaults(func=run_rm)


def _where(args: argparse.Namespace):
    from controller.client.sessions import SessionEndpoints
    from controller.fleet.access import access_from_args

    return SessionEndpoints.from_access(access_from_args(args))


def _find(args: argparse.Namespace, session_id: str):
    """The session ``session_id`` of this token on any host of the endpoints.

    Raises:
        UnknownSession: no host has it (naming the hosts that could not be asked, and why).
    """
    from controller.client.sandbox_client import SandboxClient
    from controller.client.sessions import SandboxSession, client_sessions

    where = _where(args)
    unasked: list[str] = []
    for channel in where.channels():
        client = SandboxClient(channel)
        try:
            for info in client_sessions(client):
                if info.session_id == session_id:
                    return SandboxSession(client, info)
        except SkillOptError as exc:
            unasked.append(exc.message)
        client.close()
    why = f" ({len(unasked)} host(s) could not be asked: {'; '.join(unasked)})" if unasked else ""
    raise UnknownSession(f"no session {session_id!r} of this token on {', '.join(where.endpoints)}{why}")


def _session(args: argparse.Namespace):
    """The session ``--session`` names, or a new one (``_release`` destroys it again)."""
    from controller.client.sessions import SandboxSession

    return _find(args, args.session) if args.session else SandboxSession.create(_where(args))


def _release(args: argparse.Namespace, session) -> None:
    """Leave a named session running; destroy one this command made for itself."""
    if args.session:
        session.client.close()
    else:
        with contextlib.suppress(SkillOptError):
            session.destroy()


def _fail(command: str, exc: SkillOptError) -> int:
    print(f"skillopt sandbox {command}: {exc.message}", file=sys.stderr)
    return 2


def run_create(args: argparse.Namespace) -> int:
    from controller.client.sessions import SandboxSession

    try:
        labels = dict(_pair(label, "--label") for label in args.label)
        session = SandboxSession.create(
            _where(args),
            image=args.image,
            memory_bytes=args.memory_mb * 1024 * 1024,
            cpus=args.cpus,
            idle_ttl_s=args.idle_ttl,
            max_lifetime_s=args.max_lifetime,
            network=args.network,
            labels=labels,
        )
    except SkillOptError as exc:
        return _fail("create", exc)
    info = session.info
    if args.json:
        print(json.dumps(_info_dict(info, session.client.config.address)))
    else:
        print(f"{info.session_id} {session.client.config.address}")
    session.client.close()  # the session lives on until destroyed or idle for its TTL
    return 0


def run_remote_exec(args: argparse.Namespace) -> int:
    """``skillopt sandbox exec --endpoints ... [--session ID] -- PROGRAM ARGS...``."""
    argv = [args.file, *args.args]
    if argv and argv[0] == "--":
        argv = argv[1:]
    try:
        env = dict(_pair(e, "--env") for e in args.env)
        session = _session(args)
    except SkillOptError as exc:
        return _fail("exec", exc)
    try:
        result = session.exec(
            argv,
            input=sys.stdin.buffer.read() if args.stdin else None,
            cwd=args.cwd,
            env=env,
            timeout=args.timeout,
            user=args.user,
            on_output=_write_through,
        )
    except SkillOptError as exc:
        return _fail("exec", exc)
    finally:
        _release(args, session)
    if result.spawn_error:
        print(f"skillopt sandbox exec: {argv[0]}: {result.message} ({result.spawn_error})", file=sys.stderr)
    if result.timed_out:
        print(
            f"skillopt sandbox exec: timed out after {args.timeout:g} s (process tree killed)",
            file=sys.stderr,
        )
    return result.returncode if result.returncode >= 0 else 1


def run_cp(args: argparse.Namespace) -> int:
    try:
        if ":" in args.src and not Path(args.src).exists():
            session_id, _, path = args.src.partition(":")
            session = _find(args, session_id)
            data = session.read_file(path)
            session.client.close()
            Path(args.dst).write_bytes(data)
        elif ":" in args.dst:
            session_id, _, path = args.dst.partition(":")
            data = Path(args.src).read_bytes()
            session = _find(args, session_id)
            session.write_file(path, data)
            session.client.close()
        else:
            print("skillopt sandbox cp: name the remote side as SESSION:PATH", file=sys.stderr)
            return 2
    except SkillOptError as exc:
        return _fail("cp", exc)
    except OSError as exc:
        print(f"skillopt sandbox cp: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    return 0


def run_shell(args: argparse.Namespace) -> int:
    try:
        session = _session(args)
    except SkillOptError as exc:
        return _fail("shell", exc)
    interactive = sys.stdin.isatty()
    status = 0
    try:
        while True:
            if interactive:
                print(f"{session.id[:10]}$ ", end="", flush=True)
            line = sys.stdin.readline()
            if not line or line.strip() in ("exit", "logout"):
                break
            if not line.strip():
                continue
            result = session.exec(["sh", "-c", line], timeout=args.timeout, on_output=_write_through)
            status = result.returncode if result.returncode >= 0 else 1
            if result.timed_out:
                print(f"(timed out after {args.timeout:g} s)", file=sys.stderr)
    except SkillOptError as exc:
        return _fail("shell", exc)
    finally:
        _release(args, session)
    return status


def run_ls(args: argparse.Namespace) -> int:
    """List the sessions; exit 1 when a host could not be asked (its sessions are missing)."""
    from controller.client.sandbox_client import SandboxClient
    from controller.client.sessions import client_sessions

    rows, failed = [], 0
    try:
        channels = _where(args).channels()
        for channel in channels:
            with SandboxClient(channel) as client:
                try:
                    rows += [_info_dict(i, channel.address) for i in client_sessions(client)]
                except SkillOptError as exc:
                    failed += 1
                    print(f"skillopt sandbox ls: {exc.message}", file=sys.stderr)
    except SkillOptError as exc:
        return _fail("ls", exc)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for row in rows:
            labels = ",".join(f"{k}={v}" for k, v in row["labels"].items())
            print(
                f"{row['session_id']}  {row['address']}  {row['image']}  idle_ttl={row['idle_ttl_s']:g}s  {labels}"
            )
    if not channels:
        print(f"skillopt sandbox ls: no host behind {', '.join(_where(args).endpoints)}", file=sys.stderr)
        return 1
    if failed:
        what = (
            "no host could be asked"
            if failed == len(channels)
            else f"{failed} of {len(channels)} hosts could not be asked: the list is incomplete"
        )
        print(f"skillopt sandbox ls: {what} (see above)", file=sys.stderr)
        return 1
    return 0


def run_rm(args: argparse.Namespace) -> int:
    status = 0
    for session_id in args.session_ids:
        try:
            _find(args, session_id).destroy()
        except SkillOptError as exc:
            status = _fail("rm", exc)
    return status


def _info_dict(info, address: str) -> dict:
    return {
        "session_id": info.session_id,
        "address": address,
        "host": info.host,
        "image": info.image,
        "network": info.network,
        "labels": dict(info.labels),
        "idle_ttl_s": info.idle_ttl_s,
        "idle_expires_ns": info.idle_expires_ns,
        "max_expires_ns": info.max_expires_ns,
        "workdir": info.workdir,
        "user": info.user,
    }


def _pair(text: str, flag: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        from skillopt.errors import ConfigError

        raise ConfigError(f"{flag} takes KEY=VALUE, got {text!r}")
    return key, value


def _write_through(fd: int, data: bytes) -> None:
    stream = sys.stdout.buffer if fd == 1 else sys.stderr.buffer
    stream.write(data)
    stream.flush()
