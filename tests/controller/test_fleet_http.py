"""The HTTP API in front of a fleet (``skillopt fleet http``): the unmodified PyPI client
``sandbox_fusion`` against one real front subprocess before two real ``skillopt serve`` hosts
(python only: their code runs use the default runtime image), shared by the module; one host is
found by a ``dns:///`` name. One host is
killed (SIGKILL) mid-module: a request it was running is a ``SandboxError``, the others go on
to the live host."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from sandbox_fusion import RunCodeRequest, RunJupyterRequest, run_code, run_jupyter
from sandbox_fusion.models import RunStatus

from controller.client.sandbox_client import ChannelConfig, SandboxClient
from controller.embedded import spawn_service, stop_service, wait_listening
from sandbox.runtime.labels import LABEL_HOST

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Fleet:
    url: str  # the front's SandboxFusion endpoint (token in the path)
    bare: str
    token: str
    hosts: dict[str, subprocess.Popen]  # host id → its process
    grpc: dict[str, str]  # host id → its gRPC address


@pytest.fixture(scope="module")
def fleet(docker_client) -> Iterator[Fleet]:
    tmp = Path(f"/tmp/so-fh-{uuid.uuid4().hex[:6]}")
    tmp.mkdir()
    token = secrets.token_urlsafe(16)
    (tmp / "token").write_text(token)
    procs: dict[str, subprocess.Popen] = {}
    grpc: dict[str, str] = {}
    front = None
    try:
        for name in ("a", "b"):
            host_id = f"fh{name}-{uuid.uuid4().hex[:4]}"
            procs[host_id] = _host(host_id, tmp / "token", tmp / host_id)
        for host_id, proc in procs.items():
            grpc[host_id] = f"127.0.0.1:{wait_listening(proc, 120)}"
        # One host by a dns:/// name (as a Kubernetes headless Service is given), one by address.
        first, second = grpc.values()
        endpoints = f"dns:///localhost:{first.rsplit(':', 1)[1]},{second}"
        front = _front(endpoints, tmp / "token", "--wait", "20")
        bare = f"http://127.0.0.1:{wait_listening(front, 60)}"
        yield Fleet(url=f"{bare}/t/{token}", bare=bare, token=token, hosts=procs, grpc=grpc)
    finally:
        for proc in ([front] if front else []) + list(procs.values()):
            stop_service(proc)
        for host_id in procs:  # what a killed host left behind (its own containers only)
            for c in docker_client.containers.list(all=True, filters={"label": f"{LABEL_HOST}={host_id}"}):
                c.remove(force=True)
        subprocess.run(["rm", "-rf", str(tmp)], check=False)


def _host(host_id: str, token_file: Path, state: Path, *extra: str) -> subprocess.Popen:
    """A real ``skillopt serve`` with its HTTP API (python code runs from the runtime image)."""
    return spawn_service(
        [
            "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
            "--code-image", "skillopt-runtime:latest", "--token-file", str(token_file),
            "--host-id", host_id, "--state-dir", str(state),
            "--capacity", "2", "--pool-size", "1", "--exec-agents", "off", *extra,
        ]
    )  # fmt: skip


def _front(endpoints: str, token_file: Path, *extra: str) -> subprocess.Popen:
    """A real ``skillopt fleet http`` before ``endpoints``."""
    return subprocess.Popen(
        [sys.executable, "-m", "controller.cli", "fleet", "http", "--endpoints", endpoints,
         "--token-file", str(token_file), "--listen", "127.0.0.1:0", *extra],
        stdout=subprocess.PIPE, cwd=REPO, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip


def _hello(fleet: Fleet, code: str = 'print("hello")', **kw):
    return run_code(RunCodeRequest(code=code, language="python", **kw), endpoint=fleet.url, max_attempts=1)


def _sessions(address: str, token: str) -> int:
    with SandboxClient(ChannelConfig(address=address, token=token)) as client:
        return client.describe(timeout_s=10).sessions


def test_one_url_spreads_requests_over_the_hosts_with_their_tokens(fleet):
    seen = set()
    for _ in range(4):  # one at a time: ties go to the host placed on longest ago
        resp = _hello(fleet)
        assert resp.status == RunStatus.Success and resp.run_result.stdout == "hello\n", resp
        seen.add(resp.executor_pod_name)
    assert seen == set(fleet.hosts)

    notebook = run_jupyter(RunJupyterRequest(cells=["x = 6", "x * 7"]), endpoint=fleet.url, max_attempts=1)
    assert notebook.status == RunStatus.Success and notebook.cells[1].display == [{"text/plain": "42"}]

    # The hosts decide who may: a wrong token or none is their 401; the header works too.
    body = {"code": "print(1)", "language": "python"}
    assert requests.post(f"{fleet.bare}/t/wrong/run_code", json=body, timeout=30).status_code == 401
    assert requests.post(f"{fleet.bare}/run_code", json=body, timeout=30).status_code == 401
    auth = {"Authorization": f"Bearer {fleet.token}"}
    r = requests.post(f"{fleet.bare}/run_code", json=body, headers=auth, timeout=30)
    assert r.status_code == 200 and r.json()["run_result"]["stdout"] == "1\n"
    # A language no host serves: 400 naming the fleet's; a host's own refusal passes through.
    r = requests.post(f"{fleet.url}/run_code", json={"code": "x", "language": "cpp"}, timeout=30)
    assert r.status_code == 400 and "cpp" in r.text and "python" in r.text
    r = requests.post(f"{fleet.url}/run_code", json={**body, "run_timeout": -1}, timeout=30)
    assert r.status_code == 400 and "run_timeout" in r.text


def test_isolation_places_on_gvisor_hosts_and_each_answer_says_its_runtime(fleet, short_tmp):
    """A request's ``isolation`` (or the front's ``--isolation``) goes only to hosts whose code
    runs run under gVisor; a runc host refuses it (412) before anything runs; every answer says
    the runtime its container ran under."""
    a = sorted(fleet.hosts)[0]
    with SandboxClient(ChannelConfig(address=fleet.grpc[a], token=fleet.token)) as client:
        runc_http = f"http://127.0.0.1:{client.describe(timeout_s=10).http_port}/t/{fleet.token}"
    body = {"code": "print(1)", "language": "python"}
    r = requests.post(f"{runc_http}/run_code", json=body, timeout=60)
    assert r.status_code == 200 and r.json()["container_runtime"] == "runc", r.text
    r = requests.post(f"{runc_http}/run_code", json={**body, "isolation": "gvisor"}, timeout=60)
    assert r.status_code == 412 and "skillopt serve --runtime runsc" in r.json()["detail"], r.text
    r = requests.post(f"{fleet.url}/run_code", json={**body, "isolation": "gvisor"}, timeout=60)
    assert r.status_code == 412 and "no host of this fleet serving 'python'" in r.text, r.text
    r = requests.post(f"{fleet.url}/run_jupyter", json={"cells": ["1"], "isolation": "kvm"}, timeout=60)
    assert r.status_code == 400 and "isolation must be" in r.text, r.text

    (short_tmp / "token").write_text(fleet.token)
    gvisor = _host(
        f"fhg-{uuid.uuid4().hex[:4]}", short_tmp / "token", short_tmp / "state", "--runtime", "runsc"
    )
    front = None
    try:
        endpoints = f"{fleet.grpc[a]},127.0.0.1:{wait_listening(gvisor, 120)}"
        front = _front(endpoints, short_tmp / "token", "--isolation", "gvisor")
        url = f"http://127.0.0.1:{wait_listening(front, 60)}/t/{fleet.token}"
        for _ in range(3):  # the runc host has the most free slots, yet never takes one
            resp = run_code(
                RunCodeRequest(code='print("g")', language="python"), endpoint=url, max_attempts=1
            )
            assert resp.status == RunStatus.Success and resp.run_result.stdout == "g\n", resp
            assert resp.executor_pod_name != a
        r = requests.post(f"{url}/run_jupyter", json={"cells": ["6 * 7"]}, timeout=60)
        assert r.status_code == 200 and r.json()["container_runtime"] == "runsc", r.text
    finally:
        for proc in [front, gvisor]:
            if proc is not None:
                stop_service(proc)


def test_a_host_killed_mid_run_is_a_sandbox_error_and_the_fleet_goes_on(fleet):
    (a, b) = sorted(fleet.hosts)
    # Two slow runs at once: one on each host (the most free slots first).
    outcomes: list[object] = []

    def slow() -> None:
        try:
            outcomes.append(_hello(fleet, "import time\ntime.sleep(4)\nprint('done')", run_timeout=30))
        except Exception as exc:  # the client raises on a SandboxError
            outcomes.append(exc)

    threads = [threading.Thread(target=slow) for _ in range(2)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while _sessions(fleet.grpc[b], fleet.token) < 1:
        assert time.monotonic() < deadline, "the slow run never reached host b"
        time.sleep(0.1)
    os.kill(fleet.hosts[b].pid, signal.SIGKILL)
    fleet.hosts[b].wait(30)
    for t in threads:
        t.join(120)
    errors = [o for o in outcomes if isinstance(o, Exception)]
    done = [o for o in outcomes if not isinstance(o, Exception)]
    assert len(errors) == 1 and len(done) == 1, outcomes
    assert "Sandbox responded with error" in str(errors[0]) and "may have run" in str(errors[0])
    assert done[0].status == RunStatus.Success and done[0].executor_pod_name == a

    # Every later request runs on the live host (the dead one is skipped, before its health
    # watch noticed or after).
    for _ in range(3):
        resp = _hello(fleet)
        assert resp.status == RunStatus.Success and resp.executor_pod_name == a, resp
