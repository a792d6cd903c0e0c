"""Server interceptors: bearer-token authentication (health checks exempt)."""

from __future__ import annotations

import hmac
from collections.abc import Callable

import grpc
import structlog

__all__ = ["TokenAuthInterceptor"]

log = structlog.get_logger("skillopt.sandbox.auth")

# Load balancers and orchestrators probe health without credentials.
_EXEMPT_PREFIXES = ("/grpc.health.v1.Health/",)


def _aborting(handler: grpc.RpcMethodHandler, code: grpc.StatusCode, message: str) -> grpc.RpcMethodHandler:
    """A handler of the same shape as ``handler`` that only aborts."""

    def unary(request, context):
        context.abort(code, message)

    def stream(request, context):
        context.abort(code, message)
        yield  # pragma: no cover - abort raises

    kw = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(stream, **kw)
    return grpc.unary_unary_rpc_method_handler(unary, **kw)


class TokenAuthInterceptor(grpc.ServerInterceptor):
    """Checks ``authorization: Bearer <token>`` on every call (constant-time compare).

    ``token=None`` disables the check (only allowed on loopback or with ``--insecure``).
    """

    def __init__(self, token: str | None) -> None:
        self._token = token.encode() if token else None

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        method = handler_call_details.method
        handler = continuation(handler_call_details)
        if handler is None or self._token is None or method.startswith(_EXEMPT_PREFIXES):
            return handler
        presented = None
        for key, value in handler_call_details.invocation_metadata or ():
            if key == "authorization":
                presented = value
                break
        if presented is None:
            return _aborting(
                handler,
                grpc.StatusCode.UNAUTHENTICATED,
                "missing credentials: send metadata 'authorization: Bearer <token>' (the service's --token-file)",
            )
        scheme, _, token = presented.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), self._token):
            log.warning("auth.rejected", method=method)
            return _aborting(handler, grpc.StatusCode.UNAUTHENTICATED, "invalid token")
        return handler
