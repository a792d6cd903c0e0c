"""Gateway and exec-agent benchmarks (figures, not tests). Run: ``python bench/bench_gateway.py``.

1. Per-call overhead of the model gateway: the official SDK calling the scripted model server
   directly vs through the gateway's HTTP front end (token check, key injection, recording).
2. An in-service agent's model call, CPU by conversation length (a multi-turn rollout resends
   its whole history each turn): our OpenAI Chat / Responses / Anthropic clients next to the
   SDK's ``create`` with every message walked by its parameter transform (what we did before).
3. An exec-agent rollout's wall time split: container start (cold create of the exec spec, and
   the warm pool's acquire), the agent CLI's run (its own start-up and tool use) against the
   model time spent at the gateway, and grading.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import openai  # noqa: E402

from sandbox.gateway.core import Gateway  # noqa: E402
from sandbox.gateway.http import GatewayServer  # noqa: E402
from skillopt.models.profiles import ProviderProfile  # noqa: E402
from skillopt.testing.scripted import ScriptedModelServer  # noqa: E402


def per_call(n: int) -> dict[str, float]:
    with ScriptedModelServer({"rules": [], "default": {"reply": {"text": "ok"}}}, max_records=10) as model:
        gw = Gateway(
            {"up": ProviderProfile(name="up", kind="openai_compatible", base_url=model.base_url, api_key="k")}
        )
        front = GatewayServer(gw, "127.0.0.1")
        session = gw.open_session("bench", provider="up", model="m")
        direct = openai.OpenAI(base_url=model.base_url, api_key="k", max_retries=0)
        via = openai.OpenAI(base_url=front.url + "/v1", api_key=session.token, max_retries=0)
        msgs = [{"role": "user", "content": "hello " * 200}]
        out: dict[str, list[float]] = {"direct": [], "gateway": [], "direct_stream": [], "gateway_stream": []}
        for _ in range(5):  # warm both connection pools
            direct.chat.completions.create(model="m", messages=msgs)
            via.chat.completions.create(model="m", messages=msgs)
        for _ in range(n):
            for name, client in (("direct", direct), ("gateway", via)):
                t0 = time.perf_counter()
                client.chat.completions.create(model="m", messages=msgs)
                out[name].append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                with client.responses.stream(model="m", input="hello " * 200) as s:
                    s.get_final_response()
                out[f"{name}_stream"].append((time.perf_counter() - t0) * 1000)
        front.close()
        gw.close()
    med = {k: statistics.median(v) for k, v in out.items()}
    return {
        "direct_chat_p50_ms": med["direct"],
        "gateway_chat_p50_ms": med["gateway"],
        "gateway_overhead_chat_ms": med["gateway"] - med["direct"],
        "ratio_chat": med["gateway"] / med["direct"],
        "direct_responses_sse_p50_ms": med["direct_stream"],
        "gateway_responses_sse_p50_ms": med["gateway_stream"],
        "ratio_responses_sse": med["gateway_stream"] / med["direct_stream"],
    }


def exec_split(agent: str, n: int) -> dict[str, float]:
    from sandbox.runtime.docker.runtime import DockerRuntime
    from sandbox.runtime.spec import RuntimeConfig
    from skillopt.envs.spreadsheetbench.loader import SAMPLE_ROOT, SpreadsheetBenchData
    from skillopt.testing.fixtures.spreadsheetbench import solution_code
    from tests.sandbox.conftest import TaskScripts, request_for, start_service
    from tests.sandbox.test_exec_agents import TASK, exec_request, script

    sample = SpreadsheetBenchData(SAMPLE_ROOT)
    rows = []
    with ScriptedModelServer(max_records=100) as model:
        ts = TaskScripts()
        model.add_responder(ts)
        ts.scripts[sample.task(TASK).instruction[:120]] = script(solution_code(TASK))
        for svc in start_service(model, pool_size=1):
            service = svc.running.service
            # The spec the service uses for these rollouts (1 CPU, the exec memory floor).
            spec = service.exec_spec.with_limits(cpus=1.0)
            state = tempfile.mkdtemp(prefix="so-bg-", dir="/tmp")
            rt = DockerRuntime(
                RuntimeConfig(host_id=f"bench-gw-{uuid.uuid4().hex[:6]}", state_dir=state, pool_size=0)
            )
            cold = []
            for _ in range(3):
                t0 = time.perf_counter()
                h = rt.create(spec)
                cold.append((time.perf_counter() - t0) * 1000)
                rt.destroy(h)
            rt.close()
            shutil.rmtree(state, ignore_errors=True)
            provider = "scripted-anthropic" if agent == "claude_code_exec" else "scripted"
            for i in range(n):
                service.pools.wait_ready(spec, 1, timeout_s=120)
                req = dataclasses.replace(
                    exec_request(sample, agent, provider),
                    rollout_id=f"bench/{agent}/{i}/{uuid.uuid4().hex[:6]}",
                )
                t0 = time.perf_counter()
                row = svc.client.run(req, timeout_s=240)
                total = time.perf_counter() - t0
                assert row.hard == 1.0, row.fail_reason
                exchanges = json.loads(row.trace.notes["model_exchanges"])
                model_s = sum(e["seconds"] for e in exchanges)
                cli_s = row.timings_s["model"]
                rows.append(
                    {
                        "total": total,
                        "acquire": row.timings_s["acquire"],
                        "cli": cli_s,
                        "model": model_s,
                        "cli_own": cli_s - model_s,
                        "grade": row.timings_s.get("grade", 0.0) + row.timings_s.get("exec", 0.0),
                        "calls": len(exchanges),
                    }
                )
    _ = request_for  # imported for the fixtures' module side effects only
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    return {
        "rollout_total_p50_s": med["total"],
        "container_cold_create_p50_ms": statistics.median(cold),
        "container_warm_acquire_p50_ms": med["acquire"] * 1000,
        "cli_run_p50_s": med["cli"],
        "model_time_at_gateway_p50_s": med["model"],
        "cli_own_time_p50_s": med["cli_own"],
        "grading_incl_case_runs_p50_s": med["grade"],
        "model_calls_per_rollout": med["calls"],
    }


def call_cpu(calls: int) -> dict[str, float]:
    """CPU milliseconds per model call by history length: this process, i.e. the client (SDK,
    HTTP, parsing) and the scripted server it runs in a thread."""
    from skillopt.models.base import ChatRequest
    from skillopt.models.openai_chat import to_openai_messages
    from skillopt.models.profiles import build_model
    from skillopt.types import Message

    def cpu_ms(fn) -> float:
        for _ in range(3):
            fn()
        t0 = time.process_time()
        for _ in range(calls):
            fn()
        return (time.process_time() - t0) / calls * 1000

    out: dict[str, float] = {}
    with ScriptedModelServer({"rules": [], "default": {"reply": {"text": "ok"}}}, max_records=10) as srv:
        models = {
            "chat": build_model(ProviderProfile(name="c", kind="openai_compatible", base_url=srv.base_url)),
            "responses": build_model(
                ProviderProfile(name="r", kind="openai_compatible", base_url=srv.base_url, api="responses")
            ),
            "anthropic": build_model(
                ProviderProfile(name="a", kind="anthropic", base_url=srv.anthropic_base_url, api_key="k")
            ),
        }
        for n in (2, 20, 60):
            turns = [
                Message(role="assistant" if i % 2 else "user", content="turn " * 400) for i in range(n - 1)
            ]
            msgs = (Message(role="system", content="rules " * 800), *turns)
            request = ChatRequest(model="m", messages=msgs)
            for name, model in models.items():
                out[f"{name}_{n}_msgs_cpu_ms"] = cpu_ms(lambda m=model, r=request: m.complete(r))
            sdk, wire = models["chat"]._client, to_openai_messages(msgs)  # create(): every message walked
            out[f"sdk_create_walked_{n}_msgs_cpu_ms"] = cpu_ms(
                lambda c=sdk, w=wire: c.chat.completions.create(model="m", messages=w)
            )
            out[f"chat_{n}_msgs_ratio_walked_over_ours"] = (
                out[f"sdk_create_walked_{n}_msgs_cpu_ms"] / out[f"chat_{n}_msgs_cpu_ms"]
            )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--rollouts", type=int, default=5)
    args = parser.parse_args()
    print("== gateway overhead per model call (scripted server on loopback) ==")
    for k, v in per_call(args.calls).items():
        print(f"  {k:34s} {v:9.3f}")
    print("== in-service model call CPU by history length (this process) ==")
    for k, v in call_cpu(args.calls).items():
        print(f"  {k:34s} {v:9.3f}")
    for agent in ("codex_exec", "claude_code_exec"):
        print(f"== {agent} rollout wall time split ({args.rollouts} rollouts, 4 model calls each) ==")
        for k, v in exec_split(agent, args.rollouts).items():
            print(f"  {k:34s} {v:9.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
