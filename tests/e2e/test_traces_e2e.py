"""One trace across the controller and a sandbox host (issue 35 item 2): a real ``skillopt
serve --simulate`` process and a real ``skillopt train`` over it, both exporting OTLP/HTTP to a
small receiver this test starts (decoding ``ExportTraceServiceRequest`` protobufs). The trainer
step's trace reaches the host's admission, container, executions, model calls through the
gateway and grading, each under the right parent; no span carries prompt text; session RPCs
are traced too. One short run serves every assertion."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from controller.embedded import wait_listening
from skillopt.testing.otlp import OtlpReceiver, ReceivedSpan

REPO = Path(__file__).resolve().parents[2]
RUN = "skillopt.sandbox.v1.Sandbox/Run"


@dataclass
class Traced:
    spans: list[ReceivedSpan]
    host_id: str
    run_dir: Path
    exec_spans: list[ReceivedSpan]

    def by_id(self) -> dict[str, ReceivedSpan]:
        return {s.span_id: s for s in self.spans}


def _env(receiver: OtlpReceiver) -> dict[str, str]:
    return {**os.environ, **receiver.environment(), "OPENAI_API_KEY": "", "PYTHONUNBUFFERED": "1"}


def _session_calls(receiver: OtlpReceiver, address: str, token_file: Path) -> None:
    """A session's RPCs from a controller-side client in this process, traced into ``receiver``
    while it runs (this process's tracing is off before and after)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from controller.client.sessions import SandboxSession
    from skillopt.observability import tracing

    provider = TracerProvider(resource=Resource.create({"service.name": "skillopt-controller"}))
    provider.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{receiver.endpoint}/v1/traces"))
    )
    tracing.install(provider)
    try:
        with SandboxSession.create(address, token_file=str(token_file)) as session:
            assert session.exec(["true"], timeout=60).returncode == 0
    finally:
        tracing.uninstall()
        provider.shutdown()


def _one_item_per_split(root: Path) -> Path:
    """The vendored SpreadsheetBench sample with one item per split: one short step."""
    from skillopt.envs.spreadsheetbench.loader import SAMPLE_ROOT

    shutil.copytree(SAMPLE_ROOT, root)
    splits = json.loads((root / "splits.json").read_text())
    (root / "splits.json").write_text(json.dumps({k: v[:1] for k, v in splits.items()}))
    return root


@pytest.fixture(scope="module")
def traced(docker_client) -> Iterator[Traced]:
    tmp = Path(f"/tmp/so-traces-{uuid.uuid4().hex[:6]}")
    tmp.mkdir()
    (tmp / "token").write_text(uuid.uuid4().hex)
    data = _one_item_per_split(tmp / "data")
    host_id = f"traced-{uuid.uuid4().hex[:4]}"
    with OtlpReceiver() as receiver:
        env = _env(receiver)
        serve = subprocess.Popen(
            [sys.executable, "-m", "controller.cli", "serve", "--simulate", "--listen", "127.0.0.1:0",
             "--token-file", str(tmp / "token"), "--host-id", host_id, "--state-dir", str(tmp / "state"),
             "--capacity", "2", "--pool-size", "1", "--grader-workers", "1", "--exec-agents", "off"],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env,
        )  # fmt: skip
        try:
            port = wait_listening(serve, 120)
            train = subprocess.Popen(
                [sys.executable, "-m", "controller.cli", "train", "--config", "spreadsheetbench_demo",
                 "--simulate", "on", "--endpoints", f"127.0.0.1:{port}", "--out", str(tmp / "run"),
                 "--set", f"sandbox.token_file={tmp / 'token'}", "--set", f"env.data_root={data}",
                 "--set", "train.num_epochs=1", "--set", "train.batch_size=1",
                 "--set", "evaluation.eval_test=false", "--set", "optimizer.use_slow_update=false",
                 "--set", "optimizer.use_meta_skill=false", "--set", "run.progress=false", "--set", "run.plot=false"],
                cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
            )  # fmt: skip
            # Meanwhile, session RPCs from a client in this process (create, exec, destroy).
            _session_calls(receiver, f"127.0.0.1:{port}", tmp / "token")
            _, stderr = train.communicate(timeout=300)
            assert train.returncode == 0, stderr[-4000:]
            spans = receiver.wait_for(
                lambda got: (
                    any(s.name == "trainer.step" for s in got)
                    and sum(s.name == "gateway.model_call" for s in got) >= 2
                    and any(
                        s.name.endswith("Sandbox/DestroySession") and s.service == "skillopt-host"
                        for s in got
                    )
                )
            )
        finally:
            serve.terminate()
            serve.wait(60)
        yield Traced(spans, host_id, tmp / "run", [s for s in spans if s.name == "sandbox.exec"])
    shutil.rmtree(tmp, ignore_errors=True)


