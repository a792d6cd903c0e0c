"""The gateway's HTTP front end, reachable only from exec-agent containers.

Speaks the three model APIs by path suffix (``…/responses``, ``…/chat/completions``,
``…/messages``) and authenticates each request by its rollout token (``Authorization:
Bearer``, ``x-api-key`` or ``api-key``). Responses, including SSE streams, are relayed as they
arrive (chunked).
"""

from __future__ import annotations

import contextlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import httpx
import structlog

from sandbox.gateway.core import Gateway
from skillopt.errors import BudgetExceeded, GatewayError, ReplayMiss
from skillopt.httpbody import BodyError, read_body

__all__ = ["GatewayServer"]

log = structlog.get_logger("skillopt.sandbox.gateway")

_PROBES = ("/", "/api/hello", "/health")


def _route(path: str) -> str | None:
    for suffix, api in (
        ("/responses", "responses"),
        ("/chat/completions", "chat"),
        ("/messages", "messages"),
        ("/models", "models"),
    ):
        if path.rstrip("/").endswith(suffix):
            return api
    return None


def _error_body(api: str, status: int, kind: str, message: str) -> dict[str, Any]:
    if api == "messages":
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"type": kind, "code": kind, "message": message}}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128
    gateway: Gateway


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    timeout = 900

    def log_message(self, format: str, *args: Any) -> None:  # structlog instead
        pass

    def do_HEAD(self) -> None:
        self._send_json(200, {})

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path in _PROBES:
            self._send_json(200, {"ok": True})
            return
        session = self._session()
        if session is None:
            return
        if _route(path) == "models":
            self._send_json(
                200, {"object": "list", "data": [{"id": session.model, "object": "model", "type": "model"}]}
            )
            return
        self._send_json(404, _error_body("chat", 404, "not_found", f"gateway: no route for GET {path}"))

    def do_POST(self) -> None:
        parts = urlsplit(self.path)
        api = _route(parts.path)
        if api is None or api == "models" or parts.path.endswith("/count_tokens"):
            self._send_json(
                404, _error_body("chat", 404, "not_found", f"gateway: no route for POST {parts.path}")
            )
            return
        session = self._session(api)
        if session is None:
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            body = read_body(self, headers)
            status, ctype, chunks = self.server.gateway.forward(
                session, api=api, query=parts.query, headers=headers, body=body
            )
        except BodyError as exc:
            self._send_json(exc.status, _error_body(api, exc.status, "invalid_request_error", str(exc)))
            return
        except BudgetExceeded as exc:
            self._send_json(429, _error_body(api, 429, "budget_exceeded", exc.message))
            return
        except ReplayMiss as exc:
            self._send_json(400, _error_body(api, 400, "replay_miss", exc.message))
            return
        except (ValueError, json.JSONDecodeError) as exc:
            self._send_json(
                400, _error_body(api, 400, "invalid_request_error", f"gateway: body is not JSON: {exc}")
            )
            return
        except httpx.HTTPError as exc:
            session.error = session.error or GatewayError(
                f"upstream model provider failed: {exc}", rollout_id=session.rollout_id
            )
            self._send_json(
                502, _error_body(api, 502, "upstream_error", "gateway: the model provider is unreachable")
            )
            return
        self._send_stream(status, ctype, chunks)

    # -- helpers -----------------------------------------------------------------------------

    def _session(self, api: str = "chat"):
        token = ""
        auth = self.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            token = auth[7:].strip()
        token = token or self.headers.get("x-api-key", "") or self.headers.get("api-key", "")
        session = self.server.gateway.session_for(token) if token else None
        if session is None:
            log.warning("gateway.unauthorized", path=self.path)
            self._send_json(
                401,
                _error_body(api, 401, "authentication_error", "gateway: unknown or expired rollout token"),
            )
        return session

    def _send_json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        with contextlib.suppress(OSError):
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

    def _send_stream(self, status: int, ctype: str, chunks) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            for chunk in chunks:
                if chunk:
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            # The agent went away mid-stream; draining the generator still records the exchange.
            for _ in chunks:
                pass


class GatewayServer:
    """The front end on ``host:port`` (port 0 = any); ``close()`` stops it."""

    def __init__(self, gateway: Gateway, host: str, port: int = 0) -> None:
        self.httpd = _Server((host, port), _Handler)
        self.httpd.gateway = gateway
        self.host, self.port = self.httpd.server_address[:2]
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="gateway-http", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
