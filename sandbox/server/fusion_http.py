"""The SandboxFusion-compatible HTTP API of a sandbox host (``skillopt serve --http-listen``).

``POST /run_code`` and ``POST /run_jupyter`` take and return the JSON of SandboxFusion's
``RunCodeRequest``/``RunCodeResponse`` and ``RunJupyterRequest``/``RunJupyterResponse``
(bytedance/SandboxFusion, ``sandbox/server/sandbox_api.py``; its PyPI client
``sandbox-fusion`` talks to this listener unmodified), ``GET /v1/ping`` answers ``"pong"``.
Translation only: the work is :class:`~sandbox.service.coderun.CodeRunner`'s.

Who may call (the host's tenant tokens, as on gRPC):

* ``Authorization: Bearer <token>``, or
* the token as the first two path segments, ``/t/<token>/run_code``: a SandboxFusion client is
  configured with nothing but an endpoint URL, so ``http://host:8080/t/<token>`` is its
  endpoint. The risk: a URL is logged and shown where a header is not (proxies' access logs,
  shell history, a framework's printed config), so such a token should be one of its own
  (a tenant line of the token file, with its own ``max_sessions``), rotated when it leaks.
* A host without tokens (loopback only, as its gRPC port) lets every caller in as the local
  tenant.

Beyond SandboxFusion's fields (its clients send none of these and ignore the extra answer):

* request ``isolation``: ``""`` (any, the default) or ``"gvisor"``: the container must run
  under gVisor, else 412 before any container starts, saying what this host has and how to
  get it (the levels: :mod:`skillopt.isolation`);
* answer ``container_runtime``: the OCI runtime the container actually ran under (``runc``,
  ``runsc``; "" when no container was had).

Status codes: 200 with ``status`` Success / Failed / SandboxError (the sandbox's own failure,
with a message); 400 a request this host will not run (unknown language: the message names
the host's languages; bad timeouts, base64, names, isolation); 401 no valid token; 404, 405;
411/413 no or too large a body (refused before it is read); 412 an isolation this host cannot
give; 429 no room now (``Retry-After``); 503 draining or too many connections.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import threading
from collections.abc import Callable
from dataclasses import replace
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import structlog

from sandbox.runtime.base import SandboxRuntime
from sandbox.service.coderun import (
    CodeRequest,
    CodeResult,
    CodeRunConfig,
    CodeRunner,
    CommandResult,
    JupyterRequest,
)
from sandbox.service.languages import image_languages
from sandbox.service.sessions import SessionManager
from sandbox.service.tenants import LOCAL_TENANT, Tenant, TenantTokens
from skillopt.errors import ConfigError, Draining, InvalidRequest, IsolationUnavailable, SessionLimit
from skillopt.units import MiB

__all__ = ["FusionHttpServer", "HttpApi", "HttpRefusal", "credential", "start_http_api"]

log = structlog.get_logger("skillopt.sandbox.http")


class HttpRefusal(Exception):
    """A request answered with ``status`` and ``{"detail": message}`` (and ``headers``)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


#: The routes a POST may take.
ROUTES = ("/run_code", "/run_jupyter")


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
        max_connections: connections served at once; more get 503 at once.
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
        self._buffered = 0
        self._buffered_lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(max_connections)
        host, _, port = listen.rpartition(":")
        self._httpd = ThreadingHTTPServer((host.strip("[]") or "0.0.0.0", int(port)), _handler_class(self))
        self._httpd.daemon_threads = True
        self.port: int = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="fusion-http", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop accepting connections (requests in flight finish on their own threads)."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5.0)

    def reserve_body(self, size: int) -> bool:
        """Room for a body of ``size`` bytes in memory (give it back with :meth:`release_body`)."""
        with self._buffered_lock:
            if self._buffered + size > self.max_buffered_bytes:
                return False
            self._buffered += size
            return True

    def release_body(self, size: int) -> None:
        with self._buffered_lock:
            self._buffered -= size

    def authorize(self, path: str, authorization: str) -> tuple[Any, str]:
        """Who calls (what :meth:`post` gets) and the path without a ``/t/<token>`` prefix.

        Raises:
            HttpRefusal: 401, the caller may not.
        """
        raise NotImplementedError

    def post(self, route: str, caller: Any, body: bytes) -> tuple[int, Any]:
        """The answer to a POST of ``body`` to ``route`` (one of :data:`ROUTES`): a status and
        a payload (JSON-able, or ``bytes`` that are JSON already)."""
        raise NotImplementedError


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

    def post(self, route: str, caller: Tenant, body: bytes) -> tuple[int, Any]:
        log.debug("http.request", route=route, tenant=caller.id)
        with self.runner.sessions.buffering(len(body)):  # bodies held in memory count against the budget
            parsed = parse_body(body)
            del body
            return 200, self.dispatch(route, caller, parsed)

    def dispatch(self, route: str, tenant: Tenant, body: dict[str, Any]) -> dict[str, Any]:
        if route == "/run_code":
            return _code_response(self.runner.run_code(tenant, _code_request(body)))
        return _jupyter_response(self.runner.run_jupyter(tenant, _jupyter_request(body)))


