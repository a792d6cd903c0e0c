"""The service as a separate process: kill -9 leaves nothing behind after a restart; SIGTERM
drains; the CLI's contracts (``serve``, ``sandbox exec``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from controller.client.sandbox_client import ChannelConfig, SandboxClient
from controller.embedded import spawn_service, wait_listening
from sandbox.runtime.docker.engine import list_containers
from sandbox.runtime.labels import LABEL_HOST
from skillopt.errors import SkillOptError
from skillopt.types import Limits
from tests.sandbox.conftest import fenced, request_for

REPO = Path(__file__).resolve().parents[2]


class ServiceProcess:
    """``skillopt serve`` in a subprocess; readiness is its "listening on port N" line."""

    def __init__(self, state: Path, host_id: str, token_file: Path, model_url: str) -> None:
        self.proc = spawn_service(
            [
                "--listen", "127.0.0.1:0",
                "--token-file", str(token_file),
                "--host-id", host_id,
                "--state-dir", str(state),
                "--capacity", "2",
                "--pool-size", "1",
                "--provider", f"scripted=openai_compatible,base_url={model_url}",
                "--drain-grace", "3",
            ]
        )  # fmt: skip
        self.port = wait_listening(self.proc, 120)

    def client(self, token: str) -> SandboxClient:
        return SandboxClient(ChannelConfig(address=f"127.0.0.1:{self.port}", token=token))


def _containers(docker_client, host_id: str) -> list:
    return list_containers(docker_client, f"{LABEL_HOST}={host_id}")


def test_kill_9_then_restart_leaves_no_container_behind(docker_client, scripted, scripts, sample, short_tmp):
    host_id = f"test-kill-{uuid.uuid4().hex[:6]}"
    token = uuid.uuid4().hex
    token_file = short_tmp / "token"
    token_file.write_text(token)
    state = short_tmp / "state"
    svc = ServiceProcess(state, host_id, token_file, scripted.base_url)
    client = svc.client(token)
    scripts.scripts[sample.task("66-24").instruction[:120]] = [fenced("while True:\n    pass\n")]
    executing = threading.Event()
    done = threading.Event()

    def run():
        try:
            client.run(
                request_for(sample, "66-24", limits=Limits(wall_time_s=600, exec_timeout_s=600)),
                timeout_s=600,
                on_event=lambda e: e.phase == "exec" and executing.set(),
            )
        except SkillOptError:
            pass
        finally:
            executing.set()
            done.set()

    threading.Thread(target=run, daemon=True).start()
    assert executing.wait(120)
    before = {c.id for c in _containers(docker_client, host_id)}
    assert before  # the busy container (plus the warm pool)
    os.kill(svc.proc.pid, signal.SIGKILL)
    svc.proc.wait(30)
    assert done.wait(60)  # the client saw the stream break
    client.close()

    again = ServiceProcess(state, host_id, token_file, scripted.base_url)
    try:
        left = {c.id for c in _containers(docker_client, host_id)}
        # None of the killed instance's containers survived the restart (only the new pool).
        assert not before & left
        with again.client(token) as c2:
            assert c2.describe().running == 0
    finally:
        again.proc.send_signal(signal.SIGTERM)
        assert again.proc.wait(60) == 0
    assert _containers(docker_client, host_id) == []  # a clean stop removes even the pool
    assert not list((state / "c").iterdir())


def test_serve_refuses_a_public_address_without_a_token():
    out = subprocess.run(
        [sys.executable, "-m", "controller.cli", "serve", "--listen", "0.0.0.0:0"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert "without a token" in out.stderr or "every interface" in out.stderr


def test_sandbox_exec_cli_contract(docker_client, sample, short_tmp):
    script = short_tmp / "prog.py"
    script.write_text(
        "import openpyxl, os\n"
        "wb = openpyxl.load_workbook('input.xlsx')\n"
        "wb.active['A1'] = 'edited'\n"
        "os.makedirs('out', exist_ok=True)\n"
        "wb.save('out/result.xlsx')\n"
        "os.symlink('/etc/passwd', 'leak')\n"
        "print('ok')\n"
    )
    task = sample.task("32255")
    input_xlsx = sample.root / "spreadsheet" / "32255" / "1_32255_input.xlsx"
    assert input_xlsx.exists(), task
    out_dir = short_tmp / "out"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "controller.cli",
            "sandbox",
            "exec",
            str(script),
            "--input",
            str(input_xlsx),
            "--timeout",
            "60",
            "--out",
            str(out_dir),
            "--json",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert set(data) >= {"exit_code", "stdout_tail", "stderr_tail", "infra_error", "duration_s", "outputs"}
    assert data["exit_code"] == 0 and data["stdout_tail"] == "ok\n" and data["infra_error"] is None
    assert [o["path"] for o in data["outputs"]] == ["out/result.xlsx"]
    import openpyxl

    assert openpyxl.load_workbook(out_dir / "out" / "result.xlsx").active["A1"].value == "edited"
    assert not (out_dir / "leak").exists()

    bomb = short_tmp / "bomb.py"
    bomb.write_text("x = []\nwhile True:\n    x.append(bytearray(16 * 2**20))\n")
    res = subprocess.run(
        [sys.executable, "-m", "controller.cli", "sandbox", "exec", str(bomb), "--memory", "128", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert json.loads(res.stdout)["infra_error"]["kind"] == "oom_killed"

    loop = short_tmp / "loop.py"
    loop.write_text("while True:\n    pass\n")
    res = subprocess.run(
        [sys.executable, "-m", "controller.cli", "sandbox", "exec", str(loop), "--timeout", "2", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert json.loads(res.stdout)["infra_error"]["kind"] == "timeout"

    res = subprocess.run(
        [sys.executable, "-m", "controller.cli", "sandbox", "exec", str(short_tmp / "missing.py"), "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2 and "cannot read" in res.stderr


# SIGHUP too: a closed terminal or ssh session drains the host like SIGTERM (unhandled, it
# killed the host at once, failing its rollouts and leaving their containers: bench_soak).
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_drains_in_flight_rollouts_and_refuses_new_ones(
    docker_client, scripted, scripts, sample, short_tmp, sig
):
    from skillopt.errors import Draining, SandboxUnavailable
    from skillopt.testing.fixtures.spreadsheetbench import solution_code

    host_id = f"test-drain-{uuid.uuid4().hex[:6]}"
    token_file = short_tmp / "token"
    token_file.write_text("t0ken")
    svc = ServiceProcess(short_tmp / "state", host_id, token_file, scripted.base_url)
    client = svc.client("t0ken")
    # A rollout whose program takes a moment (its workload, not a synchronisation).
    slow = "import time\ntime.sleep(1.5)\n" + solution_code("416-15")
    scripts.scripts[sample.task("416-15").instruction[:120]] = [fenced(slow)]
    executing = threading.Event()
    box: dict = {}

    def run():
        try:
            box["row"] = client.run(
                request_for(sample, "416-15"),
                timeout_s=120,
                on_event=lambda e: e.phase == "exec" and executing.set(),
            )
        except SkillOptError as exc:
            box["error"] = exc
        finally:
            executing.set()

    t = threading.Thread(target=run)
    t.start()
    assert executing.wait(120)
    svc.proc.send_signal(sig)
    # The signal is handled asynchronously: wait for the health status to flip (an event).
    assert client.wait_until_not_serving(timeout_s=60)
    # Draining: a new rollout is refused with UNAVAILABLE (Draining by the status's typed
    # detail; plain gRPC UNAVAILABLE if the in-flight one finished and the server already stopped) ...
    with pytest.raises((Draining, SandboxUnavailable)):
        client.run(request_for(sample, "32255"), timeout_s=30)
    # ... while the one in flight completes with its real result.
    t.join(120)
    assert "row" in box, box
    assert box["row"].hard == 1.0 and box["row"].infra_error is None
    client.close()
    assert svc.proc.wait(60) == 0
    assert _containers(docker_client, host_id) == []


def test_services_on_one_machine_get_different_default_host_ids(docker_client, scripted, short_tmp):
    """Without --host-id, two services on one machine stamp different ids (the machine's name
    and the port, or a random suffix with port 0), and Describe, rows and fleet status agree."""
    import socket

    from sandbox.server.host_config import default_host_id

    name = socket.gethostname()
    assert default_host_id("0.0.0.0:50051") == f"{name}-50051"
    random_a, random_b = default_host_id("127.0.0.1:0"), default_host_id("127.0.0.1:0")
    assert random_a != random_b and random_a.startswith(f"{name}-")
    token = uuid.uuid4().hex
    (short_tmp / "token").write_text(token)
    procs = [
        spawn_service(
            [
                "--listen",
                "127.0.0.1:0",
                "--token-file",
                str(short_tmp / "token"),
                "--state-dir",
                str(short_tmp / f"s{i}"),
                "--capacity",
                "1",
                "--pool-size",
                "0",
                "--provider",
                f"scripted=openai_compatible,base_url={scripted.base_url}",
            ]
        )
        for i in range(2)
    ]
    try:
        ports = [wait_listening(p, 120) for p in procs]
        ids = [
            SandboxClient(ChannelConfig(address=f"127.0.0.1:{port}", token=token)).describe().host
            for port in ports
        ]
        assert ids[0] != ids[1] and all(i.startswith(f"{name}-") for i in ids)
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(timeout=60)
