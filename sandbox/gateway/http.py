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
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import h11
import structlog

from sandbox.gateway.core import Gateway, GatewaySession
from skillopt.errors import BudgetExceeded, ModelError, ModelTimeout, ReplayMiss
from skillopt.httpbody import BodyError, decompress

__all__ = ["GatewayLimits", "GatewayServer"]

log = structlog.get_logger("skillopt.sandbox.gateway")

MiB = 1024 * 1024
_PROBES = ("/", "/api/hello", "/health")
_RECV = 64 * 1024


@dataclass(frozen=True, kw_only=True)
class GatewayLimits:
    """What one client of the gateway's front end may use. Defaults fit the agent CLIs (a long
    Codex or Claude Code conversation is a few MiB per request) with a wide margin."""

    #: Largest request body on the wire (Content-Length or the chunks' total).
    max_body_bytes: int = 16 * MiB
    #: Largest body after Content-Encoding (gzip/deflate) is undone.
    max_decoded_bytes: int = 32 * MiB
    #: Bytes of request bodies being received or decoded at once, over all connections.
    max_inflight_body_bytes: int = 192 * MiB
    #: Largest request line plus headers.
    max_header_bytes: int = 64 * 1024
    #: Most header fields in one request.
    max_headers: int = 128
    #: Open connections at once, in total and per client address.
    max_connections: int = 64
    max_connections_per_client: int = 12
    #: Requests one rollout (token) may make, and one connection may carry.
    max_requests_per_session: int = 5000
    max_requests_per_connection: int = 1000
    #: A keep-alive connection with no request arriving is closed after this long.
    idle_timeout_s: float = 75.0
    #: A request's head, and then its body, must arrive completely within these.
    header_timeout_s: float = 15.0
    body_timeout_s: float = 120.0
    #: A client that accepts no response byte for this long is disconnected.
    send_timeout_s: float = 60.0


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


def _error_body(api: str, kind: str, message: str) -> dict[str, Any]:
    if api == "messages":
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"type": kind, "code": kind, "message": message}}


class _Budget:
    """A shared byte budget (bodies in flight): reserve before reading, release after."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.used = 0
        self._lock = threading.Lock()

    def reserve(self, n: int) -> bool:
        with self._lock:
            if self.used + n > self.total:
                return False
            self.used += n
            return True

    def release(self, n: int) -> None:
        with self._lock:
            self.used -= n


class _Refused(Exception):
    """Answer with ``status`` and close the connection."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


@dataclass
class _Request:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes = b""