def _one(spans: list[ReceivedSpan], name: str, **where: str) -> ReceivedSpan:
    found = [s for s in spans if s.name == name and all(s.attributes.get(k) == v for k, v in where.items())]
    assert found, f"no span {name} {where} among {sorted({s.name for s in spans})}"
    return found[0]


def test_a_training_step_is_one_trace_from_the_controller_to_the_host(traced: Traced):
    spans, by_id = traced.spans, traced.by_id()
    step = _one(spans, "trainer.step")
    assert step.service == "skillopt-controller" and step.attributes["skillopt.step"] == 1
    in_step = [s for s in spans if s.trace_id == step.trace_id]

    def parent(span: ReceivedSpan) -> ReceivedSpan:
        assert span.parent_span_id in by_id, f"{span.name}'s parent was not exported"
        return by_id[span.parent_span_id]

    # Controller: step → stage → rollout batch → rollout → the RPC (a client span).
    batch = _one(in_step, "rollout.batch")
    assert parent(batch).name == "trainer.rollout" and parent(parent(batch)).span_id == step.span_id
    rollout = _one(in_step, "rollout")
    assert parent(rollout).span_id == batch.span_id
    rollout_id = rollout.attributes["skillopt.rollout_id"]
    client = next(s for s in in_step if s.name == RUN and s.parent_span_id == rollout.span_id)
    assert client.service == "skillopt-controller" and client.kind == 3  # SPAN_KIND_CLIENT
    assert client.attributes["rpc.grpc.status_code"] == 0

    # Host: the server span is the client span's child, in the same trace (traceparent metadata).
    server = next(s for s in in_step if s.name == RUN and s.parent_span_id == client.span_id)
    assert server.service == "skillopt-host" and server.kind == 2  # SPAN_KIND_SERVER
    assert server.resource["skillopt.host.id"] == traced.host_id
    admission = next(
        s for s in in_step if s.name == "sandbox.admission" and s.parent_span_id == server.span_id
    )
    assert admission.attributes["skillopt.rollout_id"] == rollout_id
    assert admission.attributes["skillopt.admission.new"] is True
    work = next(s for s in in_step if s.name == "sandbox.rollout" and s.parent_span_id == server.span_id)
    assert work.attributes["skillopt.rollout_id"] == rollout_id
    assert work.attributes["skillopt.outcome"] in ("passed", "failed")

    # Under the rollout's work: the container, each execution, each model call, the grading.
    children = [s for s in in_step if s.parent_span_id == work.span_id]
    names = {s.name for s in children}
    assert {"sandbox.container.acquire", "sandbox.exec", "gateway.model_call", "sandbox.grade"} <= names, (
        names
    )
    calls = [s for s in children if s.name == "gateway.model_call"]
    assert all(
        c.service == "skillopt-host" and c.attributes["skillopt.rollout_id"] == rollout_id for c in calls
    )
    assert all(c.attributes["gen_ai.usage.output_tokens"] > 0 for c in calls)
    for s in children:  # each inside its rollout's interval
        assert work.start_ns <= s.start_ns <= s.end_ns <= work.end_ns, s.name


def test_no_span_carries_prompt_text(traced: Traced):
    prompts = [p.read_text() for p in traced.run_dir.rglob("target_*_prompt.txt")]
    assert prompts, "the run's rows should hold their prompts"
    values = [
        v
        for s in traced.spans
        for v in [*s.attributes.values(), *(x for e in s.events for x in e.values())]
        if isinstance(v, str)
    ]
    for text in prompts:
        for i in range(0, len(text) - 40, 200):  # any 40-character piece of any prompt
            piece = text[i : i + 40]
            assert not any(piece in v for v in values), f"prompt text in a span: {piece!r}"
    assert not any("gen_ai.input.messages" in s.attributes for s in traced.spans)


def test_session_rpcs_are_traced_across_the_wire(traced: Traced):
    spans = traced.spans
    for method in ("CreateSession", "Exec", "DestroySession"):
        name = f"skillopt.sandbox.v1.Sandbox/{method}"
        client = next(s for s in spans if s.name == name and s.service == "skillopt-controller")
        server = next(s for s in spans if s.name == name and s.service == "skillopt-host")
        assert server.trace_id == client.trace_id and server.parent_span_id == client.span_id, method
    # The health checks load balancers poll are left out.
    assert not any("grpc.health" in s.name for s in spans)
