"""The SandboxFusion-compatible HTTP API (``skillopt serve --http-listen``): the real PyPI client
``sandbox_fusion`` (its ``run_code``/``run_jupyter``, pointed at the host by its endpoint
setting, with nothing but the URL: the token is the path prefix ``/t/<token>``) against one
real ``skillopt serve`` subprocess serving code runs from ``skillopt-runtime-polyglot:latest``,
shared by the module. Bad requests are sent with ``requests`` to see the status and reason."""

from __future__ import annotations

import base64
import secrets
import subprocess
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from sandbox_fusion import RunCodeRequest, RunJupyterRequest, run_code, run_jupyter
from sandbox_fusion.models import CommandRunStatus, RunStatus

from controller.client.sandbox_client import ChannelConfig, SandboxClient
from controller.embedded import spawn_service, stop_service, wait_listening
from sandbox.service.languages import POLYGLOT_IMAGE

HELLO = {
    "python": 'print("hello")',
    "pytest": "def test_hello():\n    print('hello')\n    assert 1 + 1 == 2\n",
    "bash": "echo hello",
    "cpp": '#include <iostream>\nint main() { std::cout << "hello" << std::endl; return 0; }\n',
    "nodejs": 'console.log("hello")',
    "go": 'package main\nimport "fmt"\nfunc main() { fmt.Println("hello") }\n',
    "java": 'public class Main { public static void main(String[] a) { System.out.println("hello"); } }\n',
}


@dataclass
class Host:
    url: str  # the SandboxFusion endpoint (token in the path)
    bare: str  # without the token
    token: str
    grpc: str


@pytest.fixture(scope="module")
def host(docker_client) -> Iterator[Host]:
    try:
        docker_client.images.get(POLYGLOT_IMAGE)
    except Exception:
        pytest.fail(f"{POLYGLOT_IMAGE} missing; run: bash docker/build.sh --only polyglot", pytrace=False)
    tmp = Path(f"/tmp/so-fz-{uuid.uuid4().hex[:6]}")
    tmp.mkdir()
    token = secrets.token_urlsafe(16)
    (tmp / "token").write_text(token)
    proc = spawn_service(
        [
            "--listen", "127.0.0.1:0",
            "--http-listen", "127.0.0.1:0",
            "--http-port-file", str(tmp / "http-port"),
            "--token-file", str(tmp / "token"),
            "--host-id", f"fz-{uuid.uuid4().hex[:4]}",
            "--state-dir", str(tmp / "state"),
            "--capacity", "2",
            "--pool-size", "2",
            "--exec-agents", "off",
        ]
    )  # fmt: skip
    try:
        port = wait_listening(proc, 120)
        http = int((tmp / "http-port").read_text())
        bare = f"http://127.0.0.1:{http}"
        yield Host(url=f"{bare}/t/{token}", bare=bare, token=token, grpc=f"127.0.0.1:{port}")
    finally:
        stop_service(proc)
        subprocess.run(["rm", "-rf", str(tmp)], check=False)


def _run(host: Host, code: str, language: str, **kw):
    return run_code(RunCodeRequest(code=code, language=language, **kw), endpoint=host.url, max_attempts=1)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _at_once(host: Host, *calls: tuple[str, str, dict]) -> list:
    """Several requests at once, in order (each in a container of its own: the compiles and
    the waits overlap the other requests' container starts instead of adding up)."""
    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(lambda call: _run(host, call[0], call[1], **call[2]), calls))


def test_hello_world_in_every_language(host):
    languages = sorted(HELLO)
    answers = _at_once(
        host, *((HELLO[lang], lang, {"compile_timeout": 60, "run_timeout": 30}) for lang in languages)
    )
    for language, resp in zip(languages, answers, strict=True):
        assert resp.status == RunStatus.Success, (language, resp)
        assert resp.run_result.status == CommandRunStatus.Finished, language
        assert resp.run_result.return_code == 0, language
        assert "hello" in resp.run_result.stdout or "passed" in resp.run_result.stdout, language
        assert (resp.compile_result is not None) == (language in ("cpp", "go", "java")), language