class _Connection:
    """One client connection, served on its own thread until it closes or breaks a limit."""

    def __init__(self, server: GatewayServer, sock: socket.socket, peer: str) -> None:
        self.server = server
        self.limits = server.limits
        self.sock = sock
        self.peer = peer
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=self.limits.max_header_bytes)

    # -- reading -----------------------------------------------------------------------------

    def _next_event(self, deadline: float, what: str) -> Any:
        while True:
            event = self.h11.next_event()
            if event is not h11.NEED_DATA:
                return event
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(what)
            self.sock.settimeout(remaining)
            data = self.sock.recv(_RECV)
            self.h11.receive_data(data)  # b"" = EOF; h11 turns it into ConnectionClosed or an error

    def _read_request(self, first: bool) -> _Request | None:
        lim = self.limits
        idle = lim.idle_timeout_s if not first else lim.header_timeout_s
        event = self._next_event(time.monotonic() + idle, "idle")
        if isinstance(event, h11.ConnectionClosed):
            return None
        if not isinstance(event, h11.Request):
            raise _Refused(400, "invalid_request_error", "gateway: malformed request")
        if len(event.headers) > lim.max_headers:
            raise _Refused(
                431, "invalid_request_error", f"gateway: more than {lim.max_headers} header fields"
            )
        headers: dict[str, str] = {}
        for name, value in event.headers:
            key = name.decode("latin-1").lower()
            headers[key] = (
                value.decode("latin-1")
                if key not in headers
                else headers[key] + "," + value.decode("latin-1")
            )
        req = _Request(
            method=event.method.decode("ascii", "replace"),
            target=event.target.decode("latin-1"),
            headers=headers,
        )
        if req.method not in ("POST", "PUT", "PATCH"):
            # Bodies of other methods are read and dropped (h11 needs the framing consumed).
            self._read_body(req, declared=0, keep=False)
            return req
        try:
            declared = (
                int(headers.get("content-length", "0") or 0) if "transfer-encoding" not in headers else 0
            )
        except ValueError:
            raise _Refused(400, "invalid_request_error", "gateway: bad content-length") from None
        if declared > lim.max_body_bytes:
            raise _Refused(
                413, "invalid_request_error", f"gateway: request body larger than {lim.max_body_bytes} bytes"
            )
        self._read_body(req, declared=declared, keep=True)
        return req

    def _read_body(self, req: _Request, *, declared: int, keep: bool) -> None:
        lim = self.limits
        deadline = time.monotonic() + lim.body_timeout_s
        parts: list[bytes] = []
        reserved = 0
        try:
            if declared and not self.server.bodies.reserve(declared):
                raise _Refused(503, "overloaded_error", "gateway: too many large requests in flight; retry")
            reserved = declared
            size = 0
            while True:
                event = self._next_event(deadline, "body")
                if isinstance(event, h11.EndOfMessage):
                    break
                if not isinstance(event, h11.Data):
                    raise _Refused(400, "invalid_request_error", "gateway: malformed request body")
                size += len(event.data)
                if size > lim.max_body_bytes:
                    raise _Refused(
                        413,
                        "invalid_request_error",
                        f"gateway: request body larger than {lim.max_body_bytes} bytes",
                    )
                if not keep:
                    continue
                if size > reserved:  # chunked (no length declared): reserve as it grows
                    grow = max(size - reserved, _RECV)
                    if not self.server.bodies.reserve(grow):
                        raise _Refused(
                            503, "overloaded_error", "gateway: too many large requests in flight; retry"
                        )
                    reserved += grow
                parts.append(event.data)
            if keep:
                raw = b"".join(parts)
                parts.clear()
                encoding = req.headers.get("content-encoding", "identity")
                if encoding.lower() not in ("identity", ""):
                    extra = lim.max_decoded_bytes
                    if not self.server.bodies.reserve(extra):
                        raise _Refused(
                            503, "overloaded_error", "gateway: too many large requests in flight; retry"
                        )
                    reserved += extra
                try:
                    req.body = decompress(raw, encoding, max_bytes=lim.max_decoded_bytes)
                except BodyError as exc:
                    raise _Refused(exc.status, "invalid_request_error", f"gateway: {exc}") from exc
        finally:
            if reserved:
                self.server.bodies.release(reserved)

    # -- writing -----------------------------------------------------------------------------

    def _send(self, event: Any) -> None:
        data = self.h11.send(event)
        if data:
            self.sock.settimeout(self.limits.send_timeout_s)
            self.sock.sendall(data)

    def send_json(
        self, status: int, payload: Any, *, close: bool = False, extra: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        headers = [("content-type", "application/json"), ("content-length", str(len(data)))]
        headers += list((extra or {}).items())
        if close:
            headers.append(("connection", "close"))
        self._send(h11.Response(status_code=status, headers=headers))
        if self.h11.our_state is h11.SEND_BODY and self._method != "HEAD":
            self._send(h11.Data(data=data))
        self._send(h11.EndOfMessage())

    def send_stream(self, status: int, ctype: str, chunks: Iterator[bytes]) -> None:
        headers = [("content-type", ctype), ("cache-control", "no-cache")]
        if status >= 400:
            # The gateway already retried: tell SDK-based clients not to retry on their own.
            headers.append(("x-should-retry", "false"))
        try:
            self._send(h11.Response(status_code=status, headers=headers))
            for chunk in chunks:
                if chunk:
                    self._send(h11.Data(data=chunk))
            self._send(h11.EndOfMessage())
        except (OSError, h11.LocalProtocolError):
            # The agent went away mid-stream; draining the generator still records the exchange.
            for _ in chunks:
                pass
            raise

    # -- the loop ----------------------------------------------------------------------------

    _method = "GET"

    def serve(self) -> None:
        served = 0
        try:
            while served < self.limits.max_requests_per_connection:
                try:
                    req = self._read_request(first=served == 0)
                except _Refused as exc:
                    self._refuse(exc)
                    return
                if req is None:
                    return
                self._method = req.method
                served += 1
                self.server.handle(self, req)
                if self.h11.our_state is h11.MUST_CLOSE or self.h11.their_state is h11.MUST_CLOSE:
                    return
                try:
                    self.h11.start_next_cycle()
                except h11.LocalProtocolError:
                    return
        except h11.RemoteProtocolError as exc:
            self._refuse(
                _Refused(exc.error_status_hint, "invalid_request_error", f"gateway: bad HTTP: {exc}")
            )
        except (TimeoutError, OSError, h11.LocalProtocolError):
            pass  # idle, trickling or vanished client: just close
        finally:
            with contextlib.suppress(OSError):
                self.sock.close()

    def _refuse(self, exc: _Refused) -> None:
        log.warning("gateway.refused", peer=self.peer, status=exc.status, reason=exc.message[:200])
        if self.h11.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            with contextlib.suppress(OSError, h11.LocalProtocolError):
                self.send_json(exc.status, _error_body("chat", exc.kind, exc.message), close=True)
        self._linger()

    def _linger(self) -> None:
        """Half-close and read a little of what the client still sends before closing: closing
        with unread input makes the kernel send a reset, which can destroy the error answer
        before the client reads it. Bounded: at most 1 MiB or 1 s."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + 1.0
            drained = 0
            while drained < MiB:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self.sock.settimeout(remaining)
                data = self.sock.recv(_RECV)
                if not data:
                    break
                drained += len(data)


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
        self.bodies = _Budget(self.limits.max_inflight_body_bytes)
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
        body = json.dumps(_error_body("chat", "overloaded_error", "gateway: too many connections")).encode()
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
            _Connection(self, sock, peer).serve()
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

    def handle(self, conn: _Connection, req: _Request) -> None:
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
            conn.send_json(404, _error_body("chat", "not_found", f"gateway: no route for GET {path[:200]}"))
            return
        api = _route(path)
        if req.method != "POST" or api is None or api == "models" or path.endswith("/count_tokens"):
            conn.send_json(
                404, _error_body("chat", "not_found", f"gateway: no route for {req.method} {path[:200]}")
            )
            return
        session = self._session(conn, req, api)
        if session is None:
            return
        if not self._count(session):
            conn.send_json(
                429,
                _error_body(
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
                429, _error_body(api, "budget_exceeded", exc.message), extra={"x-should-retry": "false"}
            )
            return
        except ReplayMiss as exc:
            conn.send_json(
                400, _error_body(api, "replay_miss", exc.message), extra={"x-should-retry": "false"}
            )
            return
        except ModelError as exc:
            status = exc.status or (504 if isinstance(exc, ModelTimeout) else 502)
            conn.send_json(
                status,
                _error_body(api, "upstream_error", f"gateway: {exc.message}"),
                extra={"x-should-retry": "false"},
            )
            return
        except (ValueError, RecursionError) as exc:
            conn.send_json(
                400, _error_body(api, "invalid_request_error", f"gateway: body is not JSON: {str(exc)[:200]}")
            )
            return
        conn.send_stream(status, ctype, chunks)

    def _session(self, conn: _Connection, req: _Request, api: str) -> GatewaySession | None:
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
                401, _error_body(api, "authentication_error", "gateway: unknown or expired rollout token")
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