def parse_body(body: bytes) -> dict[str, Any]:
    """A request's JSON object.

    Raises:
        HttpRefusal: 400, not JSON or not an object.
    """
    try:
        parsed = json.loads(body)
    except ValueError as exc:
        raise HttpRefusal(400, f"the body is not JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise HttpRefusal(400, "the body must be a JSON object")
    return parsed


def _handler_class(server: HttpApi) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        front = server

    return Handler


class _Handler(BaseHTTPRequestHandler):
    front: HttpApi
    protocol_version = "HTTP/1.1"  # keep-alive (every reply carries Content-Length)
    server_version = "skillopt-sandbox"
    #: Seconds a connection may sit idle or trickle (slow clients hold no slot forever).
    timeout = 60
    #: Bytes of this request's body counted against the listener's buffer budget.
    _reserved = 0

    def log_message(self, format: str, *args: Any) -> None:
        pass  # structlog lines per request instead of stderr

    def do_GET(self) -> None:
        self._guarded(self._get)

    def do_POST(self) -> None:
        self._guarded(self._post)

    def _guarded(self, work: Callable[[], tuple[int, Any]]) -> None:
        if not self.front._slots.acquire(blocking=False):
            self._send(
                503, {"detail": "too many connections to this host; retry shortly"}, {"Retry-After": "1"}
            )
            self.close_connection = True
            return
        try:
            status, payload = work()
            self._send(status, payload)
        except HttpRefusal as exc:
            self._send(exc.status, {"detail": exc.message}, exc.headers)
        except InvalidRequest as exc:
            self._send(400, {"detail": str(exc)})
        except IsolationUnavailable as exc:  # nothing ran; another host may give it
            self._send(412, {"detail": str(exc)})
        except SessionLimit as exc:
            retry = str(max(1, math.ceil(exc.retry_after_s or 1.0)))
            self._send(429, {"detail": str(exc)}, {"Retry-After": retry})
        except Draining as exc:
            self._send(503, {"detail": str(exc)}, {"Retry-After": "1"})
        except Exception as exc:  # a bug of ours: a 500 with the reason, the host goes on
            log.exception("http.failed", path=_redacted(self.path))
            self._send(500, {"detail": f"internal error: {exc.__class__.__name__}: {str(exc)[:500]}"})
        finally:
            if self._reserved:
                self.front.release_body(self._reserved)
                self._reserved = 0
            self.front._slots.release()

    def _get(self) -> tuple[int, Any]:
        _, path = self.front.authorize(self.path, self.headers.get("Authorization", ""))
        if path == "/v1/ping":
            return 200, "pong"
        raise HttpRefusal(404, f"no such resource: {path[:100]} (GET /v1/ping, POST /run_code, /run_jupyter)")

    def _post(self) -> tuple[int, Any]:
        caller, path = self.front.authorize(self.path, self.headers.get("Authorization", ""))
        route = path.split("?", 1)[0].rstrip("/")
        if route not in ROUTES:
            raise HttpRefusal(404, f"no such resource: {route[:100]} (POST /run_code or /run_jupyter)")
        return self.front.post(route, caller, self._body())

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() not in ("", "identity"):
            self.close_connection = True
            raise HttpRefusal(411, "send the body with a Content-Length (chunked bodies are not accepted)")
        raw = self.headers.get("Content-Length")
        if raw is None or not raw.strip().isdigit():
            self.close_connection = True
            raise HttpRefusal(411, "a Content-Length header is required")
        size = int(raw)
        if size > self.front.max_body_bytes:
            self.close_connection = True  # the body is never read
            raise HttpRefusal(413, f"a body of {size} bytes exceeds this host's {self.front.max_body_bytes}")
        if not self.front.reserve_body(size):
            self.close_connection = True  # the body is never read
            raise HttpRefusal(
                503,
                f"this API holds {self.front.max_buffered_bytes} bytes of request bodies already; "
                "retry shortly",
                {"Retry-After": "1"},
            )
        self._reserved = size
        return self.rfile.read(size)

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode("utf-8")
        try:
            self.send_response(
                status, HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else ""
            )
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            self.close_connection = True  # the client went away


def _redacted(path: str) -> str:
    """``path`` without a ``/t/<token>`` prefix's token (never logged)."""
    return "/t/***/" + path[3:].partition("/")[2][:100] if path.startswith("/t/") else path[:100]


# -- SandboxFusion's JSON <-> domain values ----------------------------------------------------------


def _field(body: dict[str, Any], name: str, kinds: type | tuple[type, ...], default: Any) -> Any:
    value = body.get(name, default)
    if value is None and default is None:
        return None
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise InvalidRequest(f"{name} has the wrong type ({type(value).__name__})")
    return value


def _seconds(body: dict[str, Any], name: str, default: float) -> float:
    return float(_field(body, name, (int, float), default))


def _files_in(body: dict[str, Any]) -> tuple[tuple[str, bytes], ...]:
    files = _field(body, "files", dict, {})
    decoded = []
    for name, content in files.items():
        if content is None:  # SandboxFusion skips a file without content
            continue
        if not isinstance(content, str):
            raise InvalidRequest(f"files[{name[:60]!r}] must be a base64 string")
        try:
            decoded.append((name, base64.b64decode(content, validate=True)))
        except (binascii.Error, ValueError):
            raise InvalidRequest(f"files[{name[:60]!r}] is not valid base64") from None
    return tuple(decoded)


def _names(body: dict[str, Any]) -> tuple[str, ...]:
    names = _field(body, "fetch_files", list, [])
    if not all(isinstance(n, str) for n in names):
        raise InvalidRequest("fetch_files must be a list of strings")
    return tuple(names)


def _code_request(body: dict[str, Any]) -> CodeRequest:
    if "code" not in body or "language" not in body:
        raise InvalidRequest("code and language are required")
    stdin = _field(body, "stdin", str, None)
    return CodeRequest(
        language=_field(body, "language", str, ""),
        code=_field(body, "code", str, "").encode("utf-8", "replace"),
        compile_timeout_s=_seconds(body, "compile_timeout", 10.0),
        run_timeout_s=_seconds(body, "run_timeout", 10.0),
        stdin=stdin.encode("utf-8", "replace") if stdin else b"",
        files=_files_in(body),
        fetch_files=_names(body),
        memory_limit_mb=_field(body, "memory_limit_MB", int, -1),
        isolation=_field(body, "isolation", str, ""),
    )


def _jupyter_request(body: dict[str, Any]) -> JupyterRequest:
    cells = _field(body, "cells", list, None)
    if cells is None or not all(isinstance(c, str) for c in cells):
        raise InvalidRequest("cells is required: a list of strings")
    kernel = _field(body, "kernel", str, "python3")
    if kernel != "python3":
        raise InvalidRequest(f"kernel must be 'python3', got {kernel[:40]!r}")
    return JupyterRequest(
        cells=tuple(cells),
        cell_timeout_s=_seconds(body, "cell_timeout", 0.0),
        total_timeout_s=_seconds(body, "total_timeout", 45.0),
        files=_files_in(body),
        fetch_files=_names(body),
        isolation=_field(body, "isolation", str, ""),
    )


def _command(result: CommandResult | None) -> dict[str, Any] | None:
    if result is None:
        return None
    return {
        "status": result.status,
        "execution_time": result.execution_time_s,
        "cpu_time": None,
        "return_code": result.return_code,
        "stdout": result.stdout,
        "stderr": result.stderr,
    }


def _files_out(files: dict[str, bytes]) -> dict[str, str]:
    return {name: base64.b64encode(data).decode("ascii") for name, data in files.items()}


def _code_response(result: CodeResult) -> dict[str, Any]:
    return {
        "status": result.status,
        "message": result.message,
        "compile_result": _command(result.compile),
        "run_result": _command(result.run),
        "executor_pod_name": result.executor,
        "files": _files_out(result.files),
        "container_runtime": result.container_runtime,
    }


def _jupyter_response(result: CodeResult) -> dict[str, Any]:
    return {
        "status": result.status,
        "message": result.message,
        "driver": _command(result.run),
        "cells": result.cells,
        "executor_pod_name": result.executor,
        "files": _files_out(result.files),
        "container_runtime": result.container_runtime,
    }


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
