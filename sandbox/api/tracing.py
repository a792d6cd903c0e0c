"""Trace context over gRPC: a client interceptor writes the caller's W3C ``traceparent`` into
every call's metadata and times the call as a CLIENT span; a server interceptor reads it back
and runs the handler inside a SERVER span that is its child. Both exist only while tracing is
on (:mod:`skillopt.observability.tracing`): off, channels and servers are built without them.

Our own two interceptors rather than ``opentelemetry-instrumentation-grpc``: that package pins
beta versions to the SDK's and brings ``wrapt`` and the instrumentation framework, and its
client wrapper returns a generator for server streams, which loses the ``cancel()`` the rollout
client needs; a rollout also leaves the handler's thread for a worker (the servicer hands the
context over explicitly either way). These are ~150 lines over the SDK's propagator.

Span names follow OpenTelemetry's RPC conventions (``skillopt.sandbox.v1.Sandbox/Run``) with
``rpc.system``, ``rpc.service``, ``rpc.method`` and ``rpc.grpc.status_code``. Health checks
and reflection are not traced (load balancers poll them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import grpc

from skillopt.observability import tracing

__all__ = ["ServerTracing", "server_interceptors", "traced_channel"]

_UNTRACED = ("/grpc.health.v1.Health/", "/grpc.reflection.")


def _attributes(method: str) -> dict[str, str]:
    service, _, name = method.lstrip("/").rpartition("/")
    return {"rpc.system": "grpc", "rpc.service": service, "rpc.method": name}


def _code(context: grpc.ServicerContext) -> grpc.StatusCode | None:
    """The status the handler set (``abort``, ``set_code``); the stubs omit ``code()``."""
    code: Callable[[], grpc.StatusCode | None] = getattr(context, "code", lambda: None)
    return code()


def _end_with_status(sp: Any, code: grpc.StatusCode | None, details: str = "") -> None:
    code = code or grpc.StatusCode.OK
    sp.set_attribute("rpc.grpc.status_code", code.value[0])
    tracing.end_span(sp, error=f"{code.name}: {details}" if code is not grpc.StatusCode.OK else None)


# -- client --------------------------------------------------------------------------------------


class _CallDetails(NamedTuple):
    method: str
    timeout: float | None
    metadata: Any
    credentials: Any
    wait_for_ready: bool | None
    compression: Any


class _ClientTracing(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    """A CLIENT span per call (ended when the call terminates, whatever its status; a stream
    stays cancellable), its context sent as ``traceparent`` metadata."""

    def __init__(self, address: str) -> None:
        self._address = address

    def _intercept(self, continuation: Callable[..., Any], details: Any, request: Any) -> Any:
        method = details.method if isinstance(details.method, str) else details.method.decode()
        if not tracing.enabled() or method.startswith(_UNTRACED):
            return continuation(details, request)
        sp = tracing.start_span(
            method.lstrip("/"), {**_attributes(method), "server.address": self._address}, kind="client"
        )
        carrier: dict[str, str] = {}
        tracing.inject(carrier, tracing.context_of(sp))
        details = _CallDetails(
            details.method,
            details.timeout,
            [*(details.metadata or ()), *carrier.items()],
            details.credentials,
            details.wait_for_ready,
            details.compression,
        )
        try:
            call = continuation(details, request)
        except BaseException as exc:
            tracing.end_span(sp, error=exc)
            raise
        call.add_done_callback(lambda done: _end_with_status(sp, done.code(), done.details() or ""))
        return call

    def intercept_unary_unary(self, continuation, client_call_details, request):
        return self._intercept(continuation, client_call_details, request)

    def intercept_unary_stream(self, continuation, client_call_details, request):
        return self._intercept(continuation, client_call_details, request)

    def intercept_stream_unary(self, continuation, client_call_details, request_iterator):
        return self._intercept(continuation, client_call_details, request_iterator)

    def intercept_stream_stream(self, continuation, client_call_details, request_iterator):
        return self._intercept(continuation, client_call_details, request_iterator)


def traced_channel(channel: grpc.Channel, address: str) -> grpc.Channel:
    """``channel`` with the client interceptor while tracing is on; else ``channel`` itself."""
    if not tracing.enabled():
        return channel
    return grpc.intercept_channel(channel, _ClientTracing(address))


# -- server --------------------------------------------------------------------------------------


def _parent(handler_call_details: grpc.HandlerCallDetails) -> Any:
    metadata = handler_call_details.invocation_metadata or ()
    return tracing.extract({k: v for k, v in metadata if isinstance(v, str)})


def _unary(behaviour: Callable[..., Any], method: str, parent: Any) -> Callable[..., Any]:
    def traced(request: Any, context: grpc.ServicerContext) -> Any:
        sp = tracing.start_span(method.lstrip("/"), _attributes(method), parent=parent, kind="server")
        token = tracing.attach(tracing.context_of(sp))
        try:
            response = behaviour(request, context)
        except BaseException as exc:
            sp.set_attribute("error.type", type(exc).__name__)
            _end_with_status(sp, _code(context) or grpc.StatusCode.UNKNOWN, str(exc))
            raise
        finally:
            tracing.detach(token)
        _end_with_status(sp, _code(context))
        return response

    return traced


def _streaming(behaviour: Callable[..., Any], method: str, parent: Any) -> Callable[..., Any]:
    """A response stream in a span that is current only while the handler runs (each step of
    the generator), never across a ``yield``: the stream may be closed from another thread."""

    def traced(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        sp = tracing.start_span(method.lstrip("/"), _attributes(method), parent=parent, kind="server")
        ctx = tracing.context_of(sp)
        token = tracing.attach(ctx)
        try:
            responses = iter(behaviour(request, context))
        finally:
            tracing.detach(token)
        code: grpc.StatusCode | None = None
        try:
            while True:
                token = tracing.attach(ctx)
                try:
                    item = next(responses)
                except StopIteration:
                    break
                finally:
                    tracing.detach(token)
                yield item
        except GeneratorExit:
            code = grpc.StatusCode.CANCELLED  # the caller went away mid-stream
            raise
        except BaseException as exc:
            sp.set_attribute("error.type", type(exc).__name__)
            code = _code(context) or grpc.StatusCode.UNKNOWN
            raise
        finally:
            close = getattr(responses, "close", None)
            if close is not None:
                close()
            _end_with_status(sp, code or _code(context))

    return traced


class ServerTracing(grpc.ServerInterceptor):
    """Runs every traced RPC's handler in a SERVER span whose parent is the caller's
    ``traceparent``. Put it first among the interceptors, so refusals (a bad token) show too."""

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or not tracing.enabled() or method.startswith(_UNTRACED):
            return handler
        parent = _parent(handler_call_details)
        kw = {
            "request_deserializer": handler.request_deserializer,
            "response_serializer": handler.response_serializer,
        }
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(_unary(handler.unary_unary, method, parent), **kw)
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                _streaming(handler.unary_stream, method, parent), **kw
            )
        if handler.stream_unary is not None:
            return grpc.stream_unary_rpc_method_handler(_unary(handler.stream_unary, method, parent), **kw)
        if handler.stream_stream is not None:
            return grpc.stream_stream_rpc_method_handler(
                _streaming(handler.stream_stream, method, parent), **kw
            )
        return handler


def server_interceptors() -> list[grpc.ServerInterceptor]:
    """The interceptors a server adds for tracing: none while it is off."""
    return [ServerTracing()] if tracing.enabled() else []
