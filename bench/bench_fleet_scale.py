"""Fleet-at-scale figures (issue 13 item 7; figures, not tests). Prints one JSON object.

Run: ``python bench/bench_fleet_scale.py [--quick] [--scaling-latency S]``. Every host is a
separate ``skillopt serve`` process on this machine's engine, driven by the real fleet client
over gRPC; the target is the offline simulation (each task's correct reference script),
optionally behind a fixed model latency. Every timed batch starts on a host in steady state:
its warm pool full (pool size = capacity, the serve default) after a warm-up batch.

1. ``per_host``: rollouts per minute of one host (capacity 2) with an instant model, next to
   the same generated scripts run as bare host subprocesses (2 at a time, each case a fresh
   ``python``) and graded on the host, separately for 1-case and 3-case tasks (SpreadsheetBench
   has both: 121 and 135 of the 256 shared tasks). A rollout pays one container (its creation,
   the runner's start and openpyxl import) plus a fork per execution; a bare run pays a Python
   start and the imports per execution. ``machine_cpu_s_per_rollout`` counts every process.
2. ``latency_32``: 32 concurrent rollouts on one host (capacity 32) with a 1 s model: failures,
   and a rollout's wall time over the model's 1 s.
3. ``scaling``: 1 -> 2 -> 4 hosts (capacity 4 each) on a model-latency-bound batch.

All hosts share this machine's 2 cores and engine: a host here is a process, not capacity. A
phase whose ``machine_cpu_busy`` is near 1.0 was bound by the shared CPU, not by its hosts:
read the ratios of one run side by side, not absolutes.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from controller.client.sandbox_client import ChannelConfig, SandboxClient  # noqa: E402
from controller.embedded import spawn_service, wait_listening  # noqa: E402
from controller.fleet.executor import FleetExecutor  # noqa: E402
from skillopt.envs.spreadsheetbench.cases import prepare_script  # noqa: E402
from skillopt.envs.spreadsheetbench.evaluator import grade_case  # noqa: E402
from skillopt.envs.spreadsheetbench.loader import SAMPLE_ROOT, SpreadsheetBenchData, build_task  # noqa: E402
from skillopt.logs import configure_logging  # noqa: E402
from skillopt.testing.fixtures.spreadsheetbench import load_catalogue, solution_code  # noqa: E402
from skillopt.testing.scripted import ScriptedModelServer  # noqa: E402
from skillopt.testing.simulation import SIM_TARGET, SimulatedTarget  # noqa: E402
from skillopt.types import Limits, ModelSpec, RolloutRequest, RolloutResult, SkillVersion  # noqa: E402

DATA = SpreadsheetBenchData(SAMPLE_ROOT)
# A skill stating every rule: the simulated target then answers with each task's correct script.
SKILL = "\n".join(f"- {text}" for text in load_catalogue()["rules"].values())


def _tasks(cases: int | None = None) -> list[str]:
    ids = [tid for tid in load_catalogue()["tasks"] if tid in DATA.ids]
    return [tid for tid in ids if cases is None or len(DATA.task(tid).cases) == cases]


def requests(n: int, ids: list[str]) -> list[RolloutRequest]:
    run, out = uuid.uuid4().hex[:6], []
    for k in range(n):
        task, grading = build_task(DATA.task(ids[k % len(ids)]))
        out.append(
            RolloutRequest(
                rollout_id=f"bench-{run}/{k}",
                env="spreadsheetbench",
                agent="codegen_single",
                task=dataclasses.replace(task, id=f"{task.id}#{k}"),
                grading=grading,
                skill=SkillVersion(content=SKILL),
                model=ModelSpec(provider="sim", model=SIM_TARGET),
                limits=Limits(wall_time_s=300, exec_timeout_s=120),
            )
        )
    return out


class Delayed:
    """The simulated target behind a fixed model latency."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s, self.target = delay_s, SimulatedTarget()

    def __call__(self, req):
        if self.delay_s:
            time.sleep(self.delay_s)
        return self.target(req)


def machine_cpu() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    hz = os.sysconf("SC_CLK_TCK")
    return (sum(fields) - fields[3] - fields[4]) / hz, sum(fields) / hz


