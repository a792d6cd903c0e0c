"""``skillopt sandbox create|exec|cp|shell|ls|rm`` against a real host, as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sandbox.conftest import start_service


@pytest.fixture(scope="module")
def host(docker_client, scripted):
    yield from start_service(scripted, capacity=1, pool_size=1)


def cli(host, tmp_path: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    token = tmp_path / "token"
    token.write_text(host.token + "\n")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "controller.cli",
            "sandbox",
            args[0],
            "--endpoints",
            host.running.address,
            "--token-file",
            str(token),
            *args[1:],
        ],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_session_from_the_command_line(host, tmp_path):
    created = cli(host, tmp_path, "create", "--label", "owner=cli", "--json")
    assert created.returncode == 0, created.stderr
    session = json.loads(created.stdout)["session_id"]
    local = tmp_path / "in.txt"
    local.write_text("3 4\n")
    assert cli(host, tmp_path, "cp", str(local), f"{session}:work/in.txt").returncode == 0
    run = cli(
        host, tmp_path, "exec", "--session", session, "--cwd", "work", "--", "sh", "-c", "cat in.txt; exit 7"
    )
    assert (run.returncode, run.stdout) == (7, "3 4\n")
    shell = cli(
        host, tmp_path, "shell", "--session", session, stdin="echo one > out.txt\ncat out.txt\nexit\n"
    )
    assert shell.returncode == 0 and shell.stdout == "one\n"
    back = tmp_path / "out.txt"
    assert cli(host, tmp_path, "cp", f"{session}:out.txt", str(back)).returncode == 0
    assert back.read_text() == "one\n"
    listed = cli(host, tmp_path, "ls", "--json")
    assert [s["labels"] for s in json.loads(listed.stdout) if s["session_id"] == session] == [
        {"owner": "cli"}
    ]
    assert cli(host, tmp_path, "rm", session).returncode == 0
    gone = cli(host, tmp_path, "exec", "--session", session, "--", "true")
    assert gone.returncode == 2 and "no session" in gone.stderr
    assert host.running.servicer.sessions.count() == 0


def test_a_one_shot_exec_streams_and_leaves_nothing(host, tmp_path):
    run = cli(host, tmp_path, "exec", "--stdin", "--", "wc", "-c", stdin="hello")
    assert (run.returncode, run.stdout.strip()) == (0, "5")
    missing = cli(host, tmp_path, "exec", "--", "no-such-program")
    assert missing.returncode == 127 and "not_found" in missing.stderr
    assert host.running.servicer.sessions.count() == 0
