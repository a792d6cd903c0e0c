"""The embedded default: a local sandbox service started for one run and stopped after it.

Same code path as a remote fleet: ``skillopt serve`` runs as a subprocess on a free loopback
port with a fresh token, and the controller talks gRPC to it. Readiness is the service's own
"listening on port N" line on stdout, not a sleep.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from skillopt.errors import SandboxUnavailable

__all__ = ["EmbeddedSandbox", "embedded_sandbox", "reap_dead_embedded", "spawn_service", "wait_listening"]

_STATE_PREFIX = "so-emb-"
# A state dir whose service never took its lock (it did not start) is left alone this long:
# its controller may still be starting it.
_UNSTARTED_GRACE_S = 600.0

log = structlog.get_logger("skillopt.controller.embedded")


@dataclass(frozen=True)
class EmbeddedSandbox:
    """A running embedded service, as the controller reaches it."""

    address: str
    token: str
    host_id: str
    pid: int
    log_path: Path


@contextlib.contextmanager
def embedded_sandbox(
    *,
    capacity: int,
    pool_size: int | None,
    providers: Sequence[str] = (),
    providers_file: str = "",
    image: str = "skillopt-runtime:latest",
    runtime: str = "",
    memory_mb: int = 1024,
    cpus: float = 1.0,
    log_dir: Path | None = None,
    start_timeout_s: float = 120.0,
    cache_dir: str = "",
) -> Iterator[EmbeddedSandbox]:
    """Start a local sandbox service; stop it (draining) when the block ends.

    Args:
        pool_size: idle warm containers; ``None``: the service's default for its runtime
            (``skillopt serve --pool-size``).
        providers: ``name=kind,base_url=...`` profile specs for the service (the service, not
            the controller, calls target models).
        log_dir: where the service's JSON log goes (``sandbox.log``).

    Raises:
        SandboxUnavailable: the service did not come up (its log tail is in the message).
    """
    reap_dead_embedded()
    state = _State.create(log_dir)
    args = _serve_args(state, capacity=capacity, image=image, memory_mb=memory_mb, cpus=cpus)
    if pool_size is not None:
        args += ["--pool-size", str(pool_size)]
    if runtime:
        args += ["--runtime", runtime]
    if cache_dir:
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
        args += ["--gateway-cache-dir", str(Path(cache_dir).resolve())]
    if providers_file:
        args += ["--providers", providers_file]
    for spec in providers:
        args += ["--provider", spec]
    log_fh = open(state.log_path, "ab")  # noqa: SIM115 - lives as long as the process
    # stdin is never written: its EOF tells the service we are gone (--exit-with-parent); its
    # own session: a Ctrl-C in the terminal reaches us, and we stop it in order.
    proc = spawn_service(args, stderr=log_fh, stdin=subprocess.PIPE, new_session=True)
    try:
        port = wait_listening(proc, start_timeout_s, state.log_path)
        address = f"127.0.0.1:{port}"
        log.info("embedded.started", address=address, host=state.host_id, pid=proc.pid)
        yield EmbeddedSandbox(
            address=address, token=state.token, host_id=state.host_id, pid=proc.pid, log_path=state.log_path
        )
    finally:
        if proc.poll() is None:
            with contextlib.suppress(OSError):
                if proc.stdin is not None:
                    proc.stdin.close()
        stop_service(proc)
        log_fh.close()
        shutil.rmtree(state.dir, ignore_errors=True)
        log.info("embedded.stopped", host=state.host_id, exit_code=proc.returncode)


@dataclass(frozen=True)
class _State:
    """What one embedded service is given before it starts: its own state directory under
    ``/tmp`` (``so-emb-*``), a fresh token (in a file only we can read), a fresh host id (also
    written there, so :func:`reap_dead_embedded` can tell whose leftovers these are) and where
    its log goes."""

    dir: Path
    token: str
    token_file: Path
    host_id: str
    log_path: Path

    @classmethod
    def create(cls, log_dir: Path | None) -> _State:
        state = Path(tempfile.mkdtemp(prefix=_STATE_PREFIX, dir=_TMP))
        token = secrets.token_urlsafe(32)
        token_file = state / "token"
        token_file.write_text(token)
        token_file.chmod(0o600)
        host_id = f"embedded-{secrets.token_hex(4)}"
        (state / "host_id").write_text(host_id + "\n")
        log_path = (log_dir or state) / "sandbox.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        return cls(dir=state, token=token, token_file=token_file, host_id=host_id, log_path=log_path)


def _serve_args(state: _State, *, capacity: int, image: str, memory_mb: int, cpus: float) -> list[str]:
    """The ``skillopt serve`` flags every embedded service gets: loopback on a free port, its
    token, host id and state directory, a short drain, and an exit when this process is gone."""
    return [
        "--listen",
        "127.0.0.1:0",
        "--token-file",
        str(state.token_file),
        "--host-id",
        state.host_id,
        "--state-dir",
        str(state.dir / "state"),
        "--capacity",
        str(capacity),
        "--image",
        image,
        "--memory-mb",
        str(memory_mb),
        "--cpus",
        str(cpus),
        "--drain-grace",
        "10",
        "--exit-with-parent",
    ]


_TMP = "/tmp"


def reap_dead_embedded(tmp_dir: str = _TMP) -> list[str]:
    """Remove what dead embedded sandboxes left behind: their containers, exec-agent network and
    firewall rules, and their state dir with its token.

    Every embedded run has a fresh host id, so a service's own start-up reaper never sees what
    an earlier instance left when it was killed together with its controller (``kill -9`` of
    both: nobody drained). An instance is dead when nobody holds the flock on its state dir's
    ``lock`` (the service holds it while it lives). Returns the host ids reaped.
    """
    reaped: list[str] = []
    for d in sorted(Path(tmp_dir).glob(f"{_STATE_PREFIX}*")):
        host_file, lock = d / "host_id", d / "state" / "lock"
        try:
            host_id = host_file.read_text().strip()
        except OSError:
            continue  # not ours (or still being created)
        if not lock.exists():
            if _age_s(d) < _UNSTARTED_GRACE_S:
                continue
            fd = None
        else:
            try:
                fd = os.open(lock, os.O_RDWR)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue  # alive
        try:
            _reap_host(host_id)
            shutil.rmtree(d, ignore_errors=True)
            reaped.append(host_id)
            log.info("embedded.reaped_dead_instance", host=host_id, dir=str(d))
        finally:
            if fd is not None:
                os.close(fd)
    return reaped


def _age_s(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return 0.0


def _reap_host(host_id: str) -> None:
    from sandbox.runtime.docker.reaper import sweep_host

    try:
        sweep_host(host_id)
    except SandboxUnavailable as exc:
        log.warning("embedded.reap_skipped", host=host_id, error=exc.message)


def spawn_service(
    serve_args: Sequence[str],
    *,
    stderr: Any = subprocess.DEVNULL,
    stdin: Any = subprocess.DEVNULL,
    new_session: bool = False,
    env: dict[str, str] | None = None,
) -> subprocess.Popen:
    """Start ``skillopt serve <serve_args>`` (this interpreter, the project root as cwd);
    ``env``: variables set on top of this process's environment (e.g. a private ``TMPDIR``)."""
    return subprocess.Popen(
        [sys.executable, "-m", "controller.cli", "serve", *serve_args],
        stdout=subprocess.PIPE,
        stderr=stderr,
        stdin=stdin,
        cwd=Path(__file__).resolve().parents[1],
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        start_new_session=new_session,
    )


def stop_service(proc: subprocess.Popen, timeout_s: float = 60) -> None:
    """End a spawned service: SIGTERM (it drains and exits), SIGKILL if it has not exited
    within ``timeout_s``. Nothing to do when it has exited already."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def wait_listening(proc: subprocess.Popen, timeout_s: float, log_path: Path | None = None) -> int:
    """The port a spawned service listens on, from its "listening on port N" line (no polling).

    Raises:
        SandboxUnavailable: the service exited or said nothing in time (with its log tail).
    """
    stdout = proc.stdout
    assert stdout is not None
    box: dict[str, str] = {}

    def read() -> None:
        raw = stdout.readline()
        box["line"] = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout_s)
    line = box.get("line", "")
    if "listening on port" not in line:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        tail = log_path.read_text(errors="replace")[-3000:] if log_path and log_path.exists() else ""
        raise SandboxUnavailable(
            f"the sandbox service did not start (exit {proc.returncode}). Log tail:\n{tail}\n"
            "Is the Docker engine running and the runtime image built? Run: bash scripts/setup.sh"
        )
    # Keep draining stdout so the service never blocks on a full pipe.
    threading.Thread(target=stdout.read, daemon=True).start()
    return int(line.strip().rsplit(" ", 1)[1])