def test_compile_error_runtime_error_and_timeouts(host):
    # A compile that cannot finish in time: g++ evaluates this constexpr loop for seconds (until
    # its operation limit, 2^25), each loop under its iteration limit. (A deep template recursion
    # is no good: g++ stops at its depth limit, 900, in well under the timeout on a quiet machine.)
    slow = (
        "constexpr long f() { long s = 0; for (long i = 0; i < 200000; i++)\n"
        "  for (long j = 0; j < 200000; j++) s += i ^ j; return s; }\n"
        "constexpr long v = f();\nint main() { return v > 0 ? 0 : 1; }\n"
    )
    undefined, exit3, raised, sleeper, slow_compile = _at_once(
        host,
        ("int main() { return undefined_name; }", "cpp", {}),
        ("import sys\nprint('partial')\nsys.exit(3)", "python", {}),
        ("raise ValueError('bad')", "python", {}),
        ("import time\nprint('started', flush=True)\ntime.sleep(60)", "python", {"run_timeout": 1}),
        (slow, "cpp", {"compile_timeout": 0.5}),
    )
    resp = undefined
    assert resp.status == RunStatus.Failed
    assert resp.compile_result.return_code != 0 and "undefined_name" in resp.compile_result.stderr
    assert resp.run_result is None

    resp = exit3
    assert resp.status == RunStatus.Failed
    assert (resp.run_result.return_code, resp.run_result.stdout) == (3, "partial\n")

    resp = raised
    assert resp.status == RunStatus.Failed and "ValueError: bad" in resp.run_result.stderr

    resp = sleeper
    assert resp.status == RunStatus.Failed
    assert resp.run_result.status == CommandRunStatus.TimeLimitExceeded
    assert resp.run_result.stdout == "started\n"

    resp = slow_compile
    assert resp.status == RunStatus.Failed
    assert resp.compile_result.status == CommandRunStatus.TimeLimitExceeded and resp.run_result is None


def test_stdin_files_in_and_out(host):
    resp = _run(host, "import sys\nprint(sys.stdin.read().upper())", "python", stdin="from stdin")
    assert resp.run_result.stdout == "FROM STDIN\n"

    code = "cat data/in.txt; printf '\\xff\\xfe' > out.bin; mkdir -p sub; echo made > sub/o.txt"
    resp = _run(
        host,
        code,
        "bash",
        files={"data/in.txt": _b64(b"file content\n")},
        fetch_files=["out.bin", "sub/o.txt", "never-made.txt"],
    )
    assert resp.status == RunStatus.Success, resp
    assert resp.run_result.stdout == "file content\n"
    assert base64.b64decode(resp.files["out.bin"]) == b"\xff\xfe"
    assert base64.b64decode(resp.files["sub/o.txt"]) == b"made\n"
    assert "never-made.txt" not in resp.files


def test_non_utf8_huge_output_fork_bomb_and_network_are_contained(host):
    net = "import socket\ntry:\n    socket.create_connection(('1.1.1.1', 53), timeout=2)\n    print('reached')\nexcept OSError as e:\n    print('blocked', e.errno)"
    non_utf8, huge, bomb, network = _at_once(
        host,
        ("import sys\nsys.stdout.buffer.write(b'ok \\xff\\xfe end')", "python", {}),
        ("import sys\nwhile True: sys.stdout.write('x' * 65536)", "python", {"run_timeout": 20}),
        # A fork bomb is held by the pids limit and ended by the timeout; no network inside.
        (":(){ :|:& };:; sleep 30", "bash", {"run_timeout": 3}),
        (net, "python", {}),
    )
    resp = non_utf8
    assert resp.status == RunStatus.Success and resp.run_result.stdout == "ok \ufffd\ufffd end"

    resp = huge
    assert resp.status == RunStatus.Failed
    assert "output passed this host's cap" in resp.run_result.stderr
    assert len(resp.run_result.stdout) <= 64 * 1024 * 1024

    resp = bomb
    assert resp.status == RunStatus.Failed and resp.run_result.status == CommandRunStatus.TimeLimitExceeded
    resp = network
    assert resp.status == RunStatus.Success and resp.run_result.stdout.startswith("blocked")

    # memory_limit_MB (the PyPI client has no such field: the server's own JSON), SandboxFusion's
    # rlimits, never above the container's own limit (1 GiB: a request for more gets that).
    grab = {"code": "x = bytearray(400 * 1024 * 1024)\nprint('got it')", "language": "python"}
    r = requests.post(f"{host.url}/run_code", json={**grab, "memory_limit_MB": 128}, timeout=60).json()
    assert r["status"] == "Failed" and "MemoryError" in r["run_result"]["stderr"], r
    r = requests.post(f"{host.url}/run_code", json={**grab, "memory_limit_MB": 10**6}, timeout=60).json()
    assert r["status"] == "Success" and r["run_result"]["stdout"] == "got it\n", r

    resp = _run(host, HELLO["python"], "python")  # the host is fine after them
    assert resp.status == RunStatus.Success and resp.run_result.stdout == "hello\n"


