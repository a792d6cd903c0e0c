"""Run status from the run directory alone: the lock a live process holds, the summary of the
session, the WebUI's launch record, and stop requests. Real processes hold the locks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from controller.rundir.lock import (
    acquire_run_lock,
    lock_holder,
    read_stop_request,
    request_stop,
)
from controller.rundir.reader import RunStatus, run_status
from skillopt.errors import ConfigError
from skillopt.trainer.rundir import layout
from tests.rundirs import summary_json

REPO = Path(__file__).resolve().parents[3]

# A process that takes the run lock, says so, and keeps it until its stdin closes.
HOLDER = """
import sys
from pathlib import Path
from controller.rundir.lock import acquire_run_lock
lock = acquire_run_lock(Path(sys.argv[1]))
print("locked", flush=True)
sys.stdin.read()
"""


def hold(run: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(run)],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "locked"
    return proc


def release(proc: subprocess.Popen) -> None:
    proc.stdin.close()
    assert proc.wait(30) == 0


def write_summary(run: Path, status: str) -> None:
    (run / layout.SUMMARY).write_text(json.dumps(summary_json(status)))


def test_a_held_lock_is_running_and_names_its_holder(tmp_path):
    proc = hold(tmp_path)
    try:
        info = run_status(tmp_path)
        assert info.status is RunStatus.RUNNING and info.pid == proc.pid
        holder = lock_holder(tmp_path)
        assert holder is not None and holder.pid == proc.pid
    finally:
        release(proc)
    assert lock_holder(tmp_path) is None
    # Gone without a summary: crashed, killed or refused.
    assert run_status(tmp_path).status is RunStatus.FAILED


def test_kill_9_drops_the_lock_and_the_run_shows_failed(tmp_path):
    write_summary(tmp_path, "stopped")  # from an earlier session: stale once a new one starts
    proc = hold(tmp_path)
    assert run_status(tmp_path).status is RunStatus.RUNNING
    proc.kill()
    proc.wait(30)
    assert run_status(tmp_path).status is RunStatus.FAILED


def test_a_second_process_is_refused_while_one_runs(tmp_path):
    proc = hold(tmp_path)
    try:
        with pytest.raises(ConfigError, match=f"in use by pid {proc.pid}"):
            acquire_run_lock(tmp_path)
    finally:
        release(proc)
    with acquire_run_lock(tmp_path) as lock:
        assert lock.holder.pid > 0 and run_status(tmp_path).status is RunStatus.RUNNING


def test_a_status_probe_only_delays_the_lock(tmp_path):
    """A probe holds a shared lock for an instant; a starting run waits for it, is not refused."""
    import fcntl

    (tmp_path / ".lock").write_text("")
    fd = os.open(tmp_path / ".lock", os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_SH)  # a probe caught mid-flight
    got: list[object] = []
    started = threading.Event()

    def take() -> None:
        started.set()
        got.append(acquire_run_lock(tmp_path))

    t = threading.Thread(target=take)
    t.start()
    started.wait(10)
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
    t.join(30)
    assert got and not t.is_alive()
    got[0].release()


@pytest.mark.parametrize(
    ("status", "expected"), [("complete", RunStatus.FINISHED), ("stopped", RunStatus.STOPPED)]
)
def test_the_summary_of_the_last_session_decides_when_nothing_runs(tmp_path, status, expected):
    acquire_run_lock(tmp_path).release()
    write_summary(tmp_path, status)
    assert run_status(tmp_path).status is expected


def test_a_summary_older_than_the_last_session_is_stale(tmp_path):
    write_summary(tmp_path, "stopped")
    an_hour_ago = time.time() - 3600
    os.utime(tmp_path / "summary.json", (an_hour_ago, an_hour_ago))
    acquire_run_lock(tmp_path).release()  # a resumed session that then died without a summary
    assert run_status(tmp_path).status is RunStatus.FAILED


def test_a_webui_launch_is_starting_until_its_process_locks_or_dies(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    (tmp_path / layout.LAUNCH).write_text(json.dumps({"pid": proc.pid, "launched_at": time.time()}))
    try:
        assert run_status(tmp_path).status is RunStatus.STARTING
    finally:
        proc.stdin.close()
        proc.wait(30)
    assert run_status(tmp_path).status is RunStatus.FAILED  # it never took the lock


def test_stop_requests_name_their_process(tmp_path):
    with pytest.raises(ConfigError, match="nothing runs"):
        request_stop(tmp_path, reason="x", by="test")
    proc = hold(tmp_path)
    try:
        holder = request_stop(tmp_path, reason="enough", by="test")
        assert holder.pid == proc.pid
        assert read_stop_request(tmp_path, proc.pid)["reason"] == "enough"
        assert read_stop_request(tmp_path, proc.pid + 1) is None  # not for another session
        assert run_status(tmp_path).stop_requested
    finally:
        release(proc)
