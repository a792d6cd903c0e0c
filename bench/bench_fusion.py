"""Figures of the SandboxFusion-compatible HTTP API (not tests). Run:
``python bench/bench_fusion.py [--quick] [--sandboxfusion-dir DIR | --sandboxfusion URL]``;
prints JSON.

One ``skillopt serve --http-listen`` subprocess (code runs from
``skillopt-runtime-polyglot:latest``), driven by SandboxFusion's own PyPI client:

1. ``python_hello``: ``print("hello")`` one request at a time on a warm host (the pool is left
   to refill between requests, outside the timing), client-side latency p50/p95 (ms).
2. ``clients_8``: 8 concurrent clients looping python hello worlds for ``--seconds``:
   requests/min, errors, latency p50/p95.
   ``bare_engine_8_loops``: what bounds it, 8 loops of a bare ``docker run --rm IMAGE true``
   for as long: containers per minute the engine alone manages on this machine now.
3. ``cpp_50_lines``: compile and run a 50-line C++ program through ``/run_code`` (p50 of the
   whole request) against the same ``g++`` + run in a bare ``docker run`` of the same image
   (hardened the same way, no pool) on this machine.
4. ``fleet_front_python_hello``: 1 through ``skillopt fleet http`` in front of the same host
   (one hop more), alternating with 1's requests, as a ratio to 1.

1 and 2 also on a second host with container recycling off (``--reuse-max-executions 0``: a
fresh container per request, as before issue 47), alternating with the first
(``*_fresh_containers``).

``--compare DIR``: a third host from another checkout (its code, this interpreter), and 8
clients on each of the two default hosts alternating in rounds: requests/min and the host
process's CPU per request (``compare``), for a change to the HTTP layer or the code-run path.

SandboxFusion's own server, side by side in the same run and JSON (1, alternating with ours,
and 2 right after ours, with the same client): ``--sandboxfusion-dir DIR`` starts it from a checkout the way its README
does (``make run``: ``uvicorn sandbox.server.server:app``, its default config
``sandbox/configs/local.yaml``, which runs code with no isolation) with ``--sandboxfusion-venv``
on ``PATH``, and stops it at the end; ``--sandboxfusion URL`` uses one already running.
Setting it up once (offline from this machine's PyPI mirror): ``bench/README.md``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CPP = "\n".join(
    ["#include <iostream>", "#include <vector>", "#include <algorithm>", "using namespace std;"]
    + [f"int f{i}(int x) {{ return x * {i} + {i % 7}; }}" for i in range(40)]
    + [
        "int main() {",
        "  vector<int> v; for (int i = 0; i < 1000; ++i) v.push_back(f3(i) % 101);",
        "  sort(v.begin(), v.end()); long s = 0; for (int x : v) s += x;",
        "  cout << s << endl; return 0;",
        "}",
    ]
)


def summary(times: list[float]) -> dict[str, float]:
    return {
        "n": len(times),
        "p50_ms": round(statistics.median(times), 1),
        "p95_ms": round(pct(times, 0.95), 1),
    }


def ratio(a: list[float], b: list[float]) -> float:
    """p50 of ``a`` over p50 of ``b``."""
    return round(statistics.median(a) / statistics.median(b), 2)


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def wait_warm(grpc_address: str, image: str, idle: int, timeout_s: float = 300.0) -> None:
    """Until the host has ``idle`` warm containers of ``image`` (its Describe's pool_idle)."""
    from controller.client.sandbox_client import ChannelConfig, SandboxClient

    deadline = time.monotonic() + timeout_s
    with SandboxClient(ChannelConfig(address=grpc_address)) as client:
        while time.monotonic() < deadline:
            pools = client.describe(timeout_s=30).pool_idle
            if sum(n for key, n in pools.items() if key.startswith(image + "@")) >= idle:
                return
            time.sleep(0.2)


def hello_sequential(
    endpoint: str, n: int, pause_s: float, warm: tuple[str, str] | None = None
) -> dict[str, float]:
    from sandbox_fusion import RunCodeRequest, run_code

    times = []
    for _ in range(n):
        if warm:
            wait_warm(*warm, idle=2)  # a warm host: the pool has refilled
        t = time.perf_counter()
        resp = run_code(
            RunCodeRequest(code='print("hello")', language="python"), endpoint=endpoint, max_attempts=1
        )
        times.append((time.perf_counter() - t) * 1000)
        assert resp.run_result.stdout == "hello\n", resp
        time.sleep(pause_s)  # a warm host: the pool refills between requests
    return {"n": n, "p50_ms": round(statistics.median(times), 1), "p95_ms": round(pct(times, 0.95), 1)}


def _in_threads(loop: Callable[[], None], count: int) -> float:
    """Run ``loop`` in ``count`` threads at once; the seconds until the last one ended."""
    threads = [threading.Thread(target=loop) for _ in range(count)]
    t0 = time.monotonic()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return time.monotonic() - t0


def clients(endpoint: str, count: int, seconds: float) -> dict[str, float]:
    from sandbox_fusion import RunCodeRequest, run_code

    lat: list[float] = []
    errors: list[str] = []
    end = time.monotonic() + seconds
    lock = threading.Lock()

    def loop() -> None:
        while time.monotonic() < end:
            t = time.perf_counter()
            try:
                resp = run_code(
                    RunCodeRequest(code='print("hello")', language="python"),
                    endpoint=endpoint,
                    max_attempts=1,
                )
                ok = resp.run_result is not None and resp.run_result.stdout == "hello\n"
            except Exception as exc:
                ok, resp = False, exc
            with lock:
                (lat.append((time.perf_counter() - t) * 1000) if ok else errors.append(str(resp)[:200]))

    elapsed = _in_threads(loop, count)
    return {
        "clients": count,
        "seconds": round(elapsed, 1),
        "requests_per_min": round(len(lat) / elapsed * 60, 1),
        "errors": len(errors),
        "first_error": errors[0] if errors else "",
        "p50_ms": round(statistics.median(lat), 1) if lat else float("nan"),
        "p95_ms": round(pct(lat, 0.95), 1),
    }


def engine_containers(image: str, count: int, seconds: float) -> dict[str, float]:
    """The bound of single-use containers: ``count`` loops of a bare ``docker run --rm`` that
    runs nothing (``true``), for ``seconds``: containers per minute the engine alone manages."""
    cmd = ["docker", "run", "--rm", "--network", "none", "--entrypoint", "true", image]
    done: list[float] = []
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def loop() -> None:
        while time.monotonic() < end:
            t = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True)
            with lock:
                done.append((time.perf_counter() - t) * 1000)

    elapsed = _in_threads(loop, count)
    return {
        "loops": count,
        "containers_per_min": round(len(done) / elapsed * 60, 1),
        "p50_ms": round(statistics.median(done), 1) if done else float("nan"),
    }


