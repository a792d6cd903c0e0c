"""Trace context over the wire, with the real SDK (in-memory exporter): our gRPC interceptors
on a real server and channel (every call shape, a refusal, the untraced health checks), and
the gateway's model calls, over its real HTTP front end, as children of the span that opened
the rollout's gateway session, without prompt text unless the opt-in says so."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import grpc
import openai
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sandbox.api.tracing import server_interceptors, traced_channel
from sandbox.gateway.core import Gateway, GatewayChatModel
from sandbox.gateway.http import GatewayServer
from skillopt.errors import ModelUnavailable
from skillopt.models.base import ChatRequest
from skillopt.models.openai_chat import OpenAIChatModel
from skillopt.models.profiles import ProviderProfile
from skillopt.observability import tracing
from skillopt.testing.scripted import ScriptedModelServer
from skillopt.types import Message

SERVICE = "skillopt.test.Echo"
SECRET_PROMPT = "the secret prompt text 4f1c"


def _echo_server() -> tuple[grpc.Server, int]:
    def unary(request: bytes, context: grpc.ServicerContext) -> bytes:
        if request == b"refuse":
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "full")
        with tracing.span("inside.unary"):
            return request

    def server_stream(request: bytes, context: grpc.ServicerContext):
        for i in range(3):
            with tracing.span("inside.stream"):
                yield request + bytes([i])

    def bidi(requests, context: grpc.ServicerContext):
        yield from requests

    ident = {"request_deserializer": None, "response_serializer": None}
    handler = grpc.method_handlers_generic_handler(
        SERVICE,
        {
            "Unary": grpc.unary_unary_rpc_method_handler(unary, **ident),
            "Stream": grpc.unary_stream_rpc_method_handler(server_stream, **ident),
            "Bidi": grpc.stream_stream_rpc_method_handler(bidi, **ident),
        },
    )
    server = grpc.server(ThreadPoolExecutor(4), interceptors=server_interceptors())
    server.add_generic_rpc_handlers((handler,))
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port


def test_every_call_shape_carries_the_trace_to_the_server_and_back():
    exporter = InMemorySpanExporter()
    with tracing.recording(exporter):
        server, port = _echo_server()
        channel = traced_channel(grpc.insecure_channel(f"127.0.0.1:{port}"), f"127.0.0.1:{port}")
        try:
            unary = channel.unary_unary(f"/{SERVICE}/Unary")
            with tracing.span("caller"):
                assert unary(b"x", timeout=10) == b"x"
                assert list(channel.unary_stream(f"/{SERVICE}/Stream")(b"s", timeout=10)) == [
                    b"s\0",
                    b"s\1",
                    b"s\2",
                ]
                assert list(channel.stream_stream(f"/{SERVICE}/Bidi")(iter([b"a", b"b"]), timeout=10)) == [
                    b"a",
                    b"b",
                ]
                with pytest.raises(grpc.RpcError) as refused:
                    unary(b"refuse", timeout=10)
                assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        finally:
            channel.close()
            server.stop(None)
    spans = exporter.get_finished_spans()
    caller = next(s for s in spans if s.name == "caller")
    by_id = {s.context.span_id: s for s in spans}
    assert all(s.context.trace_id == caller.context.trace_id for s in spans), "one trace"
    for method in ("Unary", "Stream", "Bidi"):
        name = f"{SERVICE}/{method}"
        client = next(s for s in spans if s.name == name and s.kind.name == "CLIENT")
        server_span = next(s for s in spans if s.name == name and s.kind.name == "SERVER")
        assert client.parent.span_id == caller.context.span_id
        assert server_span.parent.span_id == client.context.span_id  # via traceparent metadata
        assert (
            server_span.attributes["rpc.service"] == SERVICE
            and server_span.attributes["rpc.method"] == method
        )
    # What the handler traces nests under the server span (each step of a stream too).
    for inner in ("inside.unary", "inside.stream"):
        span = next(s for s in spans if s.name == inner)
        assert by_id[span.parent.span_id].kind.name == "SERVER"
    refusals = [
        s
        for s in spans
        if s.attributes.get("rpc.grpc.status_code") == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
    ]
    assert {s.kind.name for s in refusals} == {"CLIENT", "SERVER"}
    assert all(s.status.status_code.name == "ERROR" for s in refusals)
    assert not any("Health" in s.name for s in spans)  # probes are not traced


@pytest.fixture
def gateway():
    scenario = {
        "rules": [{"name": "any", "match": {"contains": "secret"}, "replies": [{"text": "the reply"}]}]
    }
    with ScriptedModelServer(scenario) as upstream:
        profiles = {
            "up": ProviderProfile(
                name="up", kind="openai_compatible", base_url=upstream.base_url, api_key="k"
            )
        }
        gw = Gateway(profiles, max_attempts=1)
        front = GatewayServer(gw, "127.0.0.1")
        try:
            yield gw, front, upstream
        finally:
            front.close()
            gw.close()


@pytest.mark.parametrize("content", [False, True])
def test_the_gateways_model_calls_are_children_of_the_rollout_that_opened_the_session(gateway, content):
    gw, front, upstream = gateway
    exporter = InMemorySpanExporter()
    with tracing.recording(exporter, content=content):
        with tracing.span("sandbox.rollout"):
            session = gw.open_session("run/r1", provider="up", model="m")
        # An agent CLI's call: from another thread, carrying only the session's token.
        client = openai.OpenAI(base_url=front.url + "/v1", api_key=session.token, max_retries=0)
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": SECRET_PROMPT}])
        # An in-service agent's call, and one whose provider is gone.
        model = GatewayChatModel(
            gw, session, OpenAIChatModel("up", base_url=upstream.base_url, api_key="k", max_retries=0)
        )
        model.complete(ChatRequest(model="m", messages=(Message(role="user", content=SECRET_PROMPT),)))
        gone = upstream.base_url
        upstream.stop()
        broken = gw.open_session("run/r2", provider="up", model="m")
        with pytest.raises(ModelUnavailable):
            GatewayChatModel(
                gw, broken, OpenAIChatModel("up", base_url=gone, api_key="k", max_retries=0)
            ).complete(
                ChatRequest(model="m", messages=(Message(role="user", content=SECRET_PROMPT),), timeout_s=5)
            )
    spans = exporter.get_finished_spans()
    rollout = next(s for s in spans if s.name == "sandbox.rollout")
    calls = [s for s in spans if s.name == "gateway.model_call" and s.status.status_code.name != "ERROR"]
    assert len(calls) == 2 and all(c.parent.span_id == rollout.context.span_id for c in calls)
    assert {c.attributes["skillopt.gateway.api"] for c in calls} == {"chat"}
    assert all(c.attributes["gen_ai.usage.output_tokens"] > 0 for c in calls)
    assert all(c.attributes["http.response.status_code"] == 200 for c in calls)
    failed = [s for s in spans if s.name == "gateway.model_call" and s.status.status_code.name == "ERROR"]
    assert len(failed) == 1 and failed[0].attributes["error.type"] == "ModelUnavailable"
    assert failed[0].parent is None  # that session was opened outside any span: a trace of its own
    texts = [v for s in spans for v in s.attributes.values() if isinstance(v, str)]
    texts += [str(v) for s in spans for e in s.events for v in e.attributes.values()]
    assert any(SECRET_PROMPT in t for t in texts) is content
