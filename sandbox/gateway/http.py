"""The gateway's HTTP front end, reachable only from exec-agent containers.

Speaks the three model APIs by path suffix (``…/responses``, ``…/chat/completions``,
``…/messages``) and authenticates each request by its rollout token (``Authorization:
Bearer``, ``x-api-key`` or ``api-key``). Responses, including SSE streams, are relayed as they
arrive (chunked).

Its clients are untrusted (code in rollout containers), so HTTP is parsed by h11 (a strict,
well-kept HTTP/1.1 state machine: no request smuggling through our own framing code) and every
resource a client could tie up is capped (:class:`GatewayLimits`): header size and count, body
size on the wire and decompressed, bytes of bodies in flight across all connections,
connections in total and per client address, requests per rollout and per connection, and time:
an idle keep-alive connection, a request head or body that trickles in, and a reader that
stops reading are all cut off. One rollout's container hitting a limit gets an HTTP error and
never slows down another's.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from urllib.parse import urlsplit

import structlog

from sandbox.gateway.connection import BodyBudget, Connection, GatewayLimits, Request, error_body
from sandbox.gateway.core import Gateway
from sandbox.gateway.session import GatewaySession
from skillopt.errors import BudgetExceeded, ModelError, ModelTimeout, ReplayMiss

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


class GatewayServer:
    """The front end on ``host:port`` (port 0 = any); ``close()`` stops it.

    Args:
        gateway: sessions, key injection and recording.
        host, port: where to listen (the exec network's gateway address).
        limits: what one client may use.
    """

    def __init__(
        self, gateway: Gateway, host: str, port: int = 0, *, limits: GatewayLimits | None = None
    ) -> None:
        self.gateway = gateway
        self.limits = limits or GatewayLimits()
        self.bodies = BodyBudget(self.limits.max_inflight_body_bytes)
        self._listener = socket.create_server((host, port), backlog=128, reuse_port=False)
        self.host, self.port = self._listener.getsockname()[:2]
        self._lock = threading.Lock()
        self._open: dict[socket.socket, str] = {}
        self._per_client: dict[str, int] = {}
        self._session_requests: dict[str, int] = {}
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept_loop, name="gateway-http", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def stats(self) -> dict[str, int]:
        """Open connections and body bytes in flight (for tests and benchmarks)."""
        with self._lock:
            return {"connections": len(self._open), "inflight_body_bytes": self.bodies.used}

    # -- connections -------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                sock, addr = self._listener.accept()
            except OSError:
                if self._closed.is_set():
                    return
                continue
            # A response is sent as headers, then body: with Nagle's algorithm the body waits
            # for the client's delayed ACK (40 ms per model call of an exec agent).
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            peer = str(addr[0])
            with self._lock:
                too_many = len(self._open) >= self.limits.max_connections
                too_many_here = self._per_client.get(peer, 0) >= self.limits.max_connections_per_client
                if not (too_many or too_many_here):
                    self._open[sock] = peer
                    self._per_client[peer] = self._per_client.get(peer, 0) + 1
            if too_many or too_many_here:
                log.warning("gateway.connection_refused", peer=peer, total=too_many, per_client=too_many_here)
                self._reject(sock)
                continue
            threading.Thread(target=self._serve, args=(sock, peer), name="gateway-conn", daemon=True).start()

    @staticmethod
    def _reject(sock: socket.socket) -> None:
        body = json.dumps(error_body("chat", "overloaded_error", "gateway: too many connections")).encode()
        with contextlib.suppress(OSError):
            sock.settimeout(1.0)
            sock.sendall(
                b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
                + f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
                + body
            )
        with contextlib.suppress(OSError):
            sock.close()

    def _serve(self, sock: socket.socket, peer: str) -> None:
        try:
            Connection(self, sock, peer).serve()
        except Exception:  # a bug must never kill the host process
            log.exception("gateway.connection_crashed", peer=peer)
        finally:
            with self._lock:
                self._open.pop(sock, None)
                left = self._per_client.get(peer, 1) - 1
                if left > 0:
                    self._per_client[peer] = left
                else:
                    self._per_client.pop(peer, None)

    def _count(self, session: GatewaySession) -> bool:
        with self._lock:
            n = self._session_requests.get(session.token, 0) + 1
            self._session_requests[session.token] = n
            # Forget closed sessions now and then (tokens are never reused).
            if len(self._session_requests) > 4096:
                live = {t for t in self._session_requests if self.gateway.session_for(t) is not None}
                self._session_requests = {t: c for t, c in self._session_requests.items() if t in live}
        return n <= self.limits.max_requests_per_session

    # -- requests ----------------------------------------------------------------------------

    def handle(self, conn: Connection, req: Request) -> None:
        """Answer one request (routes as the model APIs lay them out)."""
        path = urlsplit(req.target).path
        if req.method == "HEAD":
            conn.send_json(200, {})
            return
        if req.method == "GET":
            if path in _PROBES:
                conn.send_json(200, {"ok": True})
                return
            session = self._session(conn, req, "chat")
            if session is None:
                return
            if _route(path) == "models":
                conn.send_json(
                    200,
                    {"object": "list", "data": [{"id": session.model, "object": "model", "type": "model"}]},
                )
                return
            conn.send_json(404, error_body("chat", "not_found", f"gateway: no route for GET {path[:200]}"))
            return
        api = _route(path)
        if req.method != "POST" or api is None or api == "models" or path.endswith("/count_tokens"):
            conn.send_json(
                404, error_body("chat", "not_found", f"gateway: no route for {req.method} {path[:200]}")
            )
            return
        session = self._session(conn, req, api)
        if session is None:
            return
        if not self._count(session):
            conn.send_json(
                429,
                error_body(
                    api,
                    "rate_limit_error",
                    f"gateway: more than {self.limits.max_requests_per_session} requests in this rollout",
                ),
                extra={"x-should-retry": "false"},
            )
            return
        try:
            status, ctype, chunks = self.gateway.forward(
                session, api=api, query=urlsplit(req.target).query, headers=req.headers, body=req.body
            )
        except BudgetExceeded as exc:
            conn.send_json(
                429, error_body(api, "budget_exceeded", exc.message), extra={"x-should-retry": "false"}
            )
            return
        except ReplayMiss as exc:
            conn.send_json(
                400, error_body(api, "replay_miss", exc.message), extra={"x-should-retry": "false"}
            )
            return
        except ModelError as exc:
            status = exc.status or (504 if isinstance(exc, ModelTimeout) else 502)
            conn.send_json(
                status,
                error_body(api, "upstream_error", f"gateway: {exc.message}"),
                extra={"x-should-retry": "false"},
            )
            return
        except (ValueError, RecursionError) as exc:
            conn.send_json(
                400, error_body(api, "invalid_request_error", f"gateway: body is not JSON: {str(exc)[:200]}")
            )
            return
        conn.send_stream(status, ctype, chunks)

    def _session(self, conn: Connection, req: Request, api: str) -> GatewaySession | None:
        h = req.headers
        token = ""
        auth = h.get("authorization", "")
        if auth.lower().startswith("bearer "):
            token = auth[7:].strip()
        token = token or h.get("x-api-key", "") or h.get("api-key", "")
        session = self.gateway.session_for(token) if token else None
        if session is None:
            log.warning("gateway.unauthorized", path=req.target[:200], peer=conn.peer)
            conn.send_json(
                401, error_body(api, "authentication_error", "gateway: unknown or expired rollout token")
            )
        return session

    def close(self) -> None:
        """Stop accepting and cut every open connection."""
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            socks = list(self._open)
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=5)
