"""Session figures (not tests). Run: ``python bench/bench_sessions.py [--quick]``; prints JSON.

1. ``create_to_first_output_ms``: CreateSession → first stdout byte of ``echo``, warm pool,
   one at a time (the pool is refilled between rounds, outside the timing), p50/p95; also the
   same with the gRPC channel already open (``..._open_channel``): what a session costs a
   client that keeps its channel (Inspect's provider does within a task).
2. ``sessions_64``: 64 sessions alive on one host, each looping 10 ms commands
   (``sleep 0.01``) from its own thread: commands run, failures, command latency p50/p95, and
   the service process's RSS before creating them, with them all alive, and after they ended.
3. ``file_round_trip_50mib``: write then read back 50 MiB over loopback, MiB/s (of the 100 MiB
   moved), best of 3.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MiB = 1024 * 1024


def rss_bytes(pid: int | str = "self") -> int:
    """The resident set of process ``pid`` (this one by default), from ``/proc``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main() -> None:
    from controller.client.sandbox_client import ChannelConfig, SandboxClient
    from controller.client.sessions import SandboxSession, SessionEndpoints
    from sandbox.runtime.spec import ContainerSpec, RuntimeConfig
    from sandbox.server.serve import ServerConfig, serve
    from sandbox.service.config import ServiceConfig, SessionConfig
    from skillopt.logs import configure_logging

    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer rounds and 16 sessions instead of 64")
    args = parser.parse_args()
    configure_logging(json=True, level="warning")
    rounds = 10 if args.quick else 40
    alive = 16 if args.quick else 64
    loops = 20 if args.quick else 50
    host_id = f"bench-sess-{uuid.uuid4().hex[:6]}"
    token = uuid.uuid4().hex
    spec = ContainerSpec(memory_bytes=256 * MiB)
    config = ServerConfig(
        listen="127.0.0.1:0",
        token=token,
        runtime=RuntimeConfig(host_id=host_id, state_dir=tempfile.mkdtemp(prefix="so-bsess-"), pool_size=2),
        service=ServiceConfig(host_id=host_id, capacity=2, base_spec=spec, grader_workers=0),
        sessions=SessionConfig(max_sessions=alive + 4),
        exec_agents="off",
    )
    out: dict = {}
    with serve(config) as running:
        where = SessionEndpoints(endpoints=(running.address,), token=token)
        pools = running.service.pools
        pools.wait_ready(spec, 2, timeout_s=120)

        def first_output_ms(session_factory) -> float:
            t0 = time.perf_counter()
            seen: list[float] = []
            with session_factory() as box:
                box.exec(["echo", "hi"], on_output=lambda fd, b: seen.append(time.perf_counter()))
            return (seen[0] - t0) * 1000

        cold_channel, open_channel = [], []
        client = SandboxClient(ChannelConfig(address=running.address, token=token))
        from sandbox.api.v1 import sandbox_pb2 as pb

        for _ in range(rounds):
            pools.wait_ready(spec, 2, timeout_s=120)
            cold_channel.append(first_output_ms(lambda: SandboxSession.create(where)))
            pools.wait_ready(spec, 2, timeout_s=120)
            open_channel.append(
                first_output_ms(
                    lambda: SandboxSession(
                        client, client.call("CreateSession", pb.CreateSessionRequest()), owns_client=False
                    )
                )
            )
        out["create_to_first_output_ms"] = {
            "p50": round(statistics.median(cold_channel), 1),
            "p95": round(pct(cold_channel, 0.95), 1),
            "rounds": rounds,
        }
        out["create_to_first_output_ms_open_channel"] = {
            "p50": round(statistics.median(open_channel), 1),
            "p95": round(pct(open_channel, 0.95), 1),
        }

        # 2. many sessions alive at once
        rss_before = rss_bytes()
        sessions = [SandboxSession.create(where, timeout_s=600) for _ in range(alive)]
        latencies: list[float] = []
        failures: list[str] = []
        lock = threading.Lock()

        def loop(box: SandboxSession) -> None:
            for _ in range(loops):
                t = time.perf_counter()
                try:
                    result = box.exec(["sleep", "0.01"], timeout=60)
                    ok = result.exit_code == 0
                except Exception as exc:  # a failure is a figure here, not a crash
                    ok, result = False, exc
                with lock:
                    latencies.append((time.perf_counter() - t) * 1000)
                    if not ok:
                        failures.append(repr(result)[:200])

        t0 = time.perf_counter()
        threads = [threading.Thread(target=loop, args=(s,)) for s in sessions]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        rss_alive = rss_bytes()
        for s in sessions:
            s.destroy()
        rss_after = rss_bytes()
        out[f"sessions_{alive}"] = {
            "commands": len(latencies),
            "failures": len(failures),
            "failure_examples": failures[:3],
            "command_ms_p50": round(statistics.median(latencies), 1),
            "command_ms_p95": round(pct(latencies, 0.95), 1),
            "commands_per_s": round(len(latencies) / wall, 1),
            "service_rss_mib": {
                "before": round(rss_before / MiB, 1),
                "all_alive": round(rss_alive / MiB, 1),
                "after": round(rss_after / MiB, 1),
            },
        }

        # 3. 50 MiB there and back
        payload = bytes(range(256)) * (50 * MiB // 256)
        best = 0.0
        with SandboxSession.create(where) as box:
            for _ in range(3):
                t = time.perf_counter()
                box.write_file("blob.bin", payload)
                back = box.read_file("blob.bin")
                dt = time.perf_counter() - t
                assert back == payload
                best = max(best, 100 / dt)
        out["file_round_trip_50mib"] = {"mib_per_s": round(best, 1)}
        client.close()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
