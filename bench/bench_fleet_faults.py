"""The fleet under faults, measured: one batch over three `skillopt serve` hosts undisturbed,
the same batch with one host killed (SIGKILL) after a third of the rows, and a batch on a host
that another client keeps full for the first seconds. Prints rows, infra rows and wall times;
the ratio killed/undisturbed is the figure (the issue's bar: < 2x).

    .venv/bin/python bench/bench_fleet_faults.py [--rollouts 60] [--capacity 2]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import shutil
import signal
import tempfile
import threading
import time
import uuid
from pathlib import Path

import docker

from controller.client.sandbox_client import ChannelConfig, SandboxClient
from controller.embedded import spawn_service, wait_listening
from controller.fleet.executor import FleetExecutor
from controller.fleet.hosts import FleetEvent
from sandbox.runtime.docker.engine import list_containers
from sandbox.runtime.labels import LABEL_HOST
from skillopt.envs.spreadsheetbench.loader import SAMPLE_ROOT, SpreadsheetBenchData, build_task
from skillopt.testing.scripted import ScriptedModelServer
from skillopt.testing.simulation import SIM_TARGET, SimulatedTarget
from skillopt.types import Limits, ModelSpec, RolloutRequest, RolloutResult, SkillVersion


def serve(tmp: Path, model_url: str, capacity: int) -> tuple[object, str, str]:
    host_id = f"bench-{uuid.uuid4().hex[:6]}"
    proc = spawn_service(
        [
            "--listen", "127.0.0.1:0", "--token-file", str(tmp / "token"), "--host-id", host_id,
            "--state-dir", str(tmp / host_id), "--capacity", str(capacity), "--pool-size", str(capacity),
            "--provider", f"sim=openai_compatible,base_url={model_url},max_retries=0", "--exec-agents", "off",
        ]
    )  # fmt: skip
    return proc, f"127.0.0.1:{wait_listening(proc, 120)}", host_id


def requests(n: int, skill: str = "") -> list[RolloutRequest]:
    data = SpreadsheetBenchData(SAMPLE_ROOT)
    run = uuid.uuid4().hex[:6]
    out = []
    for k in range(n):
        tid = data.ids[k % len(data.ids)]
        task, grading = build_task(data.task(tid))
        out.append(
            RolloutRequest(
                rollout_id=f"bench-{run}/{k}",
                env="spreadsheetbench",
                agent="codegen_single",
                task=dataclasses.replace(task, id=f"{tid}#{k}"),
                grading=grading,
                skill=SkillVersion(content=skill),
                model=ModelSpec(provider="sim", model=SIM_TARGET),
                limits=Limits(wall_time_s=120, exec_timeout_s=60),
            )
        )
    return out


def batch(
    channels, reqs, *, kill_after: int = 0, victim=None, on_event=None
) -> tuple[list[RolloutResult], float]:
    rows: list[RolloutResult] = []
    lock = threading.Lock()

    def on_result(row: RolloutResult) -> None:
        with lock:
            rows.append(row)
            n = len(rows)
        if kill_after and n == kill_after and victim is not None:
            os.kill(victim.pid, signal.SIGKILL)

    with FleetExecutor(channels, workers=sum(1 for _ in channels) * 4, on_event=on_event) as fleet:
        t0 = time.monotonic()
        fleet.run(reqs, on_result=on_result, stop=threading.Event())
        return rows, time.monotonic() - t0


def report(label: str, rows: list[RolloutResult], n: int, seconds: float) -> None:
    ids = [r.rollout_id for r in rows]
    infra = sum(r.infra_error is not None for r in rows)
    print(f"{label:<28} rows {len(rows)}/{n} (unique {len(set(ids))}), infra {infra}, wall {seconds:.1f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rollouts", type=int, default=60)
    ap.add_argument("--capacity", type=int, default=2)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="so-bf-", dir="/tmp"))
    (tmp / "token").write_text(uuid.uuid4().hex)
    token = (tmp / "token").read_text()
    client = docker.from_env()
    hold = threading.Event()

    def holder(req):
        if "HOLD-THE-SLOT" in req.system:
            hold.wait(120)
        return None

    procs = []
    with ScriptedModelServer(responders=[holder, SimulatedTarget()]) as sim:
        try:
            hosts = [serve(tmp, sim.base_url, args.capacity) for _ in range(3)]
            procs = [p for p, _, _ in hosts]
            channels = [ChannelConfig(address=a, token=token) for _, a, _ in hosts]
            batch(channels, requests(6))  # warm the pools and the code paths
            rows, base = batch(channels, requests(args.rollouts))
            report("undisturbed, 3 hosts", rows, args.rollouts, base)
            rows, killed = batch(
                channels, requests(args.rollouts), kill_after=args.rollouts // 3, victim=hosts[1][0]
            )
            report("kill -9 of 1 of 3 hosts", rows, args.rollouts, killed)
            print(f"{'ratio killed / undisturbed':<28} {killed / base:.2f}")

            # Host full: another client holds every slot of one host for the first seconds.
            one = [channels[0]]
            other = SandboxClient(channels[0])
            holders = [
                dataclasses.replace(r, skill=SkillVersion(content="HOLD-THE-SLOT"))
                for r in requests(args.capacity)
            ]
            threads = [
                threading.Thread(target=other.run, args=(r,), kwargs={"timeout_s": 200}, daemon=True)
                for r in holders
            ]
            for t in threads:
                t.start()
            fulls: list[float] = []

            def on_event(e: FleetEvent) -> None:
                if e.kind == "host_full":
                    fulls.append(time.monotonic())

            threading.Timer(3.0, hold.set).start()  # the other client finishes after ~3 s
            rows, full_s = batch(one, requests(12), on_event=on_event)
            report("host full for ~3 s, 1 host", rows, 12, full_s)
            print(f"{'host_full refusals waited out':<28} {len(fulls)}")
            other.close()
        finally:
            hold.set()
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
                    p.wait(60)
            for _, _, host_id in locals().get("hosts", []):
                for c in list_containers(client, f"{LABEL_HOST}={host_id}"):
                    with contextlib.suppress(docker.errors.NotFound):
                        client.api.remove_container(c.id, force=True)
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
