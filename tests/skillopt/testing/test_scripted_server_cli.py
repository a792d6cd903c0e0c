"""``python -m skillopt.testing.scripted_server`` as a real process."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

SCENARIO = """
rules:
  - name: cli
    match: {contains: ping}
    reply: pong
"""


def launch(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    """Start the server and read the base URL it prints (no sleeping, no polling)."""
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(SCENARIO)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "skillopt.testing.scripted_server",
            "--scenario",
            str(scenario),
            "--port",
            "0",
            "--port-file",
            str(tmp_path / "port"),
            "--log",
            str(tmp_path / "log.jsonl"),
            *extra,
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()  # blocks until bound (the port file is written first)
    if not line:
        proc.kill()
        pytest.fail(f"server printed no URL; stderr: {proc.communicate()[1]}")
    return proc, line


@pytest.fixture
def running(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    proc, url = launch(tmp_path)
    try:
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_cli_serves_and_exits_cleanly_on_signal(tmp_path: Path, sig: signal.Signals) -> None:
    proc, url = launch(tmp_path)
    try:
        port = int((tmp_path / "port").read_text())
        assert url == f"http://127.0.0.1:{port}/v1"
        with openai.OpenAI(base_url=url, api_key="sk-cli-secret", max_retries=0) as c:
            r = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "ping"}])
        assert r.choices[0].message.content == "pong"
        proc.send_signal(sig)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    (line,) = (tmp_path / "log.jsonl").read_text().splitlines()
    rec = json.loads(line)
    assert (rec["api"], rec["rule"], rec["status"]) == ("chat", "cli", 200)
    assert "sk-cli-secret" not in line


def test_cli_rejects_a_bad_scenario(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules:\n  - match: {nope: 1}\n    reply: x\n")
    proc = subprocess.run(
        [sys.executable, "-m", "skillopt.testing.scripted_server", "--scenario", str(bad)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "unknown key" in proc.stderr
    assert proc.stdout == ""
