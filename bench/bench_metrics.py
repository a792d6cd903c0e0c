"""Prometheus metrics' cost (figures, not tests). Run: ``python bench/bench_metrics.py``.

1. The service's CPU per rollout with ``--metrics-listen`` and without, in one run: two hosts
   side by side (each its own process, the same scripted model server's reply), rollouts
   alternating between them one at a time; each host's CPU (user + system, from /proc) over
   its rollouts. Target: metrics on within 3% of off.
2. A scrape of a host with 64 live sessions (real containers, created through the API) and
   10,000 rollouts recorded (real result rows through the recorder, varied envs, agents and
   outcomes, with their executions and model calls): the wall time of ``GET /metrics``, p50 /
   p99 / max, and its size. Target: <= 10 ms.

Timings are noisy on a shared 2-core machine: compare the columns of one run, side by side.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import sys
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from tempfile import TemporaryDirectory

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_sandbox import FIRST, codegen_request, host, model_server, pct  # noqa: E402

from controller.client.sessions import SandboxSession, SessionEndpoints  # noqa: E402
from sandbox.runtime.spec import DEFAULT_IMAGE, ContainerSpec, RuntimeConfig  # noqa: E402
from sandbox.server.serve import ServerConfig, serve  # noqa: E402
from sandbox.service.admission import RolloutHandle  # noqa: E402
from sandbox.service.config import ServiceConfig, SessionConfig  # noqa: E402
from skillopt.envs.base import ProgressEvent  # noqa: E402
from skillopt.envs.registry import available_envs, get_env  # noqa: E402
from skillopt.envs.spreadsheetbench.loader import SAMPLE_ROOT, SpreadsheetBenchData, build_task  # noqa: E402
from skillopt.types import (  # noqa: E402
    ExecRecord,
    InfraErrorKind,
    InfraFailure,
    ModelSpec,
    RolloutRequest,
    RolloutResult,
    SkillVersion,
    Trace,
    Usage,
)

_HZ = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` and its reaped children, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / _HZ


def cpu_per_rollout(n: int) -> dict[str, float]:
    """Section 1: CPU ms per rollout of the host with metrics and the one without."""
    sample = SpreadsheetBenchData(SAMPLE_ROOT)
    task, grading = build_task(sample.task("32255"))

    def request() -> RolloutRequest:
        return codegen_request(task, grading)

    reply = f"```python\n{FIRST}```"
    with (
        model_server(reply) as base_url,
        host(base_url, 1, extra=["--metrics-listen", "127.0.0.1:0"]) as (on_proc, on, _),
        host(base_url, 1) as (off_proc, off, _),
    ):
        hosts = {"on": (on, on_proc.pid), "off": (off, off_proc.pid)}
        for client, _ in hosts.values():
            for _ in range(3):
                client.run(request(), timeout_s=120)  # first-use imports, channels
        spent = {k: 0.0 for k in hosts}
        for _ in range(n):
            for name, (client, pid) in hosts.items():
                before = cpu_s(pid)
                client.run(request(), timeout_s=120)
                spent[name] += cpu_s(pid) - before
    on_ms, off_ms = 1000 * spent["on"] / n, 1000 * spent["off"] / n
    return {
        "cpu_ms_per_rollout_metrics_on": on_ms,
        "cpu_ms_per_rollout_metrics_off": off_ms,
        "on_over_off": on_ms / off_ms,
    }


def _record(metrics, n: int, pairs: list[tuple[str, str]]) -> None:
    """``n`` rollouts' rows of ``pairs`` (env, agent) through the recorder, as the servicer
    hands them over."""
    rng = random.Random(7)
    kinds = ["scored"] * 8 + [str(InfraErrorKind.TIMEOUT), str(InfraErrorKind.MODEL_UNAVAILABLE)]
    for i in range(n):
        env, agent = pairs[i % len(pairs)]
        request = _request(env, agent, i)
        handle = RolloutHandle(request.rollout_id, "")
        handle.events = [(0, ProgressEvent(phase="accepted")), (int(5e6), ProgressEvent(phase="exec"))]
        outcome = rng.choice(kinds)
        infra = None if outcome == "scored" else InfraFailure(kind=InfraErrorKind(outcome), message="x")
        result = RolloutResult(
            id=request.task.id,
            rollout_id=request.rollout_id,
            hard=1.0,
            infra_error=infra,
            trace=Trace(
                executions=tuple(
                    ExecRecord(
                        turn=t,
                        case="",
                        code="",
                        exit_code=0,
                        stdout_tail="",
                        stderr_tail="",
                        duration_s=rng.random() / 10,
                    )
                    for t in range(3)
                )
            ),
            timings_s={"acquire": rng.random() / 50, "grade": rng.random(), "total": rng.random() * 30},
        )
        metrics.rollout_finished(handle, request, result, wait_s=rng.random() / 100)
        for _ in range(3):
            metrics.model_call(
                "scripted",
                rng.random(),
                Usage(calls=1, prompt_tokens=900, completion_tokens=80),
                status=200,
                replayed=False,
            )


_SAMPLE: list[RolloutRequest] = []


def _request(env: str, agent: str, i: int) -> RolloutRequest:
    if not _SAMPLE:
        sample = SpreadsheetBenchData(SAMPLE_ROOT)
        task, grading = build_task(sample.task("32255"))
        _SAMPLE.append(
            RolloutRequest(
                rollout_id="r", env=env, agent=agent, task=task, grading=grading,
                skill=SkillVersion(content=""), model=ModelSpec(provider="scripted", model="m"),
            )
        )  # fmt: skip
    return dataclasses.replace(_SAMPLE[0], rollout_id=f"r{i}", env=env, agent=agent)


def scrape_latency(sessions: int, rollouts: int, scrapes: int) -> dict[str, float]:
    """Section 2: GET /metrics of a host with ``sessions`` live and ``rollouts`` recorded."""
    with TemporaryDirectory(prefix="so-bench-metrics-", dir="/tmp") as tmp:
        spec = ContainerSpec(image=DEFAULT_IMAGE)
        config = ServerConfig(
            listen="127.0.0.1:0",
            token="bench",
            runtime=RuntimeConfig(host_id=f"bench-m-{uuid.uuid4().hex[:6]}", state_dir=tmp, pool_size=0),
            service=ServiceConfig(host_id="bench", capacity=2, base_spec=spec),
            sessions=SessionConfig(max_sessions=sessions),
            exec_agents="off",
            metrics_listen="127.0.0.1:0",
        )
        with serve(config) as running:
            where = SessionEndpoints(endpoints=(running.address,), token="bench")
            t0 = time.monotonic()
            with ThreadPoolExecutor(4) as pool:
                live = list(pool.map(lambda _: SandboxSession.create(where), range(sessions)))
            created_s = time.monotonic() - t0
            url = f"http://127.0.0.1:{running.metrics_port}/metrics"
            figures = {"sessions_live": float(sessions), "sessions_created_s": created_s}
            # A host's usual mix (one env, three agents), then every env and agent of the
            # registry on top (the largest label set a host can have).
            typical = [("spreadsheetbench", a) for a in ("codegen_single", "react", "codex_exec")]
            every = [(name, agent) for name in available_envs() for agent in get_env(name).agents]
            for label, pairs in (("typical", typical), ("every_pair", every)):
                _record(running.servicer.metrics, rollouts, pairs)
                figures |= {
                    f"{label}_{k}": v for k, v in _scrape(url, running.servicer.metrics, scrapes).items()
                }
            for session in live:
                session.destroy()
    return figures


def _scrape(url: str, metrics, scrapes: int) -> dict[str, float]:
    """GET /metrics ``scrapes`` times (wall ms), and the CPU of rendering the exposition alone
    (in this process, the host's)."""
    from prometheus_client import generate_latest

    times, render, size = [], [], 0
    for _ in range(scrapes):
        t = time.perf_counter()
        with urllib.request.urlopen(url, timeout=10) as reply:
            size = len(reply.read())
        times.append((time.perf_counter() - t) * 1000)
        t = time.process_time()  # CPU: what a loaded machine's waiting does not inflate
        generate_latest(metrics.registry)
        render.append((time.process_time() - t) * 1000)
    return {
        "scrape_ms_p50": pct(times, 50),
        "scrape_ms_p99": pct(times, 99),
        "render_cpu_ms_p50": pct(render, 50),
        "exposition_kib": size / 1024,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rollouts", type=int, default=150, help="rollouts on each host in section 1")
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--recorded", type=int, default=10_000)
    parser.add_argument("--scrapes", type=int, default=200)
    parser.add_argument("--scrape-only", action="store_true", help="only section 2")
    args = parser.parse_args()
    from skillopt.logs import configure_logging

    configure_logging(json=False, level="warning")
    if not args.scrape_only:
        print("== service CPU per rollout, metrics on vs off (alternating, one run) ==")
        for k, v in cpu_per_rollout(args.rollouts).items():
            print(f"  {k:36s} {v:9.3f}")
    print(f"== GET /metrics, {args.sessions} live sessions, {args.recorded} rollouts recorded ==")
    for k, v in scrape_latency(args.sessions, args.recorded, args.scrapes).items():
        print(f"  {k:36s} {v:9.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
