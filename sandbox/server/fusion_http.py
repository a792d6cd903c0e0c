"""The SandboxFusion-compatible HTTP API of a sandbox host (``skillopt serve --http-listen``).

``POST /run_code`` and ``POST /run_jupyter`` take and return the JSON of SandboxFusion's
``RunCodeRequest``/``RunCodeResponse`` and ``RunJupyterRequest``/``RunJupyterResponse``
(bytedance/SandboxFusion, ``sandbox/server/sandbox_api.py``; its PyPI client
``sandbox-fusion`` talks to this listener unmodified), ``GET /v1/ping`` answers ``"pong"``.
Translation only: the shapes are :mod:`sandbox.server.fusion_models`' pydantic models, the
work is :class:`~sandbox.service.coderun.CodeRunner`'s.

Who may call (the host's tenant tokens, as on gRPC):

* ``Authorization: Bearer <token>``, or
* the token as the first two path segments, ``/t/<token>/run_code``: a SandboxFusion client is
  configured with nothing but an endpoint URL, so ``http://host:8080/t/<token>`` is its
  endpoint. The risk: a URL is logged and shown where a header is not (proxies' access logs,
  shell history, a framework's printed config), so such a token should be one of its own
  (a tenant line of the token file, with its own ``max_sessions``), rotated when it leaks.
* A host without tokens (loopback only, as its gRPC port) lets every caller in as the local
  tenant.

Status codes: 200 with ``status`` Success / Failed / SandboxError (the sandbox's own failure,
with a message); 400 a request this host will not run (unknown language: the message names
the host's languages; bad timeouts, base64, names, isolation); 401 no valid token; 404, 405;
408 a body that stopped coming; 411/413 no or too large a body (refused before it is read);
412 an isolation this host cannot give; 429 no room now (``Retry-After``); 503 draining or too
many connections. Every refusal is ``{"detail": message}``.

What serves it: Starlette on uvicorn (the WebUI's server), on an event loop in a thread of its
own (the host's gRPC server has the others). uvicorn runs httptools and uvloop when they are
installed (``skillopt``'s dependencies on Linux: half the CPU per request of its pure-Python
h11, :mod:`sandbox.server.http_protocol` has the figures) and h11 otherwise. The
blocking work (:meth:`HttpApi.post`) runs in a thread pool as large as ``max_connections``
(anyio's, through a limiter of that size), so a request never waits for a thread: a full
host's 429 stays immediate and a bad request's 400 never queues behind running programs (a
pool the size of the host's session cap would hold them instead).

Written here rather than taken from uvicorn, and why:

* Requests in flight (``max_connections``): uvicorn's ``limit_concurrency`` answers a plain-text
  503 without ``Retry-After`` and counts idle keep-alive connections too; ours counts the
  requests being served and answers like every other refusal.
* The body (uvicorn has no limit of its own): refused from its ``Content-Length`` before a byte
  of it is read (411 none or chunked, 413 too large, 503 when the bodies held in memory at once
  would pass ``max_buffered_bytes``), each with ``Connection: close``, which makes uvicorn close
  the connection rather than read the unwanted body off it.
* A body that stops coming for 60 s is answered 408 (uvicorn has no read timeout; the stdlib
  server this replaced had its socket timeout).
* A request line and headers past 64 KiB are refused (400) as they arrive: httptools has no
  bound of its own (:mod:`sandbox.server.http_protocol`).
"""

from __future__ import annotations

import json
import math
import socket
import threading
from dataclasses import replace
from typing import Any

import anyio
import anyio.to_thread
import pydantic_core
import structlog
import uvicorn
from pydantic import BaseModel
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from sandbox.runtime.base import SandboxRuntime
from sandbox.server.fusion_models import ROUTES, RunCodeRequest, answer_of, parse_request
from sandbox.server.http_protocol import http_protocol
from sandbox.service.coderun import CodeRunConfig, CodeRunner
from sandbox.service.languages import image_languages
from sandbox.service.sessions import SessionManager
from sandbox.service.tenants import LOCAL_TENANT, Tenant, TenantTokens
from skillopt.errors import ConfigError, Draining, InvalidRequest, IsolationUnavailable, SessionLimit
from skillopt.units import MiB

__all__ = ["FusionHttpServer", "HttpApi", "HttpRefusal", "credential", "start_http_api"]

