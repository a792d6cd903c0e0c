"""Soak: does a sandbox host leak under hours of mixed load? (figures, not a test).

Run: ``python bench/bench_soak.py --duration 7200 [--runtime runc|runsc|all]``.

Per runtime (``runsc`` only when the engine has it registered: said when it is not), against a
real ``skillopt serve`` process and the scripted model server, for ``--duration`` seconds:

- rollouts at concurrency 8 (``--concurrency``; SpreadsheetBench codegen, one execution each),
  every one with a new 10-file skill package, through a 4 MiB blob cache: the cache evicts all
  the time;
- a session created, used (exec, file write and read back) and destroyed, over and over;
- every ``--cycle-s`` a second, short-lived host takes two rollouts and, while they run, gets a
  SIGHUP or (alternately) a SIGTERM, which drains it; after it exits none of its containers may
  be left.

Every ``--sample-s`` it samples the long-lived host's process tree (RSS, open descriptors,
threads), our containers (by the ``skillopt.host`` label of this soak's hosts), the files in
the hosts' directories (state dir and ``TMPDIR``) and the engine's memory (dockerd and
containerd RSS). At the end it prints each one's least-squares slope per hour after warm-up
(``--warmup-frac`` of the run), the host's RSS per 100 rollouts (against the work done, so it
compares across throughputs), and every infrastructure row (a rollout with ``infra_error``,
a session call that failed, a host cycle that left containers or did not exit cleanly). Exit
status 1 when a slope exceeds its threshold (``--max-slope name=value``) or an infra row
appeared.

A 2-core machine shared with other work makes absolute figures noisy; the slopes are what this
measures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from bench_sandbox import FIRST, ROOT, bench_package, codegen_request, host, model_server
from bench_sessions import rss_bytes

sys.path.insert(0, str(ROOT))

import docker

from controller.client.sandbox_client import SandboxClient
from controller.client.sessions import SandboxSession, SessionEndpoints
from sandbox.runtime.labels import LABEL_HOST, LABEL_MANAGED
from skillopt.envs.spreadsheetbench.loader import SAMPLE_ROOT, SpreadsheetBenchData, build_task
from skillopt.errors import SkillOptError
from skillopt.types import RolloutRequest

MiB = 1024 * 1024
CONCURRENCY = 8
#: Slope thresholds per hour after warm-up (a flat series is ~0; noise on this machine is a
#: few MiB / a few descriptors either way over 15 minutes).
DEFAULT_MAX_SLOPE = {
    "host_rss_mib": 20.0,
    "host_fds": 10.0,
    "host_threads": 5.0,
    "containers": 2.0,
    "temp_files": 10.0,
    "engine_rss_mib": 50.0,
}


@dataclass
class Soak:
    """What one runtime's soak saw: samples, infra rows, counters."""

    runtime: str
    prefix: str
    samples: list[dict[str, float]] = field(default_factory=list)
    infra: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, key: str, n: int = 1) -> None:
        with self.lock:
            self.counts[key] = self.counts.get(key, 0) + n

    def bad(self, row: str) -> None:
        with self.lock:
            self.infra.append(row)
        print(f"  INFRA [{self.runtime}] {row}", flush=True)


