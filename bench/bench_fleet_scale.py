"""Fleet-at-scale figures (issue 13 item 7; figures, not tests). Prints one JSON object.

Run: ``python bench/bench_fleet_scale.py [--quick]``. Every host is a separate ``skillopt serve``
process on this machine's engine, driven by the real fleet client over gRPC; the target is the
offline simulation (correct reference scripts), optionally behind a fixed model latency.

1. ``per_host``: rollouts per minute of one host (capacity 2) with an instant model, next to the
   same generated scripts run as bare host subprocesses (2 at a time) and graded on the host.
2. ``latency_32``: 32 concurrent rollouts on one host (capacity 32) with a 1 s model: failures,
   and the wall time of a rollout over the model's 1 s.
3. ``scaling``: 1 -> 2 -> 4 hosts on a model-latency-bound batch (1 s per call, capacity 4 each).

All hosts share this machine's 2 cores and engine: a host here is a process, not capacity, so
read the ratios of one run side by side (per-host overhead, latency overhead), not absolutes.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
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

from controller.client.sandbox_client import ChannelConfig  # noqa: E402
from controller.embedded import spawn_service, wait_listening  # noqa: E402
from controller.fleet.executor import FleetExecutor  # noqa: E402
from skillopt.envs.spreadsheetbench.cases import prepare_script  # noqa: E402
from skillopt.envs.spreadsheetbench.evaluator import grade_case  # noqa: E402
from skillopt.envs.spreadsheetbench.loader import SAMPLE_ROOT, SpreadsheetBenchData, build_task  # noqa: E402
from skillopt.testing.fixtures.spreadsheetbench import load_catalogue, solution_code  # noqa: E402
from skillopt.testing.scripted import ScriptedModelServer  # noqa: E402
from skillopt.testing.simulation import SIM_TARGET, SimulatedTarget  # noqa: E402
from skillopt.types import Limits, ModelSpec, RolloutRequest, RolloutResult, SkillSpec  # noqa: E402

DATA = SpreadsheetBenchData(SAMPLE_ROOT)
# A skill stating every rule: the simulated target then answers with each task's correct script.
SKILL = "\n".join(f"- {text}" for text in load_catalogue()["rules"].values())


def _tasks() -> list[str]:
    return [tid for tid in load_catalogue()["tasks"] if tid in DATA.ids]


def requests(n: int) -> list[RolloutRequest]:
    ids, run, out = _tasks(), uuid.uuid4().hex[:6], []
    for k in range(n):
        task, grading = build_task(DATA.task(ids[k % len(ids)]))
        out.append(
            RolloutRequest(
                rollout_id=f"bench-{run}/{k}",
                env="spreadsheetbench",
                agent="codegen_single",
                task=dataclasses.replace(task, id=f"{task.id}#{k}"),
                grading=grading,
                skill=SkillSpec(content=SKILL),
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


def serve(tmp: Path, model_url: str, capacity: int, pool: int) -> tuple[subprocess.Popen, str]:
    host = f"bench-{uuid.uuid4().hex[:6]}"
    proc = spawn_service(
        [
            "--listen", "127.0.0.1:0", "--token-file", str(tmp / "token"), "--host-id", host,
            "--state-dir", str(tmp / host), "--capacity", str(capacity), "--pool-size", str(pool),
            "--provider", f"sim=openai_compatible,base_url={model_url},max_retries=0",
            "--exec-agents", "off", "--drain-grace", "5",
        ]
    )  # fmt: skip
    return proc, f"127.0.0.1:{wait_listening(proc, 180)}"


def batch(addresses: list[str], token: str, reqs: list[RolloutRequest], workers: int) -> tuple[list, float]:
    rows: list[RolloutResult] = []
    with FleetExecutor([ChannelConfig(address=a, token=token) for a in addresses], workers=workers) as fleet:
        t0 = time.monotonic()
        fleet.run(reqs, on_result=rows.append, stop=threading.Event())
        return rows, time.monotonic() - t0


def summary(rows: list[RolloutResult], seconds: float) -> dict:
    lat = sorted(r.timings_s.get("total", 0.0) for r in rows)
    return {
        "rollouts": len(rows),
        "failures": sum(1 for r in rows if r.infra_error is not None or r.hard < 1.0),
        "seconds": round(seconds, 2),
        "per_min": round(60 * len(rows) / seconds, 1),
        "latency_p50_s": round(statistics.median(lat), 3) if lat else None,
        "latency_p95_s": round(lat[int(0.95 * (len(lat) - 1))], 3) if lat else None,
    }


def bare_subprocesses(n: int, workers: int) -> dict:
    """The same generated scripts as bare host subprocesses, graded on the host."""
    ids = _tasks()

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

    t0 = time.monotonic()
    with ThreadPoolExecutor(workers) as ex:
        lat = list(ex.map(one, range(n)))
    seconds = time.monotonic() - t0
    return {"rollouts": n, "seconds": round(seconds, 2), "per_min": round(60 * n / seconds, 1),
            "latency_p50_s": round(statistics.median(lat), 3)}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller batches")
    args = parser.parse_args()
    n = 8 if args.quick else 16
    out: dict = {
        "machine": {"cpus": __import__("os").cpu_count(), "load_1m": __import__("os").getloadavg()[0]}
    }
    tmp = Path(tempfile.mkdtemp(prefix="so-bfs-", dir="/tmp"))
    token = uuid.uuid4().hex
    (tmp / "token").write_text(token)
    procs: list[subprocess.Popen] = []
    try:
        # 1. one host, instant model, vs bare subprocesses
        with ScriptedModelServer(responders=[Delayed(0.0)]) as model:
            proc, addr = serve(tmp, model.base_url, capacity=2, pool=2)
            procs.append(proc)
            batch([addr], token, requests(2), workers=2)  # warm-up
            rows, secs = batch([addr], token, requests(n), workers=2)
            sandboxed = summary(rows, secs)
            bare = bare_subprocesses(n, workers=2)
            out["per_host"] = {"sandboxed": sandboxed, "bare_subprocess": bare,
                               "ratio_sandboxed_over_bare": round(sandboxed["per_min"] / bare["per_min"], 2)}  # fmt: skip
            proc.terminate()
            proc.wait(120)
        # 2. 32 concurrent rollouts, 1 s model, one host
        with ScriptedModelServer(responders=[Delayed(1.0)]) as model:
            proc, addr = serve(tmp, model.base_url, capacity=32, pool=8)
            procs.append(proc)
            rows, secs = batch([addr], token, requests(32), workers=32)
            s = summary(rows, secs)
            s["overhead_over_model_p50_s"] = round(s["latency_p50_s"] - 1.0, 3)
            out["latency_32"] = s
            proc.terminate()
            proc.wait(120)
        # 3. 1 -> 2 -> 4 hosts, model-latency-bound
        out["scaling"] = {}
        with ScriptedModelServer(responders=[Delayed(1.0)]) as model:
            for hosts in (1, 2, 4):
                started = [serve(tmp, model.base_url, capacity=4, pool=2) for _ in range(hosts)]
                procs += [p for p, _ in started]
                rows, secs = batch([a for _, a in started], token, requests(4 * n // 2), workers=4 * hosts)
                out["scaling"][f"{hosts}_hosts"] = summary(rows, secs)
                for p, _ in started:
                    p.terminate()
                    p.wait(120)
        base = out["scaling"]["1_hosts"]["per_min"]
        out["scaling"]["speedup"] = {
            k: round(v["per_min"] / base, 2) for k, v in out["scaling"].items() if k != "speedup"
        }
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait(120)
        subprocess.run(["rm", "-rf", str(tmp)], check=False)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
