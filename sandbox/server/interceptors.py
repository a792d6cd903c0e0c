"""Server interceptor: bearer-token authentication before the request is read, and request
bytes that do not decode turned into INVALID_ARGUMENT (gRPC's default is INTERNAL,
"Exception deserializing request!").

Authentication happens on the call's metadata, before any message is received: a caller
without the token gets UNAUTHENTICATED from a handler that never reads (or parses) the
request, so an unauthenticated 70 MB request costs the host nothing but the refusal. Health
checks are exempt (load balancers probe without credentials); their requests still decode
safely.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, NoReturn

import grpc
import structlog

from sandbox.api.status import status_for
from sandbox.service.tenants import TenantTokens
from skillopt.errors import InvalidRequest, Unauthenticated

__all__ = ["TokenAuthInterceptor"]

log = structlog.get_logger("skillopt.sandbox.auth")

# Load balancers and orchestrators probe health without credentials.
_EXEMPT_PREFIXES = ("/grpc.health.v1.Health/",)


class _Undecodable:
    """Stands for request bytes that did not parse (the handler aborts with INVALID_ARGUMENT)."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


def _abort(context: grpc.ServicerContext, exc: BaseException, host: str) -> NoReturn:
    code, message, trailers = status_for(exc, host=host)
    context.set_trailing_metadata(trailers)
    context.abort(code, message)


def _refusing(code_exc: BaseException, host: str) -> grpc.RpcMethodHandler:
    """A handler that refuses without reading the request: stream-stream, so gRPC receives no
    message before the behaviour runs (the wire format is the same for every call shape)."""

    def behaviour(request_iterator: Iterator[Any], context: grpc.ServicerContext):
        _abort(context, code_exc, host)
        yield  # pragma: no cover - abort raises

    return grpc.stream_stream_rpc_method_handler(
        behaviour, request_deserializer=lambda b: None, response_serializer=lambda m: b""
    )


def _safe_deserializer(deserialize: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    if deserialize is None:
        return None

    def safe(data: bytes) -> Any:
        try:
            return deserialize(data)
        except Exception as exc:  # protobuf's DecodeError, or anything a bad byte string causes
            return _Undecodable(exc)

    return safe


def _undecodable_error(request: _Undecodable) -> InvalidRequest:
    return InvalidRequest(
        f"request bytes do not decode as this method's message ({type(request.error).__name__}); "
        "send a serialized request of the method's type"
    )


def _checked_iterator(requests: Iterator[Any], context: grpc.ServicerContext, host: str) -> Iterator[Any]:
    for request in requests:
        if isinstance(request, _Undecodable):
            _abort(context, _undecodable_error(request), host)
        yield request


def _decoding(handler: grpc.RpcMethodHandler, host: str) -> grpc.RpcMethodHandler:
    """``handler`` with a deserializer that never raises and behaviour that refuses bad bytes."""
    kw = {
        "request_deserializer": _safe_deserializer(handler.request_deserializer),
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_unary is not None:
        inner_uu = handler.unary_unary

        def unary_unary(request, context):
            if isinstance(request, _Undecodable):
                _abort(context, _undecodable_error(request), host)
            return inner_uu(request, context)

        return grpc.unary_unary_rpc_method_handler(unary_unary, **kw)
    if handler.unary_stream is not None:
        inner_us = handler.unary_stream

        def unary_stream(request, context):
            if isinstance(request, _Undecodable):
                _abort(context, _undecodable_error(request), host)
            yield from inner_us(request, context)

        return grpc.unary_stream_rpc_method_handler(unary_stream, **kw)
    if handler.stream_unary is not None:
        inner_su = handler.stream_unary

        def stream_unary(requests, context):
            return inner_su(_checked_iterator(requests, context, host), context)

        return grpc.stream_unary_rpc_method_handler(stream_unary, **kw)
    inner_ss = handler.stream_stream
    if inner_ss is None:  # not a handler of any of the four shapes: nothing to wrap
        return handler

    def stream_stream(requests, context):
        yield from inner_ss(_checked_iterator(requests, context, host), context)

    return grpc.stream_stream_rpc_method_handler(stream_stream, **kw)


class TokenAuthInterceptor(grpc.ServerInterceptor):
    """Checks ``authorization: Bearer <token>`` on every call (constant-time compare against
    each of the host's tokens) before the request is read, and makes undecodable requests
    INVALID_ARGUMENT.

    ``tokens=None`` disables the check (only allowed on loopback or with ``--insecure``); a
    plain string is one token.
    """

    def __init__(self, tokens: TenantTokens | str | None, *, host: str = "") -> None:
        self._tokens = TenantTokens.single(tokens) if isinstance(tokens, str) else (tokens or None)
        self._host = host

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        method = handler_call_details.method
        if self._tokens is not None and not method.startswith(_EXEMPT_PREFIXES):
            presented = None
            for key, value in handler_call_details.invocation_metadata or ():
                if key == "authorization":
                    presented = value
                    break
            if presented is None:
                return _refusing(
                    Unauthenticated(
                        "missing credentials: send metadata 'authorization: Bearer <token>' "
                        "(the service's --token-file)"
                    ),
                    self._host,
                )
            if isinstance(presented, bytes):
                presented = presented.decode("latin-1")
            scheme, _, token = presented.partition(" ")
            if scheme.lower() != "bearer" or self._tokens.identify(token) is None:
                log.warning("auth.rejected", method=method[:200])
                return _refusing(Unauthenticated("invalid token"), self._host)
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        return _decoding(handler, self._host)
