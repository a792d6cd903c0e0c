"""Tracing's switch, its no-op when off (no SDK imported) and its primitives with the real SDK
(in-memory exporter): spans, spans of past intervals, context across threads."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from skillopt.errors import ConfigError
from skillopt.observability import tracing

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, ()),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, ("otlp",)),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, ("otlp",)),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, ("otlp",)),
        ({"OTEL_TRACES_EXPORTER": "console, otlp"}, ("console", "otlp")),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, ()),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, ()),
    ],
)
def test_tracing_is_on_only_when_the_standard_variables_ask(environ, expected):
    assert tracing.requested_exporters(environ) == expected


def test_what_cannot_be_had_is_refused_with_what_to_do():
    with pytest.raises(ConfigError, match="zipkin"):
        tracing.requested_exporters({"OTEL_TRACES_EXPORTER": "zipkin"})
    with pytest.raises(ConfigError, match="opentelemetry-exporter-otlp-proto-grpc"):
        tracing.configure(
            "t", environ={"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
        )
    with pytest.raises(ConfigError, match="http/protobuf"):
        tracing.configure(
            "t", environ={"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}
        )
    assert not tracing.enabled()  # a refusal leaves tracing off


def test_off_the_rollout_path_imports_no_sdk_and_spans_are_one_shared_no_op():
    """A process nobody asked to trace (no OTEL_* variable) loads the controller, the host's
    rollout path and the gateway without importing OpenTelemetry; a span is a no-op."""
    code = """
import sys
from controller.cli import start_tracing
assert start_tracing("skillopt-controller")
import controller.fleet.executor, sandbox.server.serve, sandbox.gateway.core, sandbox.runtime.lease
import skillopt.trainer.loop, skillopt.agents.common
from skillopt.observability import tracing
assert not tracing.enabled() and tracing.current() is None
first, second = tracing.span("a"), tracing.span("b", {"k": 1})
assert first is second
with first as span:
    span.set_attribute("k", "v")
tracing.record_span("c", start=0.0)
fn = lambda: 1
assert tracing.in_context(fn) is fn
loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry"))
assert not loaded, loaded
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    res = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "PYTHONPATH": str(REPO)},
    )
    assert res.returncode == 0, res.stderr[-3000:]


def test_spans_nest_record_failures_and_follow_work_to_other_threads():
    exporter = InMemorySpanExporter()
    with tracing.recording(exporter), tracing.span("outer", {"skillopt.step": 1}) as outer:
        assert outer.is_recording()
        with pytest.raises(ValueError), tracing.span("failing"):
            raise ValueError("boom")
        with ThreadPoolExecutor(1) as pool:
            pool.submit(tracing.in_context(lambda: tracing.span("in_thread").__enter__().end())).result()
        t0 = time.monotonic()
        time.sleep(0.01)  # an interval that has passed (no synchronisation depends on it)
        tracing.record_span("past", start=t0, attributes={"k": "v"})
    spans = {s.name: s for s in exporter.get_finished_spans()}
    outer_id = spans["outer"].context.span_id
    for name in ("failing", "in_thread", "past"):
        assert spans[name].parent is not None and spans[name].parent.span_id == outer_id, name
        assert spans[name].context.trace_id == spans["outer"].context.trace_id
    failing = spans["failing"]  # failed by the exception's type, never its text
    assert failing.status.status_code.name == "ERROR" and failing.status.description == "ValueError"
    assert failing.attributes["error.type"] == "ValueError" and not failing.events
    past = spans["past"]
    assert past.end_time - past.start_time >= 5_000_000  # its own interval, not "now"
    assert spans["outer"].start_time <= past.start_time <= past.end_time <= spans["outer"].end_time
    assert not tracing.enabled()  # the block restored "off"
