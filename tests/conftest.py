"""Shared fixtures: a real Docker runtime, a real scripted model server, a real sandbox service
on a real socket. Nothing here is mocked; when Docker or the runtime image is missing the tests
fail with instructions (CI's .ci/run sets both up)."""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
import structlog
import structlog.testing

from sandbox.runtime.spec import DEFAULT_IMAGE

REPO = Path(__file__).resolve().parents[1]

#: The files that take longest, longest first (each runs trainings, a dataset sweep or a fleet of
#: its own, in few tests). On several workers (scripts/test.sh: pytest-xdist, --dist loadfile,
#: no reorder) they are handed out first, so that none of them starts late and runs on alone.
SLOW_FIRST = (
    "tests/e2e/test_train_e2e.py",
    "tests/e2e/test_code_e2e.py",
    "tests/e2e/test_readme.py",
    "tests/skillopt/envs/spreadsheetbench/test_sb_dataset.py",
    "tests/e2e/test_textworld_e2e.py",
    "tests/e2e/",
    "tests/controller/test_fleet_faults.py",
    "tests/sandbox/test_hostile_programs.py",
    "tests/skillopt/trainer/test_resume_parity.py",
    "tests/controller/test_score_samples.py",
    "tests/controller/test_eval_run.py",
    "tests/sandbox/test_host_faults.py",
    "tests/skillopt/envs/codegen/test_code_grading.py",
)


def _slow_rank(nodeid: str) -> int:
    return next((i for i, prefix in enumerate(SLOW_FIRST) if nodeid.startswith(prefix)), len(SLOW_FIRST))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker, the slowest files first (a stable sort: every worker collects the
    same order, as xdist requires); a run in one process keeps the plain file order."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: _slow_rank(item.nodeid))


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        pytest.fail(f"Docker engine not reachable ({exc}); run: bash scripts/setup.sh", pytrace=False)
    try:
        client.images.get(DEFAULT_IMAGE)
    except docker.errors.ImageNotFound:
        pytest.fail(f"runtime image {DEFAULT_IMAGE} missing; run: bash docker/build.sh", pytrace=False)
    yield client
    client.close()


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A short temp dir (unix socket paths must fit in 108 bytes; pytest's tmp_path is long)."""
    path = Path(tempfile.mkdtemp(prefix="so-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def log_events() -> Iterator[list[dict]]:
    """Every structlog event logged during the test, whatever level an earlier test in this
    worker configured (``structlog.testing.capture_logs`` swaps the processors only, so a
    level filter left by a quiet CLI run would drop info events before they are captured)."""
    saved = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.NOTSET))
    try:
        with structlog.testing.capture_logs() as events:
            yield events
    finally:
        structlog.configure(**saved)


@pytest.fixture
def token() -> str:
    return secrets.token_urlsafe(24)


# -- the WebUI as a real server process -----------------------------------------------------------


class UIServer:
    """``skillopt ui`` running as a real process on a free loopback port."""

    def __init__(self, runs_dir: Path, *args: str, env: dict[str, str] | None = None) -> None:
        import os
        import re
        import subprocess
        import sys
        import threading

        self.runs_dir = runs_dir
        runs_dir.mkdir(parents=True, exist_ok=True)  # `skillopt ui` refuses a missing --runs-dir
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "controller.cli", "ui", "--port", "0", "--runs-dir", str(runs_dir), *args],
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "OPENAI_API_KEY": "", "PYTHONUNBUFFERED": "1", **(env or {})},
        )
        self.log: list[str] = []
        self.url = ""
        for line in self.proc.stderr:  # the server says where it listens once it does
            self.log.append(line)
            m = re.search(r"serving .* on (http://\S+?)/?(\s|$)", line)
            if m:
                self.url = m.group(1).rstrip("/")
                break
        if not self.url:
            pytest.fail(f"skillopt ui did not start (exit {self.proc.wait(30)}): {''.join(self.log)[-3000:]}")
        threading.Thread(target=lambda: self.log.extend(self.proc.stderr), daemon=True).start()

    def close(self) -> None:
        from controller.rundir.lock import lock_holder
        from controller.rundir.reader import list_runs

        self.proc.terminate()
        self.proc.wait(30)
        # Runs it launched outlive it by design (their own session): end the ones still running
        # (a run's lock says whether it runs; reading its whole status for 500 runs is slower
        # than a page's event stream waits before it reconnects and reports the refusal).
        import os
        import signal

        for run in list_runs(self.runs_dir):
            for path in [run.path, *(p for p in (run.path / "evals").glob("*") if p.is_dir())]:
                holder = lock_holder(path)
                if holder is not None and holder.pid:
                    os.kill(holder.pid, signal.SIGKILL)


def _ui_servers():
    servers: list[UIServer] = []

    def start(runs_dir: Path, *args: str, env: dict[str, str] | None = None) -> UIServer:
        server = UIServer(runs_dir, *args, env=env)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


@pytest.fixture
def ui_server_factory():
    """Start ``skillopt ui`` processes (stopped at the end of the test)."""
    yield from _ui_servers()


@pytest.fixture(scope="module")
def module_ui_server_factory():
    """Start ``skillopt ui`` processes shared by a module's tests."""
    yield from _ui_servers()