log = structlog.get_logger("skillopt.sandbox.http")

#: Seconds a request's body may stop coming before the request is answered 408.
BODY_IDLE_S = 60.0
#: Seconds an idle keep-alive connection is kept (longer than the fleet front's own expiry of
#: the connections it keeps to a host, so the front never sends on one the host just closed).
KEEP_ALIVE_S = 15
#: Where a request's caller (what :meth:`HttpApi.authorize` returned) rides in the ASGI scope.
_CALLER = "skillopt.caller"
_CLOSE = {"Connection": "close"}


class HttpRefusal(Exception):
    """A request answered with ``status`` and ``{"detail": message}`` (and ``headers``)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


def credential(path: str, authorization: str) -> tuple[str, str]:
    """The caller's token ("" when none: from a ``/t/<token>`` path prefix, else an
    ``Authorization: Bearer`` header) and the path without the prefix."""
    token = ""
    if path.startswith("/t/"):
        token, _, rest = path[3:].partition("/")
        path = "/" + rest
    if not token and authorization[:7].lower() == "bearer ":
        token = authorization[7:]
    return token, path


class HttpApi:
    """The SandboxFusion-compatible listener, serving in a thread of its own until :meth:`close`;
    subclasses say who the caller is (:meth:`authorize`) and what a POST does (:meth:`post`).

    Args:
        listen: ``HOST:PORT`` (port 0: any free one; :attr:`port` tells which).
        max_body_bytes: largest request body; larger ones are refused unread (413).
        max_connections: requests served at once; more get 503 at once.
        max_buffered_bytes: request bodies held in memory at once, across connections (default
            4 bodies of the largest size); a body that would exceed it is refused unread (503,
            ``Retry-After``), so many connections cannot add up to the machine's memory.

    Raises:
        OSError, ValueError: ``listen`` cannot be bound.
    """

    def __init__(
        self,
        *,
        listen: str,
        max_body_bytes: int = 64 * MiB,
        max_connections: int = 128,
        max_buffered_bytes: int | None = None,
    ) -> None:
        self.max_body_bytes = max_body_bytes
        self.max_buffered_bytes = 4 * max_body_bytes if max_buffered_bytes is None else max_buffered_bytes
        self.max_connections = max_connections
        # Both counted on the event loop's thread only: no lock.
        self._buffered = 0
        self._in_flight = 0
        self._threads = anyio.CapacityLimiter(max_connections)
        routes = [Route(path, self._posted, methods=["POST"]) for path in ROUTES]
        app = Starlette(
            routes=[*routes, Route("/v1/ping", _ping, methods=["GET"])],
            exception_handlers={HTTPException: _http_error},
        )
        sock = _bound(listen)
        self.port: int = sock.getsockname()[1]
        http, http_settings = http_protocol()
        config = uvicorn.Config(
            _Door(self, app),
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="off",
            ws="none",
            proxy_headers=False,  # no X-Forwarded-For: nothing here uses the client's address
            http=http,
            **http_settings,
            server_header=False,
            headers=[("server", "skillopt-sandbox")],
            timeout_keep_alive=KEEP_ALIVE_S,
        )
        self._server = _Server(config)
        self._thread = threading.Thread(target=self._serve, args=(sock,), name="fusion-http", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop accepting connections (requests in flight finish and are answered)."""
        self._server.should_exit = True
        self._server.stopped_accepting.wait(5.0)

    def _serve(self, sock: socket.socket) -> None:
        try:
            self._server.run(sockets=[sock])
        finally:  # also when it stopped before it served (closed at once)
            sock.close()
            self._server.stopped_accepting.set()

    def authorize(self, path: str, authorization: str) -> tuple[Any, str]:
        """Who calls (what :meth:`post` gets) and the path without a ``/t/<token>`` prefix.
        Runs on the event loop: it must not block.

        Raises:
            HttpRefusal: 401, the caller may not.
        """
        raise NotImplementedError

    def post(self, route: str, caller: Any, body: bytes) -> tuple[int, Any]:
        """The answer to a POST of ``body`` to ``route`` (``/run_code`` or ``/run_jupyter``):
        a status and a payload (a pydantic model, ``bytes`` that are JSON already, or anything
        :func:`json.dumps` takes). Runs in a thread of the listener's pool: it may block."""
        raise NotImplementedError

    async def _posted(self, request: Request) -> Response:
        try:
            size = _declared_size(request.headers, self.max_body_bytes)
            if self._buffered + size > self.max_buffered_bytes:
                raise HttpRefusal(
                    503,
                    f"this API holds {self.max_buffered_bytes} bytes of request bodies already; retry shortly",
                    {"Retry-After": "1", **_CLOSE},
                )
            self._buffered += size
            try:
                body = await _body(request.receive)
                status, payload = await anyio.to_thread.run_sync(
                    self.post, request.scope["path"], request.scope[_CALLER], body, limiter=self._threads
                )
            finally:
                self._buffered -= size
            return _json(status, payload)
        except Exception as exc:
            return _refused(exc, request.scope["path"])