def cpp_side_by_side(endpoint: str, image: str, n: int) -> dict[str, float]:
    from sandbox_fusion import RunCodeRequest, run_code

    api = []
    for _ in range(n):
        t = time.perf_counter()
        resp = run_code(
            RunCodeRequest(code=CPP, language="cpp", compile_timeout=60), endpoint=endpoint, max_attempts=1
        )
        api.append((time.perf_counter() - t) * 1000)
        assert resp.status == "Success", resp
        time.sleep(1.0)
    bare = []
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "main.cpp").write_text(CPP)
        os.chmod(tmp, 0o777)
        cmd = [
            "docker", "run", "--rm", "--network", "none", "--read-only", "--cap-drop", "ALL",
            "--security-opt", "no-new-privileges", "--user", "1000:1000", "--memory", "1g", "--cpus", "1",
            "--tmpfs", "/tmp:rw,exec", "-v", f"{tmp}:/src:ro", "--entrypoint", "sh", image, "-c",
            "cd /tmp && g++ -std=c++17 /src/main.cpp -o test -lpthread && ./test",
        ]  # fmt: skip
        for _ in range(n):
            t = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True)
            bare.append((time.perf_counter() - t) * 1000)
    p_api, p_bare = statistics.median(api), statistics.median(bare)
    return {
        "n": n,
        "api_p50_ms": round(p_api, 1),
        "bare_docker_run_p50_ms": round(p_bare, 1),
        "ratio": round(p_api / p_bare, 2),
    }


