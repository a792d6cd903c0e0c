"""The embedded default: a local sandbox service started for one run and stopped after it.

Same code path as a remote fleet: ``skillopt serve`` runs as a subprocess on a free loopback
port with a fresh token, and the controller talks gRPC to it. Readiness is the service's own
"listening on port N" line on stdout, not a sleep.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from skillopt.errors import SandboxUnavailable

__all__ = ["EmbeddedSandbox", "embedded_sandbox", "spawn_service", "wait_listening"]

log = structlog.get_logger("skillopt.controller.embedded")


@dataclass(frozen=True)
class EmbeddedSandbox:
    address: str
    token: str
    host_id: str
    pid: int
    log_path: Path


@contextlib.contextmanager
def embedded_sandbox(
    *,
    capacity: int,
    pool_size: int,
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
        providers: ``name=kind,base_url=...`` profile specs for the service (the service, not
            the controller, calls target models).
        log_dir: where the service's JSON log goes (``sandbox.log``).

    Raises:
        SandboxUnavailable: the service did not come up (its log tail is in the message).
    """
    state = Path(tempfile.mkdtemp(prefix="so-emb-", dir="/tmp"))
    token = secrets.token_urlsafe(32)
    token_file = state / "token"
    token_file.write_text(token)
    token_file.chmod(0o600)
    host_id = f"embedded-{secrets.token_hex(4)}"
    log_path = (log_dir or state) / "sandbox.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    cmd = [
        "--listen",
        "127.0.0.1:0",
        "--token-file",
        str(token_file),
        "--host-id",
        host_id,
        "--state-dir",
        str(state / "state"),
        "--capacity",
        str(capacity),
        "--pool-size",
        str(pool_size),
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
    if runtime:
        cmd += ["--runtime", runtime]
    if cache_dir:
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
        cmd += ["--gateway-cache-dir", str(Path(cache_dir).resolve())]
    if providers_file:
        cmd += ["--providers", providers_file]
    for spec in providers:
        cmd += ["--provider", spec]
    log_fh = open(log_path, "ab")  # noqa: SIM115 - lives as long as the process
    # stdin is never written: its EOF tells the service we are gone (--exit-with-parent); its
    # own session: a Ctrl-C in the terminal reaches us, and we stop it in order.
    proc = spawn_service(cmd, stderr=log_fh, stdin=subprocess.PIPE, new_session=True)
    try:
        port = wait_listening(proc, start_timeout_s, log_path)
        log.info("embedded.started", address=f"127.0.0.1:{port}", host=host_id, pid=proc.pid)
        yield EmbeddedSandbox(
            address=f"127.0.0.1:{port}", token=token, host_id=host_id, pid=proc.pid, log_path=log_path
        )
    finally:
        if proc.poll() is None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        log_fh.close()
        shutil.rmtree(state, ignore_errors=True)
        log.info("embedded.stopped", host=host_id, exit_code=proc.returncode)


def spawn_service(
    serve_args: Sequence[str],
    *,
    stderr: Any = subprocess.DEVNULL,
    stdin: Any = subprocess.DEVNULL,
    new_session: bool = False,
) -> subprocess.Popen:
    """Start ``skillopt serve <serve_args>`` (this interpreter, the project root as cwd)."""
    return subprocess.Popen(
        [sys.executable, "-m", "controller.cli", "serve", *serve_args],
        stdout=subprocess.PIPE,
        stderr=stderr,
        stdin=stdin,
        cwd=Path(__file__).resolve().parents[1],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        start_new_session=new_session,
    )


def wait_listening(proc: subprocess.Popen, timeout_s: float, log_path: Path | None = None) -> int:
    """The port a spawned service listens on, from its "listening on port N" line (no polling).

    Raises:
        SandboxUnavailable: the service exited or said nothing in time (with its log tail).
    """
    assert proc.stdout is not None
    box: dict[str, str] = {}

    def read() -> None:
        raw = proc.stdout.readline()
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
    threading.Thread(target=lambda: proc.stdout.read(), daemon=True).start()
    return int(line.strip().rsplit(" ", 1)[1])
