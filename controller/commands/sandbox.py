"""``skillopt sandbox``: run code in hardened containers.

``sandbox exec FILE.py`` runs one Python file in a fresh local rollout container, with the same
runtime code as the sandbox service (``sandbox.runtime``): the same container defaults, the same
runner, the same trusted-side timeout and OOM detection. With ``--endpoints`` or ``--session``,
``sandbox exec -- PROGRAM ARGS`` runs a command in a session on a remote host instead; the other
session commands (create, cp, shell, ls, rm) are in :mod:`controller.commands.sandbox_sessions`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from controller.signals import unwinds_on_sigterm
from skillopt.errors import InfraError, SkillOptError
from skillopt.units import MiB

if TYPE_CHECKING:
    from sandbox.runtime.docker.runtime import DockerRuntime
    from sandbox.runtime.spec import ContainerSpec
    from skillopt.agents.sandbox import ExecOutcome, FileEntry, Sandbox

__all__ = ["register"]

_MAX_OUTPUT_FILE = 256 * MiB


def register(sub: argparse._SubParsersAction) -> None:
    from controller.commands.flags import add_deprecated_alias
    from controller.commands.sandbox_sessions import add_remote_options, register_remote

    p = sub.add_parser(
        "sandbox", help="run code in a hardened container: locally, or in sessions on remote sandbox hosts"
    )
    ssub = p.add_subparsers(dest="sandbox_command", metavar="SUBCOMMAND")
    ssub.required = True
    e = ssub.add_parser(
        "exec",
        help="run FILE.py in a fresh local rollout container, or (--endpoints) a command in a remote session",
        description=(
            "Run FILE.py in a fresh rollout container on the local Docker engine with the default "
            "hardening (no network, read-only root, non-root, no capabilities, pids/memory/cpu limits). "
            "IN.xlsx is placed in the workspace as input.xlsx. Prints a JSON result.\n\n"
            "`skillopt sandbox exec -- PROGRAM ARGS...` runs a command in a session on a remote sandbox "
            "host instead: with --endpoints or --session, or with $SKILLOPT_ENDPOINTS set (a FILE.py "
            "that exists here, with no arguments, still runs locally unless --endpoints or --session "
            "is given). Examples:\n"
            "  skillopt sandbox exec solution.py --input in.xlsx\n"
            "  export SKILLOPT_ENDPOINTS=sandbox-1:50051 SKILLOPT_TOKEN_FILE=token\n"
            "  skillopt sandbox exec -- python3 -c 'print(1)'"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    e.add_argument("file", help="the Python file to run (remote: the program)")
    e.add_argument("args", nargs="*", help="remote only: the program's arguments (after --)")
    e.add_argument("--input", help="an .xlsx file placed in the workspace as input.xlsx")
    e.add_argument("--timeout", type=float, default=120.0, help="seconds before the process tree is killed")
    e.add_argument("--memory-mb", type=int, default=1024, help="memory limit in MiB (memory+swap)")
    add_deprecated_alias(e, "--memory", new_flag="--memory-mb", dest="memory_mb", type=int)
    e.add_argument("--cpus", type=float, default=1.0)
    e.add_argument("--pids", type=int, default=256, help="process/thread limit")
    e.add_argument("--output-bytes", type=int, default=64 * 1024, help="stdout/stderr tail kept")
    e.add_argument("--image", default="skillopt-runtime:latest")
    e.add_argument("--runtime", default="", help="OCI runtime, e.g. runsc")
    e.add_argument(
        "--out",
        metavar="DIR",
        help="copy the regular files the program produced here (links are never followed)",
    )
    add_deprecated_alias(e, "--out-dir", new_flag="--out", dest="out")
    e.add_argument(
        "--json", action="store_true", help="print the result as one JSON object (the default output)"
    )
    remote = e.add_argument_group(
        "remote sessions",
        "with --endpoints, --session or $SKILLOPT_ENDPOINTS: run `-- PROGRAM ARGS...` in a session on a "
        "sandbox host "
        "(a new session, destroyed afterwards, unless --session names one); output streams as it comes "
        "and the exit status is the command's",
    )
    add_remote_options(remote)
    remote.add_argument("--session", default="", help="id of the session to run in")
    remote.add_argument("--cwd", default="", help="working directory (default the session's workdir)")
    remote.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    remote.add_argument("--user", default="", help="only the session's own user is supported")
    remote.add_argument("--stdin", action="store_true", help="send this process's stdin to the command")
    e.set_defaults(func=run_exec)
    register_remote(ssub)


def _safe_target(out_dir: Path, rel: str) -> Path | None:
    from skillopt.files import check_relative_name

    try:
        name = check_relative_name(rel)
    except SkillOptError:
        return None
    target = (out_dir / name).resolve()
    return target if target.is_relative_to(out_dir.resolve()) else None


@unwinds_on_sigterm
def run_exec(args: argparse.Namespace) -> int:
    if _remote(args):
        from controller.commands.sandbox_sessions import run_remote_exec

        return run_remote_exec(args)
    if args.args:
        print(
            "skillopt sandbox exec: a PROGRAM with arguments runs in a remote session: give --endpoints "
            "HOST:PORT (or set $SKILLOPT_ENDPOINTS); locally, exec runs one FILE.py",
            file=sys.stderr,
        )
        return 2
    from sandbox.runtime.lease import LeasedSandbox
    from skillopt.logs import configure_logging

    configure_logging(json=True, level="warning")
    src = Path(args.file)
    try:
        code = src.read_bytes()
        data = Path(args.input).read_bytes() if args.input else None
    except OSError as exc:
        print(f"skillopt sandbox exec: cannot read {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    script = src.name if src.name.endswith(".py") else "main.py"
    result: dict = {
        "exit_code": None,
        "stdout_tail": "",
        "stderr_tail": "",
        "infra_error": None,
        "duration_s": 0.0,
        "outputs": [],
    }
    state = Path(tempfile.mkdtemp(prefix="skillopt-exec-", dir=_state_root()))
    t0 = time.monotonic()
    runtime = None
    try:
        runtime, spec = _local_runtime(args, state)
        handle = runtime.create(spec)
        try:
            box = LeasedSandbox(runtime, handle, output_limit_bytes=args.output_bytes)
            inputs = {script}
            box.write_file(script, code)
            if data is not None:
                box.write_file("input.xlsx", data)
                inputs.add("input.xlsx")
            outcome = box.run_python(script, timeout_s=args.timeout)
            result.update(_outcome_fields(outcome, args), image_digest=handle.image_digest)
            produced = [f for f in box.list_files() if f.path not in inputs]
            for entry in _copy_outputs(box, produced, args.out):  # those before a failure kept
                result["outputs"].append(entry)
        finally:
            runtime.destroy(handle)
    except InfraError as exc:
        result["infra_error"] = {"kind": exc.kind.value, "message": exc.message}
    except SkillOptError as exc:
        print(f"skillopt sandbox exec: {exc.message}", file=sys.stderr)
        return 2
    finally:
        if runtime is not None:
            runtime.close()
        shutil.rmtree(state, ignore_errors=True)
    if not result["duration_s"]:
        result["duration_s"] = round(time.monotonic() - t0, 4)
    print(json.dumps(result))
    return 0


def _local_runtime(args: argparse.Namespace, state: Path) -> tuple[DockerRuntime, ContainerSpec]:
    """A runtime on the local engine for one ``exec`` (no pool, its state in ``state``) and the
    container's spec from the flags.

    Raises:
        ConfigError: a flag's value is out of bounds.
        SandboxUnavailable: the Docker engine cannot be reached.
    """
    from sandbox.runtime.docker.runtime import DockerRuntime
    from sandbox.runtime.spec import ContainerSpec, RuntimeConfig

    spec = ContainerSpec(
        image=args.image,
        memory_bytes=args.memory_mb * MiB,
        cpus=args.cpus,
        pids_limit=args.pids,
        runtime=args.runtime,
    )
    runtime = DockerRuntime(
        RuntimeConfig(
            host_id=f"cli-{socket.gethostname()[:20]}-{uuid.uuid4().hex[:8]}",
            state_dir=str(state),
            pool_size=0,
            # Any reaper removes this container soon after its run could possibly end.
            max_container_lifetime_s=args.timeout + 300.0,
        )
    )
    return runtime, spec


def _outcome_fields(outcome: ExecOutcome, args: argparse.Namespace) -> dict:
    """The JSON result's fields for the program's outcome (a kill by memory or time is an
    ``infra_error``)."""
    fields: dict = {
        "exit_code": outcome.exit_code,
        "signal": outcome.signal,
        "stdout_tail": outcome.stdout_tail,
        "stderr_tail": outcome.stderr_tail,
        "stdout_bytes": outcome.stdout_bytes,
        "stderr_bytes": outcome.stderr_bytes,
        "duration_s": round(outcome.duration_s, 4),
    }
    if outcome.oom_killed:
        fields["infra_error"] = {
            "kind": "oom_killed",
            "message": f"killed: memory limit {args.memory_mb} MiB exceeded",
        }
    elif outcome.timed_out:
        fields["infra_error"] = {"kind": "timeout", "message": f"killed after {args.timeout:g} s"}
    return fields


def _copy_outputs(box: Sandbox, produced: list[FileEntry], out: str | None) -> Iterator[dict]:
    """The JSON result's ``outputs``, one by one: each produced file, copied below ``out`` when
    given (one whose name would land outside it, or that is no regular file by now, is listed
    only).

    Raises:
        OutputLimitExceeded: a file is larger than the copy's limit.
    """
    from skillopt.agents.sandbox import read_output

    out_dir = Path(out) if out else None
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
    for f in produced:
        entry = {"path": f.path, "size_bytes": f.size_bytes}
        if out_dir is not None:
            target = _safe_target(out_dir, f.path)
            content = read_output(box, f.path, max_bytes=_MAX_OUTPUT_FILE) if target else None
            if target is not None and content is not None:
                target.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(content)
                entry["copied_to"] = str(target)
        yield entry


def _remote(args: argparse.Namespace) -> bool:
    """A remote session's command, not a local FILE.py: ``--endpoints``/``--session`` (or a
    fleet flag) say so; with only ``$SKILLOPT_ENDPOINTS`` set, a command with arguments or one
    that is not a file here (``exec -- python3 -c ...``) is remote, a lone existing file local."""
    from controller.fleet.access import ENV_ENDPOINTS

    if args.endpoints or args.session:
        return True
    if not os.environ.get(ENV_ENDPOINTS, "").strip():
        return False
    return bool(args.args) or not Path(args.file).is_file()


def _state_root() -> str:
    root = Path("/var/lib/skillopt/cli") if os.geteuid() == 0 else Path.home() / ".cache" / "skillopt" / "cli"
    root.mkdir(parents=True, exist_ok=True)
    return str(root)