def start_sandboxfusion(src: Path, venv: Path) -> tuple[subprocess.Popen, str]:
    """SandboxFusion's server as its README starts it (``make run`` on a free loopback port)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (src / "docs" / "build").mkdir(parents=True, exist_ok=True)  # its README's step: the docs it mounts
    log = open(Path(tempfile.gettempdir()) / "sandboxfusion-bench.log", "wb")  # noqa: SIM115 (held by the child)
    proc = subprocess.Popen(
        ["make", "run", "HOST=127.0.0.1", f"PORT={port}"],
        cwd=src,
        # Not our PYTHONPATH: its package is also named `sandbox`.
        env={
            **{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
            "PATH": f"{venv}/bin:{os.environ['PATH']}",
        },
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    import requests

    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"SandboxFusion's server exited ({proc.returncode}): see {log.name}")
        try:
            if requests.get(f"{url}/v1/ping", timeout=2).ok:
                return proc, url
        except requests.RequestException:
            pass
        time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGTERM)
    raise SystemExit(f"SandboxFusion's server did not answer /v1/ping in 180 s: see {log.name}")


def start_front(grpc_address: str, tmp: Path) -> tuple[subprocess.Popen, str]:
    """``skillopt fleet http`` in front of one host."""
    from controller.embedded import wait_listening

    proc = subprocess.Popen(
        [sys.executable, "-m", "controller.cli", "fleet", "http", "--endpoints", grpc_address,
         "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=open(tmp / "front.log", "wb"), cwd=ROOT,  # noqa: SIM115
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    return proc, f"http://127.0.0.1:{wait_listening(proc, 60)}"


def _spawn_host(
    tmp: Path, name: str, reuse: int | None, checkout: Path | None = None
) -> tuple[subprocess.Popen, str, tuple[str, str]]:
    """One ``skillopt serve --http-listen`` host (``reuse``: its ``--reuse-max-executions``,
    None: the default; ``checkout``: run that checkout's code instead of this one's); its
    process, HTTP endpoint and (gRPC address, code image)."""
    from controller.embedded import spawn_service, wait_listening
    from sandbox.service.languages import POLYGLOT_IMAGE

    (tmp / name).mkdir()
    spawn = spawn_service if checkout is None else functools.partial(_spawn_from, checkout)
    proc = spawn(
        [
            "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--http-port-file", str(tmp / name / "hp"),
            "--host-id", f"bench-{name}-{uuid.uuid4().hex[:4]}", "--state-dir", str(tmp / name / "state"),
            "--capacity", "8", "--pool-size", "8", "--exec-agents", "off",
            *(["--reuse-max-executions", str(reuse)] if reuse is not None else []),
        ]
    )  # fmt: skip
    port = wait_listening(proc, 120)
    return proc, f"http://127.0.0.1:{(tmp / name / 'hp').read_text()}", (f"127.0.0.1:{port}", POLYGLOT_IMAGE)


def _spawn_from(checkout: Path, serve_args: list[str]) -> subprocess.Popen:
    """``skillopt serve`` from another checkout (its code first on the path), with this
    interpreter and its installed dependencies."""
    return subprocess.Popen(
        [sys.executable, "-m", "controller.cli", "serve", *serve_args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        cwd=checkout,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(checkout)},
    )


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system, every thread) a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def compare_hosts(
    ours: tuple[subprocess.Popen, str], other: tuple[subprocess.Popen, str], seconds: float
) -> dict:
    """8 clients on this checkout's host and on another checkout's, alternating in rounds
    (the machine's load drifts): requests/min, and the host process's CPU per request (the
    HTTP layer and the code-run path; the containers' work is the same for both)."""
    rounds = 6
    totals = {
        name: {"requests": 0.0, "seconds": 0.0, "cpu_s": 0.0, "errors": 0} for name in ("ours", "other")
    }
    for k in range(rounds):
        for name, (proc, endpoint) in (("ours", ours), ("other", other))[:: 1 if k % 2 == 0 else -1]:
            cpu0 = _cpu_s(proc.pid)
            got = clients(endpoint, 8, seconds / rounds)
            t = totals[name]
            t["cpu_s"] += _cpu_s(proc.pid) - cpu0
            t["requests"] += got["requests_per_min"] * got["seconds"] / 60
            t["seconds"] += got["seconds"]
            t["errors"] += got["errors"]
    out: dict[str, object] = {}
    for name, t in totals.items():
        out[name] = {
            "requests_per_min": round(t["requests"] / t["seconds"] * 60, 1),
            "host_cpu_ms_per_request": round(t["cpu_s"] * 1000 / max(t["requests"], 1), 2),
            "errors": t["errors"],
        }
    o, x = out["ours"], out["other"]
    out["ours_over_other_req_per_min"] = round(o["requests_per_min"] / x["requests_per_min"], 3)  # type: ignore[index]
    out["ours_over_other_host_cpu"] = round(o["host_cpu_ms_per_request"] / x["host_cpu_ms_per_request"], 3)  # type: ignore[index]
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--sandboxfusion", default="", help="URL of a running SandboxFusion server")
    parser.add_argument(
        "--sandboxfusion-dir", default="", help="a SandboxFusion checkout to start (make run)"
    )
    parser.add_argument(
        "--sandboxfusion-venv",
        default="/tmp/sf/venv",
        help="the venv with its dependencies (bench/README.md)",
    )
    parser.add_argument(
        "--compare",
        default="",
        help="another checkout: its host beside this one's, 8 clients alternating (compare_hosts)",
    )
    args = parser.parse_args()
    from sandbox.service.languages import POLYGLOT_IMAGE

    n = 10 if args.quick else 40
    seconds = 20.0 if args.quick else args.seconds
    tmp = Path(tempfile.mkdtemp(prefix="so-bf-"))
    out: dict[str, object] = {"machine_cpus": os.cpu_count(), "load_avg_1m_at_start": os.getloadavg()[0]}
    procs: list[subprocess.Popen] = []
    sf_proc = None
    try:
        # Two hosts side by side: recycling on (the default) and off (a fresh container per
        # request, as before issue 47).
        proc, endpoint, warm = _spawn_host(tmp, "recycling", None)
        procs.append(proc)
        proc, fresh_endpoint, fresh_warm = _spawn_host(tmp, "fresh", 0)
        procs.append(proc)
        sf_url = args.sandboxfusion
        if args.sandboxfusion_dir:
            sf_proc, sf_url = start_sandboxfusion(Path(args.sandboxfusion_dir), Path(args.sandboxfusion_venv))
        front, front_url = start_front(warm[0], tmp)
        procs.append(front)
        if args.compare:
            other, other_endpoint, other_warm = _spawn_host(
                tmp, "compare", None, Path(args.compare).resolve()
            )
            procs.append(other)
            wait_warm(*warm, idle=8)
            wait_warm(*other_warm, idle=8)
            out["compare"] = {
                "other": str(Path(args.compare).resolve()),
                **compare_hosts((procs[0], endpoint), (other, other_endpoint), seconds * 2),
            }
        # One at a time, alternating (the load of this shared machine drifts by the minute):
        # recycling on, through the fleet front, recycling off, SandboxFusion's server.
        ours, via, fresh, sf_hello = [], [], [], []
        for _ in range(n):
            ours.append(hello_sequential(endpoint, 1, 0.0, warm)["p50_ms"])
            via.append(hello_sequential(front_url, 1, 0.0, warm)["p50_ms"])
            fresh.append(hello_sequential(fresh_endpoint, 1, 0.0, fresh_warm)["p50_ms"])
            if sf_url:
                sf_hello.append(hello_sequential(sf_url, 1, 0.0)["p50_ms"])
        out["python_hello"] = summary(ours)
        out["python_hello_fresh_containers"] = {**summary(fresh), "ratio_to_recycling": ratio(fresh, ours)}
        out["fleet_front_python_hello"] = {**summary(via), "ratio_to_direct": ratio(via, ours)}
        if sf_url:
            out["sandboxfusion_python_hello"] = {**summary(sf_hello), "ratio_to_ours": ratio(sf_hello, ours)}
        wait_warm(*warm, idle=8)
        out["clients_8"] = clients(endpoint, 8, seconds)
        wait_warm(*fresh_warm, idle=8)
        fresh8 = clients(fresh_endpoint, 8, seconds)
        per_min = out["clients_8"]["requests_per_min"] / max(fresh8["requests_per_min"], 0.1)  # type: ignore[index]
        out["clients_8_fresh_containers"] = {**fresh8, "recycling_over_fresh_req_per_min": round(per_min, 2)}
        if sf_url:
            sf8 = clients(sf_url, 8, seconds)
            per_min = out["clients_8"]["requests_per_min"] / sf8["requests_per_min"]  # type: ignore[index]
            out["sandboxfusion_clients_8"] = {**sf8, "ours_over_sandboxfusion_req_per_min": round(per_min, 2)}
        out["bare_engine_8_loops"] = engine_containers(POLYGLOT_IMAGE, 8, seconds)
        wait_warm(*warm, idle=2)
        out["cpp_50_lines"] = cpp_side_by_side(endpoint, POLYGLOT_IMAGE, 3 if args.quick else 10)
    finally:
        for p in procs:
            p.terminate()
            p.wait(60)
        if sf_proc is not None:
            os.killpg(sf_proc.pid, signal.SIGTERM)
            sf_proc.wait(60)
    out["load_avg_1m_at_end"] = os.getloadavg()[0]
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
