"""A tiny OTLP/HTTP trace receiver for tests and benchmarks: a real HTTP server on loopback
that decodes ``ExportTraceServiceRequest`` protobufs (``opentelemetry-proto``) into
:class:`ReceivedSpan` rows, so a test can point processes at it with the standard variables
(``OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint``) and read back what they exported.

Usage::

    with OtlpReceiver() as receiver:
        env = {**os.environ, **receiver.environment()}
        ...  # start processes with env
        spans = receiver.wait_for(lambda spans: any(s.name == "sandbox.grade" for s in spans))
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["OtlpReceiver", "ReceivedSpan"]


@dataclass(frozen=True)
class ReceivedSpan:
    """One exported span, flattened: ids as hex, attributes as plain values."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    attributes: dict[str, Any]
    resource: dict[str, Any]
    status_code: int
    start_ns: int
    end_ns: int
    events: tuple[dict[str, Any], ...] = field(default=())

    @property
    def service(self) -> str:
        return str(self.resource.get("service.name", ""))


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind) if kind else None


def _attrs(kvs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in kvs}


class OtlpReceiver:
    """Receives OTLP/HTTP protobuf trace exports on ``127.0.0.1:<free port>/v1/traces``."""

    def __init__(self) -> None:
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

        self._pb = trace_service_pb2
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self._cond = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.headers.get("content-encoding", "") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                receiver._take(body)
                reply = receiver._pb.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:  # quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="otlp")
        self._thread.start()

    @property
    def endpoint(self) -> str:
        """The base URL (``OTEL_EXPORTER_OTLP_ENDPOINT``; exporters add ``/v1/traces``)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def environment(self, *, flush_ms: int = 200) -> dict[str, str]:
        """The variables that send a process's spans here, batched every ``flush_ms``."""
        return {
            "OTEL_EXPORTER_OTLP_ENDPOINT": self.endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_BSP_SCHEDULE_DELAY": str(flush_ms),
        }

    def _take(self, body: bytes) -> None:
        request = self._pb.ExportTraceServiceRequest()
        request.ParseFromString(body)
        spans = []
        for rs in request.resource_spans:
            resource = _attrs(rs.resource.attributes)
            for ss in rs.scope_spans:
                for s in ss.spans:
                    spans.append(
                        ReceivedSpan(
                            name=s.name,
                            trace_id=s.trace_id.hex(),
                            span_id=s.span_id.hex(),
                            parent_span_id=s.parent_span_id.hex(),
                            kind=s.kind,
                            attributes=_attrs(s.attributes),
                            resource=resource,
                            status_code=s.status.code,
                            start_ns=s.start_time_unix_nano,
                            end_ns=s.end_time_unix_nano,
                            events=tuple({"name": e.name, **_attrs(e.attributes)} for e in s.events),
                        )
                    )
        with self._cond:
            self.requests += 1
            self.spans.extend(spans)
            self._cond.notify_all()

    def wait_for(
        self, done: Callable[[list[ReceivedSpan]], bool], *, timeout_s: float = 30.0
    ) -> list[ReceivedSpan]:
        """The spans received, once ``done(spans)`` holds (woken by every export).

        Raises:
            TimeoutError: it did not hold within ``timeout_s`` (the spans so far named).
        """
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not done(list(self.spans)):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    names = sorted({f"{s.service}:{s.name}" for s in self.spans})
                    raise TimeoutError(f"spans received so far: {names}")
                self._cond.wait(remaining)
            return list(self.spans)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> OtlpReceiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