def tree_cpu(root: int) -> float:
    """CPU seconds of process ``root`` and its live descendants (a host: the service and its
    grader workers), children it reaped included."""
    hz = os.sysconf("SC_CLK_TCK")
    stats: dict[int, list[str]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                text = (d / "stat").read_text()
            except OSError:
                continue
            stats[int(d.name)] = text[text.rfind(")") + 2 :].split()
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        kids = [pid for pid, f in stats.items() if int(f[1]) == parent and pid not in tree]
        tree.update(kids)
        frontier += kids
    return sum(sum(int(x) for x in stats[pid][11:15]) for pid in tree if pid in stats) / hz


class Host:
    """One ``skillopt serve`` process (pool size = capacity, the default)."""

    def __init__(self, tmp: Path, model_url: str, capacity: int) -> None:
        self.host_id, self.capacity = f"bench-{uuid.uuid4().hex[:6]}", capacity
        self.proc = spawn_service(
            [
                "--listen", "127.0.0.1:0", "--token-file", str(tmp / "token"), "--host-id", self.host_id,
                "--state-dir", str(tmp / self.host_id), "--capacity", str(capacity),
                "--provider", f"sim=openai_compatible,base_url={model_url},max_retries=0",
                "--exec-agents", "off", "--drain-grace", "5", "--log-level", "warning",
            ]
        )  # fmt: skip
        self.address = f"127.0.0.1:{wait_listening(self.proc, 180)}"
        self.token = (tmp / "token").read_text()

    def wait_warm(self) -> None:
        """Until the host's warm pool is full (a benchmark may poll)."""
        with SandboxClient(ChannelConfig(address=self.address, token=self.token)) as client:
            for _ in range(1200):
                if sum(client.describe().pool_idle.values()) >= self.capacity:
                    return
                time.sleep(0.1)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(120)


def batch(hosts: list[Host], reqs: list[RolloutRequest], workers: int) -> dict:
    """Run ``reqs`` over ``hosts`` (each warm first); throughput, latency, CPU."""
    for h in hosts:
        h.wait_warm()
    rows: list[RolloutResult] = []
    channels = [ChannelConfig(address=h.address, token=h.token) for h in hosts]
    with FleetExecutor(channels, workers=workers) as fleet:
        busy0, total0 = machine_cpu()
        hosts0, me0 = sum(tree_cpu(h.proc.pid) for h in hosts), time.process_time()
        t0 = time.monotonic()
        fleet.run(reqs, on_result=rows.append, stop=threading.Event())
        seconds = time.monotonic() - t0
        busy1, total1 = machine_cpu()
        hosts1, me1 = sum(tree_cpu(h.proc.pid) for h in hosts), time.process_time()
    n = max(1, len(rows))
    lat = sorted(r.timings_s.get("total", 0.0) for r in rows)
    return {
        "rollouts": len(rows),
        "failures": sum(1 for r in rows if r.infra_error is not None or r.hard < 1.0),
        "seconds": round(seconds, 2),
        "per_min": round(60 * len(rows) / seconds, 1),
        "latency_p50_s": round(statistics.median(lat), 3) if lat else None,
        "latency_p95_s": round(lat[int(0.95 * (len(lat) - 1))], 3) if lat else None,
        "machine_cpu_s_per_rollout": round((busy1 - busy0) / n, 3),
        # Where it went: the hosts (service, grader workers), this process (the fleet client
        # and the scripted model server), the rest (the engine: dockerd, containerd, shims,
        # runc; the containers' runners and programs; the kernel).
        "cpu_s_per_rollout": {
            "hosts": round((hosts1 - hosts0) / n, 4),
            "client_and_model": round((me1 - me0) / n, 4),
            "engine_and_containers": round(((busy1 - busy0) - (hosts1 - hosts0) - (me1 - me0)) / n, 4),
        },
        "machine_cpu_busy": round((busy1 - busy0) / max(1e-9, total1 - total0), 2),
    }


def bare_subprocesses(n: int, ids: list[str], workers: int) -> dict:
    """The same generated scripts as bare host subprocesses, graded on the host."""

    def one(k: int) -> float:
        tid = ids[k % len(ids)]
        task, grading = build_task(DATA.task(tid))
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="so-bare-") as d:
            for case, gold in zip(task.cases, grading.cases, strict=True):
                inp, out = Path(d) / f"{case.name}_in.xlsx", Path(d) / f"{case.name}_out.xlsx"
                inp.write_bytes(case.files[0].content)
                script = Path(d) / f"{case.name}.py"
                script.write_text(prepare_script(solution_code(tid), str(inp), str(out)))
                subprocess.run([sys.executable, str(script)], capture_output=True, timeout=120, cwd=d)
                verdict = grade_case(out, gold.files[0].content, task.attributes["answer_position"])
                assert verdict.ok, (tid, verdict.reason)
        return time.monotonic() - t0

    busy0, total0 = machine_cpu()
    t0 = time.monotonic()
    with ThreadPoolExecutor(workers) as ex:
        lat = list(ex.map(one, range(n)))
    seconds = time.monotonic() - t0
    busy1, total1 = machine_cpu()
    return {
        "rollouts": n,
        "seconds": round(seconds, 2),
        "per_min": round(60 * n / seconds, 1),
        "latency_p50_s": round(statistics.median(lat), 3),
        "machine_cpu_s_per_rollout": round((busy1 - busy0) / n, 3),
        "machine_cpu_busy": round((busy1 - busy0) / max(1e-9, total1 - total0), 2),
    }


