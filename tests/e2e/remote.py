"""Shared by the per-env end-to-end tests: the CLI as a real process, and a real sandbox
service process whose provider profile points at the simulation server."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import yaml

from controller.embedded import spawn_service, wait_listening
from skillopt.testing.simulation import SIM_OPTIMIZER, SIM_TARGET, simulation_server

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """``skillopt ARGS`` in the repo, keyless (no provider key reaches it)."""
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "OPENAI_API_KEY": "", "PYTHONUNBUFFERED": "1"},
    )


@contextlib.contextmanager
def remote_service(name: str, *, pool_size: int) -> Iterator[list[str]]:
    """A sandbox service process on a real socket (host id ``name-…``); yields the CLI flags
    that train and evaluate over it with the simulated models."""
    tmp = Path(f"/tmp/so-{name}-{uuid.uuid4().hex[:6]}")
    tmp.mkdir()
    (tmp / "token").write_text(uuid.uuid4().hex)
    with simulation_server() as sim:
        providers = tmp / "providers.yaml"
        providers.write_text(
            yaml.safe_dump({"providers": {"sim": {"kind": "openai_compatible", "base_url": sim.base_url}}})
        )
        proc = spawn_service(
            [
                "--listen", "127.0.0.1:0",
                "--token-file", str(tmp / "token"),
                "--host-id", f"{name}-{uuid.uuid4().hex[:4]}",
                "--state-dir", str(tmp / "state"),
                "--capacity", "4",
                "--pool-size", str(pool_size),
                "--provider", f"sim=openai_compatible,base_url={sim.base_url},max_retries=0",
            ]
        )  # fmt: skip
        try:
            port = wait_listening(proc, 120)
            yield [
                "--endpoints", f"127.0.0.1:{port}",
                "--set", "run.simulate=off",
                "--set", "env.allow_sample=true",  # real (scripted) providers on the vendored samples
                "--set", f"model.providers_file={providers}",
                "--set", "model.optimizer_provider=sim",
                "--set", "model.target_provider=sim",
                "--set", f"model.optimizer={SIM_OPTIMIZER}",
                "--set", f"model.target={SIM_TARGET}",
                "--set", f"sandbox.token_file={tmp / 'token'}",
            ]  # fmt: skip
        finally:
            proc.terminate()
            proc.wait(60)
            shutil.rmtree(tmp, ignore_errors=True)
