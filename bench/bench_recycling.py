"""One recycled container over many executions (figures, not tests), to choose the recycling
policy's bounds by measurement. Run: ``python bench/bench_recycling.py [--executions N]
[--runtime runsc]``; prints JSON.

The container serves ``N`` executions of a SpreadsheetBench-style program (openpyxl: load,
edit, save; every 10th also imports pandas, as some generated programs do), each followed by a
reset (``SandboxRuntime.reset``), the way a tenant's rollouts use it. Per block of executions:
the execution's and the reset's p50, and the runner's resident memory (from the host's
``/proc``). Beside it, the cost of the alternative, a fresh container per execution: create to
runner hello, and removal, with the CPU the whole machine spent on them (``/proc/stat``), to
compare with a reset's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_sandbox import SCRIPT, _busy_jiffies  # noqa: E402

from sandbox.runtime.docker.runtime import DockerRuntime  # noqa: E402
from sandbox.runtime.spec import ContainerSpec, RuntimeConfig  # noqa: E402
from skillopt.envs.spreadsheetbench.loader import SAMPLE_ROOT, SpreadsheetBenchData  # noqa: E402

_HZ = os.sysconf("SC_CLK_TCK")


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _program(i: int) -> bytes:
    prefix = "INPUT_PATH = 'input.xlsx'\nOUTPUT_PATH = 'output.xlsx'\n"
    extra = "import pandas\n" if i % 10 == 0 else ""
    return (prefix + extra + SCRIPT).encode()


def soak(rt: DockerRuntime, spec: ContainerSpec, executions: int, block: int, xlsx: bytes) -> list[dict]:
    handle = rt.create(spec)
    pid = int(rt.client.api.inspect_container(handle.id)["State"]["Pid"])
    rows, execs, resets = [], [], []
    try:
        for i in range(executions):
            box = rt.lease(handle, f"bench/{i}")
            box.write_file("input.xlsx", xlsx)
            box.write_file("solution.py", _program(i))
            t0 = time.perf_counter()
            out = box.run_python("solution.py", timeout_s=60)
            execs.append((time.perf_counter() - t0) * 1000)
            assert out.exit_code == 0, out.stderr_tail[-1000:]
            assert box.read_file("output.xlsx", max_bytes=1 << 24)
            t0 = time.perf_counter()
            rt.reset(handle)
            resets.append((time.perf_counter() - t0) * 1000)
            if (i + 1) % block == 0:
                rows.append(
                    {
                        "executions": i + 1,
                        "exec_p50_ms": round(statistics.median(execs), 1),
                        "reset_p50_ms": round(statistics.median(resets), 2),
                        "reset_max_ms": round(max(resets), 1),
                        "runner_rss_mib": round(_rss_mib(pid), 1),
                    }
                )
                execs, resets = [], []
    finally:
        rt.destroy(handle)
    return rows


def fresh_cost(rt: DockerRuntime, spec: ContainerSpec, n: int) -> dict[str, float]:
    """A fresh container's whole life without work: create -> hello, removal; and the CPU the
    whole machine spent per container (the engine's, the runner's start, ours)."""
    starts, removals = [], []
    busy0 = _busy_jiffies()[0]
    for _ in range(n):
        t0 = time.perf_counter()
        handle = rt.create(spec)
        starts.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        rt.destroy(handle)
        removals.append((time.perf_counter() - t0) * 1000)
    cpu = (_busy_jiffies()[0] - busy0) / _HZ / n * 1000
    return {
        "n": n,
        "create_to_hello_p50_ms": round(statistics.median(starts), 1),
        "removal_p50_ms": round(statistics.median(removals), 1),
        "machine_cpu_per_container_ms": round(cpu, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--executions", type=int, default=1000)
    parser.add_argument("--block", type=int, default=100)
    parser.add_argument("--runtime", default="", help="OCI runtime ('' = runc, runsc)")
    parser.add_argument("--fresh", type=int, default=10, help="fresh containers for the comparison")
    args = parser.parse_args()
    state = tempfile.mkdtemp(prefix="so-brec-", dir="/tmp")
    rt = DockerRuntime(RuntimeConfig(host_id=f"brec-{uuid.uuid4().hex[:6]}", state_dir=state, pool_size=0))
    spec = ContainerSpec(runtime=args.runtime)
    data = SpreadsheetBenchData(SAMPLE_ROOT)
    xlsx = next(case.input_path.read_bytes() for r in data.records for case in r.cases)
    out: dict[str, object] = {"runtime": args.runtime or "runc", "load_avg_1m_at_start": os.getloadavg()[0]}
    try:
        out["fresh_container"] = fresh_cost(rt, spec, args.fresh)
        busy0 = _busy_jiffies()[0]
        t0 = time.monotonic()
        out["recycled_container"] = soak(rt, spec, args.executions, args.block, xlsx)
        out["recycled_machine_cpu_per_execution_ms"] = round(
            (_busy_jiffies()[0] - busy0) / _HZ / args.executions * 1000, 1
        )
        out["recycled_wall_s"] = round(time.monotonic() - t0, 1)
    finally:
        rt.close()
    out["load_avg_1m_at_end"] = os.getloadavg()[0]
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