def per_host(tmp: Path, n: int) -> dict:
    out: dict = {}
    with ScriptedModelServer(responders=[Delayed(0.0)]) as model:
        host = Host(tmp, model.base_url, capacity=2)
        try:
            for cases in (1, 3):
                ids = _tasks(cases)
                batch([host], requests(2, ids), workers=2)  # warm-up: connections, first imports
                sandboxed = batch([host], requests(n, ids), workers=2)
                bare = bare_subprocesses(n, ids, workers=2)
                out[f"{cases}_case_tasks"] = {
                    "sandboxed": sandboxed,
                    "bare_subprocess": bare,
                    "ratio_sandboxed_over_bare": round(sandboxed["per_min"] / bare["per_min"], 2),
                }
        finally:
            host.stop()
    return out


def latency_32(tmp: Path) -> dict:
    with ScriptedModelServer(responders=[Delayed(1.0)]) as model:
        host = Host(tmp, model.base_url, capacity=32)
        try:
            s = batch([host], requests(32, _tasks()), workers=32)
        finally:
            host.stop()
    s["overhead_over_model_p50_s"] = round(s["latency_p50_s"] - 1.0, 3)
    s["overhead_over_model_p95_s"] = round(s["latency_p95_s"] - 1.0, 3)
    return s


def scaling(tmp: Path, n: int, latency_s: float) -> dict:
    out: dict = {"model_latency_s": latency_s}
    with ScriptedModelServer(responders=[Delayed(latency_s)]) as model:
        for count in (1, 2, 4):
            hosts = [Host(tmp, model.base_url, capacity=4) for _ in range(count)]
            try:
                out[f"{count}_hosts"] = batch(hosts, requests(n, _tasks()), workers=4 * count)
            finally:
                for h in hosts:
                    h.stop()
    base = out["1_hosts"]["per_min"]
    out["speedup"] = {f"{c}_hosts": round(out[f"{c}_hosts"]["per_min"] / base, 2) for c in (1, 2, 4)}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller batches")
    parser.add_argument(
        "--scaling-latency", type=float, default=1.0, help="model latency of the scaling batch (s)"
    )
    parser.add_argument("--only", choices=["per_host", "latency_32", "scaling"], help="one section")
    args = parser.parse_args()
    configure_logging(json=True, level="warning", stream=sys.stderr)
    n = 8 if args.quick else 16
    out: dict = {"machine": {"cpus": os.cpu_count(), "load_1m": os.getloadavg()[0]}}
    tmp = Path(tempfile.mkdtemp(prefix="so-bfs-", dir="/tmp"))
    (tmp / "token").write_text(uuid.uuid4().hex)
    try:
        if args.only in (None, "per_host"):
            out["per_host"] = per_host(tmp, n)
        if args.only in (None, "latency_32"):
            out["latency_32"] = latency_32(tmp)
        if args.only in (None, "scaling"):
            out["scaling"] = scaling(tmp, 2 * n, args.scaling_latency)
    finally:
        subprocess.run(["rm", "-rf", str(tmp)], check=False)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