def test_jupyter_cells_share_a_process_and_an_error_stops_the_run(host):
    cells = [
        "a = 123",
        "a",
        "print(a)",
        "import sys; sys.stderr.write('to stderr')",
        "open('made.txt', 'w').write(open('given.txt').read() * 2)",
        "raise RuntimeError('stop here')",
        "print('never')",
    ]
    req = RunJupyterRequest(cells=cells, files={"given.txt": _b64(b"ab")}, fetch_files=["made.txt"])
    resp = run_jupyter(req, endpoint=host.url, max_attempts=1)
    assert resp.status == RunStatus.Failed  # a cell raised
    assert len(resp.cells) == 6  # the last cell never ran
    assert resp.cells[1].display == [{"text/plain": "123"}]
    assert resp.cells[2].stdout == "123\n"
    assert resp.cells[3].stderr == "to stderr"
    error = resp.cells[5].error[0]
    assert (error["ename"], error["evalue"]) == ("RuntimeError", "stop here")
    assert "<cell 5>" in "".join(error["traceback"]) and "skillopt" not in "".join(error["traceback"])
    assert base64.b64decode(resp.files["made.txt"]) == b"abab"

    ok = run_jupyter(RunJupyterRequest(cells=["x = 2", "x * 21"]), endpoint=host.url, max_attempts=1)
    assert ok.status == RunStatus.Success and ok.cells[1].display == [{"text/plain": "42"}]

    slow = RunJupyterRequest(cells=["1", "import time; time.sleep(30)", "2"], cell_timeout=1)
    resp = run_jupyter(slow, endpoint=host.url, max_attempts=1)
    assert resp.status == RunStatus.Failed and len(resp.cells) == 2
    assert resp.cells[1].error[0]["ename"] == "TimeoutError"


def test_bad_requests_get_a_4xx_with_the_reason(host):
    def post(body, path="/run_code", url=None, **kw):
        return requests.post(f"{url or host.url}{path}", json=body, timeout=30, **kw)

    r = post({"code": "x", "language": "cobol"})
    assert r.status_code == 400
    assert "cobol" in r.text and all(lang in r.text for lang in HELLO)
    for timeout in (-1, 1e9):
        r = post({"code": "x", "language": "python", "run_timeout": timeout})
        assert r.status_code == 400 and "run_timeout" in r.text
    r = post({"code": "x", "language": "python", "files": {"a.txt": "not base64!"}})
    assert r.status_code == 400 and "base64" in r.text
    r = post({"code": "x", "language": "python", "files": {"../escape.txt": _b64(b"x")}})
    assert r.status_code == 400 and "traversal" in r.text
    r = post({"code": "x", "language": "python", "fetch_files": ["/etc/passwd"]})
    assert r.status_code == 400 and "absolute" in r.text
    r = post({"code": "x", "language": "python", "fetch_files": ["../../etc/shadow"]})
    assert r.status_code == 400 and "traversal" in r.text
    r = post({"language": "python"})
    assert r.status_code == 400 and "required" in r.text
    r = post({"cells": "not a list"}, path="/run_jupyter")
    assert r.status_code == 400 and "cells" in r.text
    r = requests.post(f"{host.url}/run_code", data=b"{nope", timeout=30)
    assert r.status_code == 400 and "JSON" in r.text
    # 100 MB of code: refused by its Content-Length before the body is read.
    r = requests.post(
        f"{host.url}/run_code", data=b"", headers={"Content-Length": str(100 * 1024 * 1024)}, timeout=30
    )
    assert r.status_code == 413

    # Authentication: no token, a wrong one, the header instead of the path.
    assert post({"code": "print(1)", "language": "python"}, url=host.bare).status_code == 401
    assert post({"code": "print(1)", "language": "python"}, url=f"{host.bare}/t/wrong").status_code == 401
    r = post(
        {"code": "print(1)", "language": "python"},
        url=host.bare,
        headers={"Authorization": f"Bearer {host.token}"},
    )
    assert r.status_code == 200 and r.json()["run_result"]["stdout"] == "1\n"
    assert requests.get(f"{host.url}/v1/ping", timeout=10).json() == "pong"


def test_describe_lists_the_languages(host):
    with SandboxClient(ChannelConfig(address=host.grpc, token=host.token)) as client:
        d = client.describe(timeout_s=30)
    assert set(HELLO) <= set(d.languages)
    assert d.http_port == int(host.bare.rsplit(":", 1)[1])