class _Door:
    """The ASGI middleware in front of the routes: at most ``max_connections`` requests in
    flight (503 past them), then the caller (401), whose ``/t/<token>`` prefix leaves the path."""

    def __init__(self, api: HttpApi, app: ASGIApp) -> None:
        self.api, self.app = api, app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        api = self.api
        if api._in_flight >= api.max_connections:
            refusal = HttpRefusal(
                503, "too many connections to this host; retry shortly", {"Retry-After": "1", **_CLOSE}
            )
            return await _refused(refusal, "")(scope, receive, send)
        api._in_flight += 1
        try:
            authorization = Headers(scope=scope).get("authorization", "")
            try:
                caller, path = api.authorize(scope["path"], authorization)
            except HttpRefusal as exc:
                return await _refused(exc, "")(scope, receive, send)
            path = path.rstrip("/") or "/"
            # The token leaves the scope with its prefix (nothing downstream sees or logs it).
            scope = {**scope, "path": path, "raw_path": path.encode(), _CALLER: caller}
            await self.app(scope, receive, send)
        finally:
            api._in_flight -= 1


class _Server(uvicorn.Server):
    """uvicorn's server, telling :meth:`HttpApi.close` when it stopped accepting (it then
    goes on answering the requests in flight)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.stopped_accepting = threading.Event()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        self.stopped_accepting.set()
        await super().shutdown(sockets=sockets)


def _bound(listen: str) -> socket.socket:
    """A listening socket on ``HOST:PORT`` (``[::]:PORT`` for IPv6; no host: every IPv4 one)."""
    host, _, port = listen.rpartition(":")
    host = host.strip("[]") or "0.0.0.0"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, int(port)), family=family, backlog=2048)


def _declared_size(headers: Headers, max_bytes: int) -> int:
    """The body's size from its ``Content-Length``.

    Raises:
        HttpRefusal: 411 chunked or no length, 413 above ``max_bytes``.
    """
    if headers.get("transfer-encoding", "").lower() not in ("", "identity"):
        raise HttpRefusal(
            411, "send the body with a Content-Length (chunked bodies are not accepted)", _CLOSE
        )
    raw = headers.get("content-length")
    if raw is None or not raw.strip().isdigit():
        raise HttpRefusal(411, "a Content-Length header is required", _CLOSE)
    size = int(raw)
    if size > max_bytes:
        raise HttpRefusal(413, f"a body of {size} bytes exceeds this host's {max_bytes}", _CLOSE)
    return size


async def _body(receive: Receive) -> bytes:
    """The request's body (its length is the server's to hold to its ``Content-Length``).

    Raises:
        HttpRefusal: 408, no part of it came for :data:`BODY_IDLE_S`; 400, the client left.
    """
    chunks = []
    while True:
        try:
            with anyio.fail_after(BODY_IDLE_S):
                message = await receive()
        except TimeoutError:
            raise HttpRefusal(408, f"the body stopped coming for {BODY_IDLE_S:g} s", _CLOSE) from None
        if message["type"] == "http.disconnect":
            raise HttpRefusal(400, "the client closed the connection before its body was sent", _CLOSE)
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _json(status: int, payload: Any, headers: dict[str, str] | None = None) -> Response:
    if isinstance(payload, BaseModel):
        data = pydantic_core.to_json(payload)
    else:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode("utf-8")
    return Response(data, status_code=status, headers=headers, media_type="application/json")


def _refused(exc: Exception, path: str) -> Response:
    """The answer to a request that raised ``exc``: a refusal with its reason, or a 500 (a bug
    of ours: logged, and the host goes on)."""
    if isinstance(exc, HttpRefusal):
        return _json(exc.status, {"detail": exc.message}, exc.headers)
    if isinstance(exc, InvalidRequest):
        return _json(400, {"detail": str(exc)})
    if isinstance(exc, IsolationUnavailable):  # nothing ran; another host may give it
        return _json(412, {"detail": str(exc)})
    if isinstance(exc, SessionLimit):
        retry = str(max(1, math.ceil(exc.retry_after_s or 1.0)))
        return _json(429, {"detail": str(exc)}, {"Retry-After": retry})
    if isinstance(exc, Draining):
        return _json(503, {"detail": str(exc)}, {"Retry-After": "1"})
    log.error("http.failed", path=path[:100], exc_info=exc)
    return _json(500, {"detail": f"internal error: {exc.__class__.__name__}: {str(exc)[:500]}"})


async def _ping(request: Request) -> Response:
    return _json(200, "pong")


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's 404 (no such route) and 405 (another method's route), as our refusals."""
    assert isinstance(exc, HTTPException)
    what = "no such resource" if exc.status_code == 404 else f"{request.method} is not allowed on"
    detail = f"{what}: {request.url.path[:100]} (GET /v1/ping, POST /run_code, /run_jupyter)"
    return _json(exc.status_code, {"detail": detail}, dict(exc.headers or {}))


