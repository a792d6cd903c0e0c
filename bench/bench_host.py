"""Sandbox host figures (not tests). Run: ``python bench/bench_host.py [--compare /path/to/other/checkout]``.

1. Shutdown: seconds from SIGTERM to exit of an idle ``skillopt serve`` that is still filling
   its warm pool (the case that made a restarted service miss a 60 s exit on a loaded 2-core
   machine), with and without two busy CPU loops as load. With ``--compare`` the same is
   measured for another checkout side by side (e.g. main), since timings are noisy here.
2. Gateway front end per-call overhead: the OpenAI SDK against the scripted model server
   directly vs through the gateway's hardened HTTP front end.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _serve(repo: Path, state: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "controller.cli", "serve", "--listen", "127.0.0.1:0",
         "--host-id", f"bench-stop-{uuid.uuid4().hex[:6]}", "--state-dir", str(state),
         "--capacity", "2", "--pool-size", "2", "--exec-agents", "off"],
        cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(repo)},
    )  # fmt: skip


def stop_seconds(repo: Path, *, rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        state = Path(tempfile.mkdtemp(prefix="so-bs-", dir="/tmp"))
        proc = _serve(repo, state)
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()  # "listening on port N": the pool starts filling now
        if "listening" not in line:
            proc.kill()
            raise SystemExit(f"{repo}: service did not start: {line!r}")
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(180)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        out.append(time.monotonic() - t0)
    return out


def gateway_overhead(n: int) -> tuple[float, float]:
    import openai

    from sandbox.gateway.core import Gateway
    from sandbox.gateway.http import GatewayServer
    from skillopt.models.profiles import ProviderProfile
    from skillopt.testing.scripted import ScriptedModelServer

    with ScriptedModelServer({"rules": [], "default": {"reply": {"text": "ok"}}}, max_records=10) as model:
        gw = Gateway(
            {"up": ProviderProfile(name="up", kind="openai_compatible", base_url=model.base_url, api_key="k")}
        )
        front = GatewayServer(gw, "127.0.0.1")
        session = gw.open_session("bench", provider="up", model="m")
        direct = openai.OpenAI(base_url=model.base_url, api_key="k", max_retries=0)
        via = openai.OpenAI(base_url=front.url + "/v1", api_key=session.token, max_retries=0)
        msgs = [{"role": "user", "content": "hi"}]

        def timed(client) -> float:
            times = []
            for _ in range(n):
                t0 = time.perf_counter()
                client.chat.completions.create(model="m", messages=msgs)
                times.append(time.perf_counter() - t0)
            return statistics.median(times)

        timed(direct), timed(via)  # warm up
        result = timed(direct), timed(via)
        front.close()
        gw.close()
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compare", type=Path, help="another checkout to measure side by side")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args()
    repos = [ROOT] + ([args.compare.resolve()] if args.compare else [])
    for loaded in (False, True):
        loops = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(2 if loaded else 0)]
        try:
            for repo in repos:
                secs = stop_seconds(repo, rounds=args.rounds)
                print(
                    f"shutdown {'(2 busy loops)' if loaded else '(idle machine)'} {repo}: "
                    f"SIGTERM->exit median {statistics.median(secs):.1f}s, max {max(secs):.1f}s over {len(secs)}",
                    flush=True,
                )
        finally:
            for p in loops:
                p.kill()
                p.wait()
    direct, via = gateway_overhead(args.calls)
    print(
        f"gateway front end: median call {direct * 1000:.2f} ms direct, {via * 1000:.2f} ms via the gateway "
        f"(+{(via - direct) * 1000:.2f} ms)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
