"""An Inspect AI eval on our fleet: ``inspect eval`` (the real CLI, model ``mockllm``) runs each
sample in its own session on a real ``serve`` host through the ``skillopt`` provider found by
its package entry point; every sample scores, and no session is left afterwards, also when a
sample is cancelled mid-command by its time limit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sandbox.conftest import start_service

TASKS = Path(__file__).parent / "inspect_tasks" / "sandbox_sums.py"


@pytest.fixture(scope="module")
def host(docker_client, scripted):
    yield from start_service(scripted, capacity=2, pool_size=2)


def inspect_eval(host, tmp_path: Path, task: str) -> dict:
    token_file = tmp_path / "token"
    token_file.write_text(host.token)
    env = {
        **os.environ,
        "SKILLOPT_ENDPOINTS": host.running.address,
        "SKILLOPT_TOKEN_FILE": str(token_file),
        "INSPECT_LOG_DIR": str(tmp_path / "logs"),
    }
    proc = subprocess.run(
        [
            str(Path(sys.executable).with_name("inspect")),
            "eval",
            f"{TASKS}@{task}",
            "--model",
            "mockllm/model",
            "--display",
            "plain",
            "--log-format",
            "json",
            "--max-samples",
            "4",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (log,) = (tmp_path / "logs").glob("*.json")
    return json.loads(log.read_text())


def test_inspect_eval_runs_every_sample_in_its_own_session(host, tmp_path):
    manager = host.running.servicer.sessions
    created_before = manager.created_total
    log = inspect_eval(host, tmp_path, "sums")
    assert log["status"] == "success"
    scores = [s["scores"]["answer_file"]["value"] for s in log["samples"]]
    assert scores == ["C", "C", "C", "C"]
    assert manager.created_total - created_before == 4
    assert manager.count() == 0 and host.client.describe().sessions == 0


def test_a_sample_cancelled_mid_command_leaves_no_session(host, tmp_path):
    manager = host.running.servicer.sessions
    created_before = manager.created_total
    log = inspect_eval(host, tmp_path, "stuck")
    (sample,) = log["samples"]
    assert sample.get("limit", {}).get("type") == "time"
    assert manager.created_total - created_before == 1
    assert manager.count() == 0
