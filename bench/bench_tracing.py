"""Tracing's cost (issue 35 item 2; figures, not a test): CPU per rollout with tracing on vs
off, in one run. Run: ``python bench/bench_tracing.py [--rollouts 60]``.

Two sandbox services, identical but for the environment: one exports every span over OTLP/HTTP
to a receiver process (``skillopt.testing.otlp``), the other has no ``OTEL_*`` variable (tracing
off: nothing of the SDK imported). One client process drives both, alternating batches of
SpreadsheetBench ``codegen_single`` rollouts (one model call, one execution, one grading): the
traced batches through a traced channel inside a ``rollout`` span, as the controller does, the
others through a plain channel. Per rollout it reports the service process's CPU (its gRPC,
gateway, spans and exporter; ``/proc/<pid>/stat``, grader workers included), this client's
(``time.process_time``; the exporter flushed inside the traced batch), and the whole
machine's (``/proc/stat``: noisy on a shared machine, context only). The containers' CPU is
the same either way (their runner knows nothing of tracing).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_sandbox import FIRST, _busy_jiffies, _wait_idle, codegen_request  # noqa: E402

from controller.client.sandbox_client import ChannelConfig, SandboxClient  # noqa: E402
from controller.embedded import wait_listening  # noqa: E402
from skillopt.envs.spreadsheetbench.loader import SAMPLE_ROOT, SpreadsheetBenchData, build_task  # noqa: E402
from skillopt.observability import tracing  # noqa: E402

_HZ = os.sysconf("SC_CLK_TCK")
_RECEIVER = """
import sys
from skillopt.testing.otlp import OtlpReceiver
with OtlpReceiver() as r:
    print(r.endpoint, flush=True)
    sys.stdin.read()
    print(len(r.spans), flush=True)
"""


def _tree_cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its live descendants (grader workers)."""
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / _HZ
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return total


def _service(tmp: Path, name: str, base_url: str, env: dict[str, str]) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "controller.cli", "serve", "--listen", "127.0.0.1:0",
         "--token-file", str(tmp / "token"), "--host-id", f"{name}-{uuid.uuid4().hex[:4]}",
         "--state-dir", str(tmp / name), "--capacity", "2", "--pool-size", "2", "--grader-workers", "1",
         "--exec-agents", "off", "--log-level", "warning",
         "--provider", f"scripted=openai_compatible,base_url={base_url},max_retries=0"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    return proc, wait_listening(proc, 120)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rollouts", type=int, default=60, help="rollouts on each service")
    parser.add_argument("--batch", type=int, default=5, help="rollouts per alternating batch")
    args = parser.parse_args()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    tmp = Path(tempfile.mkdtemp(prefix="so-bench-tr-", dir="/tmp"))
    (tmp / "token").write_text("bench")
    (tmp / "scenario.json").write_text(
        json.dumps({"rules": [], "default": {"reply": {"text": f"```python\n{FIRST}```"}}})
    )
    plain_env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    procs: list[subprocess.Popen] = []
    try:
        model = subprocess.Popen(
            [sys.executable, "-m", "skillopt.testing.scripted_server", "--scenario", str(tmp / "scenario.json"), "--port", "0"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        procs.append(model)
        base_url = model.stdout.readline().split()[-1]
        threading.Thread(target=model.stdout.read, daemon=True).start()
        receiver = subprocess.Popen(
            [sys.executable, "-c", _RECEIVER], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={**plain_env, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        procs.append(receiver)
        endpoint = receiver.stdout.readline().strip()
        traced_env = {**plain_env, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}
        off, off_port = _service(tmp, "off", base_url, plain_env)
        on, on_port = _service(tmp, "on", base_url, traced_env)
        procs += [off, on]
        off_client = SandboxClient(ChannelConfig(address=f"127.0.0.1:{off_port}", token="bench"))
        provider = TracerProvider(resource=Resource.create({"service.name": "skillopt-controller"}))
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces")))
        tracing.install(provider)
        on_client = SandboxClient(ChannelConfig(address=f"127.0.0.1:{on_port}", token="bench"))
        task, grading = build_task(SpreadsheetBenchData(SAMPLE_ROOT).task("32255"))

        def one(client: SandboxClient) -> None:
            req = codegen_request(task, grading)
            with tracing.span("rollout", tracing.rollout_attributes(req)):
                row = client.run(req, timeout_s=120)
            assert row.infra_error is None, row.infra_error

        for client in (off_client, on_client):
            for _ in range(3):
                one(client)  # channel set-up, first-use imports, first exports
        stats = {k: {"service": 0.0, "client": 0.0, "machine": 0.0, "n": 0} for k in ("off", "on")}
        done = 0
        while done < args.rollouts:
            for key, client, proc in (("off", off_client, off), ("on", on_client, on)):
                _wait_idle(client, 2)
                if key == "off":
                    tracing.uninstall()  # this batch's client traces nothing (its channel has no interceptor)
                else:
                    tracing.install(provider)
                svc0, cli0, (busy0, _) = _tree_cpu_s(proc.pid), time.process_time(), _busy_jiffies()
                for _ in range(args.batch):
                    one(client)
                if key == "on":
                    provider.force_flush()  # the export's CPU belongs to the traced batch
                s = stats[key]
                s["service"] += _tree_cpu_s(proc.pid) - svc0
                s["client"] += time.process_time() - cli0
                s["machine"] += (_busy_jiffies()[0] - busy0) / _HZ
                s["n"] += args.batch
            done += args.batch
        tracing.uninstall()
        for proc in (on, off):  # a host flushes its spans as it exits
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
        receiver.stdin.close()
        spans = int(receiver.stdout.readline() or 0)
        per = {
            k: {m: v[m] / v["n"] * 1000 for m in ("service", "client", "machine")} for k, v in stats.items()
        }
        print(
            f"== tracing off vs on, {args.rollouts} codegen_single rollouts each, alternating batches of {args.batch} =="
        )
        for m in ("service", "client", "machine"):
            ratio = per["on"][m] / per["off"][m] if per["off"][m] else float("nan")
            print(
                f"  {m + '_cpu_ms_per_rollout':34s} off {per['off'][m]:8.1f}   on {per['on'][m]:8.1f}   on/off {ratio:6.3f}"
            )
        added = (per["on"]["service"] - per["off"]["service"]) + (per["on"]["client"] - per["off"]["client"])
        print(f"  {'tracing_cpu_ms_per_rollout':34s} {added:8.2f}  (service + client, on - off)")
        print(f"  {'as_share_of_machine_cpu_off':34s} {added / per['off']['machine']:8.3%}")
        print(f"  {'spans_exported_per_traced_rollout':34s} {spans / (stats['on']['n'] + 3):8.1f}")
        off_client.close()
        on_client.close()
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(60)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