def available_runtimes() -> set[str]:
    """The OCI runtimes the Docker engine has registered (``runc``, ``runsc`` ...)."""
    return set((docker.from_env().info().get("Runtimes") or {}).keys())


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (grader workers), from ``/proc/<pid>/task/*/children``."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*"):
            with contextlib.suppress(OSError):  # a thread or worker that just ended
                todo += [int(c) for c in (task / "children").read_text().split()]
    return out


def _threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


def engine_rss_bytes() -> int:
    """Resident memory of the Docker engine's daemons (dockerd, containerd; not the per-container
    shims, which the container count covers)."""
    total = 0
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if (proc / "comm").read_text().strip() in ("dockerd", "containerd"):
                total += rss_bytes(proc.name)
        except OSError:
            pass
    return total


def sample(soak: Soak, pid: int, dirs: list[Path], engine: docker.DockerClient) -> dict[str, float]:
    """One row of every leak indicator."""
    rss = fds = threads = 0
    for p in process_tree(pid):
        try:
            rss += rss_bytes(p)
            fds += sum(1 for _ in Path(f"/proc/{p}/fd").iterdir())
            threads += _threads(p)
        except OSError:  # a worker that just exited
            pass
    ours = _ours(engine, soak.prefix)
    # os.walk skips a directory removed while it walks (the package store evicts versions).
    temp = sum(len(files) for d in dirs for _, _, files in os.walk(d))
    return {
        "host_rss_mib": rss / MiB,
        "host_fds": fds,
        "host_threads": threads,
        "containers": len(ours),
        "temp_files": temp,
        "engine_rss_mib": engine_rss_bytes() / MiB,
    }


def slope_per_hour(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value) points, per hour."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(t for t, _ in points) / n
    my = sum(v for _, v in points) / n
    sxx = sum((t - mx) ** 2 for t, _ in points)
    sxy = sum((t - mx) * (v - my) for t, v in points)
    return sxy / sxx * 3600 if sxx else 0.0


def _request(task, grading, tag: str) -> RolloutRequest:
    skill = bench_package(files=10, total_bytes=512 * 1024)  # new content: blob-cache churn
    return codegen_request(task, grading, skill=skill, tag=f"soak/{tag}", wall_time_s=120)


def rollout_loop(soak: Soak, client: SandboxClient, stop: threading.Event, make) -> None:
    while not stop.is_set():
        req = make("main")
        try:
            row = client.run(req, timeout_s=300)
        except SkillOptError as exc:  # the long-lived host never drains: any refusal is a fault
            soak.bad(f"rollout {req.rollout_id}: {type(exc).__name__}: {exc}")
            continue
        soak.count("rollouts")
        if row.infra_error is not None:
            soak.bad(f"rollout {req.rollout_id}: infra_error {row.infra_error} ({row.fail_reason})")


def session_loop(soak: Soak, where: SessionEndpoints, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            with SandboxSession.create(where, timeout_s=300) as box:
                out = box.exec(["sh", "-c", "echo soak; ls /workspace | wc -l"], timeout=60)
                data = uuid.uuid4().bytes * 4096
                box.write_file("blob.bin", data)
                if out.exit_code != 0 or box.read_file("blob.bin") != data:
                    soak.bad(f"session {box.id}: exit {out.exit_code}, or the file came back different")
            soak.count("sessions")
        except SkillOptError as exc:
            soak.bad(f"session: {type(exc).__name__}: {exc}")


def host_cycle(soak: Soak, base_url: str, runtime_args: list[str], make, n: int) -> None:
    """A short-lived host takes two rollouts; mid-flight it gets SIGHUP (odd n) or SIGTERM (even
    n: a drain). Rollouts must end as rows or typed refusals, and it must leave no container."""
    sig = signal.SIGHUP if n % 2 else signal.SIGTERM
    host_id = f"{soak.prefix}-cycle{n}"
    outcomes: list[str] = []
    with (
        host(base_url, 2, host_id=host_id, extra=runtime_args) as (proc, client, _dir),
        ThreadPoolExecutor(2) as pool,
    ):

        def one(_: int) -> str:
            try:
                row = client.run(make("cycle"), timeout_s=300)
                return f"infra:{row.infra_error}" if row.infra_error is not None else "row"
            except SkillOptError as exc:
                return f"refused:{type(exc).__name__}"

        futures = [pool.submit(one, i) for i in range(2)]
        deadline = time.monotonic() + 60  # signal once both are running on the host
        while time.monotonic() < deadline and client.describe().running < 2:
            time.sleep(0.05)
        t0 = time.monotonic()
        proc.send_signal(sig)
        try:
            code = proc.wait(90)
        except subprocess.TimeoutExpired:
            code = None
        exit_s = time.monotonic() - t0
        outcomes = [f.result() for f in futures]
    left = [
        c["Id"][:12]
        for c in docker.from_env().api.containers(all=True, filters={"label": f"{LABEL_HOST}={host_id}"})
    ]
    name = signal.Signals(sig).name
    soak.count(f"cycles_{name}")
    soak.count(f"cycle_exit_s_{name}_total_ms", int(exit_s * 1000))
    detail = f"host cycle {n} ({name}): exit {code} after {exit_s:.1f}s, rollouts {outcomes}, left {left}"
    print(f"  [{soak.runtime}] {detail}", flush=True)
    if code != 0 or left or any(o.startswith("infra") for o in outcomes):
        soak.bad(detail)


def soak_runtime(runtime: str, args: argparse.Namespace) -> Soak:
    soak = Soak(runtime=runtime, prefix=f"soak-{uuid.uuid4().hex[:6]}")
    runtime_args = ["--runtime", runtime] if runtime != "runc" else []
    sample_data = SpreadsheetBenchData(SAMPLE_ROOT)
    task, grading = build_task(sample_data.task("32255"))

    def make(tag: str) -> RolloutRequest:
        return _request(task, grading, tag)

    engine = docker.from_env()
    stop = threading.Event()
    extra = [*runtime_args, "--blob-cache-mb", "4", "--max-sessions", "4", "--exec-agents", "off"]
    with (
        model_server(f"```python\n{FIRST}```") as base_url,
        host(base_url, args.concurrency, host_id=f"{soak.prefix}-main", extra=extra) as (
            proc,
            client,
            hostdir,
        ),
    ):
        where = SessionEndpoints(endpoints=(client.config.address,), token="bench")
        workers = [
            threading.Thread(target=rollout_loop, args=(soak, client, stop, make))
            for _ in range(args.concurrency)
        ]
        workers.append(threading.Thread(target=session_loop, args=(soak, where, stop)))
        for w in workers:
            w.start()
        t0 = time.monotonic()
        next_cycle, n = t0 + args.cycle_s, 0
        try:
            while (now := time.monotonic()) - t0 < args.duration:
                row = {"t": now - t0, **sample(soak, proc.pid, [hostdir], engine)}
                row["rollouts"] = soak.counts.get("rollouts", 0)
                soak.samples.append(row)
                print(f"  [{runtime}] " + json.dumps({k: round(v, 1) for k, v in row.items()} | soak.counts))
                if now >= next_cycle:
                    n += 1
                    host_cycle(soak, base_url, runtime_args, make, n)
                    next_cycle = time.monotonic() + args.cycle_s
                time.sleep(max(0.0, args.sample_s - (time.monotonic() - now)))  # the sampling period
        finally:
            stop.set()
            for w in workers:
                w.join(600)
        if proc.poll() is not None:
            soak.bad(f"the long-lived host exited ({proc.returncode})")
    _remove_left(engine, soak.prefix)
    return soak


def _ours(engine: docker.DockerClient, prefix: str) -> list[dict]:
    """Containers of this soak's hosts (their ``skillopt.host`` label starts with ``prefix``)."""
    return [
        c
        for c in engine.api.containers(all=True, filters={"label": f"{LABEL_MANAGED}=1"})
        if (c.get("Labels") or {}).get(LABEL_HOST, "").startswith(prefix)
    ]


def _remove_left(engine: docker.DockerClient, prefix: str) -> None:
    """Remove what this soak's hosts left (already counted as infra rows), and nothing else."""
    for c in _ours(engine, prefix):
        with contextlib.suppress(docker.errors.APIError):
            engine.api.remove_container(c["Id"], force=True)


def report(soak: Soak, warmup_frac: float, max_slope: dict[str, float]) -> bool:
    """Print slopes and infra rows; True when the runtime passed."""
    start = soak.samples[-1]["t"] * warmup_frac if soak.samples else 0.0
    kept = [s for s in soak.samples if s["t"] >= start]
    ok = not soak.infra
    print(f"== {soak.runtime}: {len(kept)} samples after {start / 60:.1f} min of warm-up; {soak.counts} ==")
    print(f"  {'indicator':16s} {'first':>9s} {'last':>9s} {'slope/h':>9s} {'max/h':>7s}")
    for key, limit in max_slope.items():
        slope = slope_per_hour([(s["t"], s[key]) for s in kept])
        over = abs(slope) > limit if key == "engine_rss_mib" else slope > limit
        ok = ok and not over
        first, last = (kept[0][key], kept[-1][key]) if kept else (0.0, 0.0)
        flag = "  OVER" if over else ""
        print(f"  {key:16s} {first:9.1f} {last:9.1f} {slope:9.2f} {limit:7.1f}{flag}")
    # Per rollout too: a leak that grows with work shows the same figure at any throughput.
    per_100 = slope_per_hour([(s["rollouts"], s["host_rss_mib"]) for s in kept]) / 36
    print(f"  host RSS per 100 rollouts of the long-lived host: {per_100:+.2f} MiB")
    print(f"  infrastructure rows: {len(soak.infra)}")
    for row in soak.infra:
        print(f"    {row}")
    return ok


def _slopes(values: list[str]) -> dict[str, float]:
    out = dict(DEFAULT_MAX_SLOPE)
    for v in values:
        key, _, limit = v.partition("=")
        if key not in out:
            raise SystemExit(f"--max-slope: unknown indicator {key!r} (one of {sorted(out)})")
        out[key] = float(limit)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, required=True, help="seconds per runtime")
    parser.add_argument("--runtime", default="all", help="runc, runsc, or all (those registered)")
    parser.add_argument(
        "--concurrency", type=int, default=CONCURRENCY, help="rollouts at once (4 on a loaded machine)"
    )
    parser.add_argument("--sample-s", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--cycle-s", type=float, default=60.0, help="seconds between host cycles")
    parser.add_argument("--warmup-frac", type=float, default=0.25, help="share of the run left out of slopes")
    parser.add_argument("--max-slope", action="append", default=[], help="indicator=per-hour limit")
    args = parser.parse_args()
    max_slope = _slopes(args.max_slope)
    have = available_runtimes()
    wanted = ["runc", "runsc"] if args.runtime == "all" else [args.runtime]
    ok = True
    for runtime in wanted:
        if runtime not in have:
            print(f"== {runtime}: not registered with the Docker engine (have {sorted(have)}): skipped ==")
            if args.runtime != "all":
                ok = False
            continue
        ok = report(soak_runtime(runtime, args), args.warmup_frac, max_slope) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