class FusionHttpServer(HttpApi):
    """The HTTP API of one host.

    Args:
        runner: does the work.
        tenants: the host's tokens (``None``: no authentication, every caller is the local tenant).
        listen, max_body_bytes, max_connections: as :class:`HttpApi`.
    """

    def __init__(
        self,
        runner: CodeRunner,
        *,
        tenants: TenantTokens | None,
        listen: str,
        max_body_bytes: int = 64 * MiB,
        max_connections: int = 128,
    ) -> None:
        self.runner = runner
        self.tenants = tenants or None
        super().__init__(listen=listen, max_body_bytes=max_body_bytes, max_connections=max_connections)
        log.info("http.started", listen=listen, port=self.port, languages=list(runner.config.languages))

    def authorize(self, path: str, authorization: str) -> tuple[Tenant, str]:
        """The caller's tenant and the path without a ``/t/<token>`` prefix.

        Raises:
            HttpRefusal: 401, no token or a wrong one.
        """
        token, path = credential(path, authorization)
        if self.tenants is None:
            return LOCAL_TENANT, path
        tenant = self.tenants.identify(token) if token else None
        if tenant is None:
            raise HttpRefusal(
                401,
                "a valid token is required: send 'Authorization: Bearer <token>' or use the "
                "endpoint URL http://<host>:<port>/t/<token>",
                {"WWW-Authenticate": "Bearer"},
            )
        return tenant, path

    def post(self, route: str, caller: Tenant, body: bytes) -> tuple[int, BaseModel]:
        log.debug("http.request", route=route, tenant=caller.id)
        with self.runner.sessions.buffering(len(body)):  # bodies held in memory count against the budget
            request = parse_request(ROUTES[route], body)
            if isinstance(request, RunCodeRequest):
                result = self.runner.run_code(caller, request.to_domain())
            else:
                result = self.runner.run_jupyter(caller, request.to_domain())
            return 200, answer_of(route, result)


def start_http_api(
    listen: str,
    *,
    image: str,
    runtime: SandboxRuntime,
    sessions: SessionManager,
    tokens: TenantTokens | None,
    max_body_bytes: int,
) -> FusionHttpServer:
    """The HTTP API of a host, serving code runs from ``image`` (its languages from its label),
    with a warm pool for them.

    Raises:
        ConfigError: ``listen`` cannot be bound.
    """
    languages = image_languages(runtime.image_labels(image))
    runner = CodeRunner(CodeRunConfig(image=image, languages=languages), sessions)
    sessions.pools.prewarm(replace(sessions.policy.base_spec, image=image, workspace_exec=True))
    try:
        return FusionHttpServer(runner, tenants=tokens, listen=listen, max_body_bytes=max_body_bytes)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot listen on {listen} (--http-listen): {exc}") from exc
