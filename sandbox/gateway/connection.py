"""One client connection of the gateway's HTTP front end, parsed by h11 and held to
:class:`GatewayLimits` (sizes, counts, time): the framing side of ``http.py``, which routes and
answers the requests."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import h11
import structlog

from skillopt.httpbody import BodyError, decompress
from skillopt.units import MiB

__all__ = ["BodyBudget", "Connection", "GatewayLimits", "Handler", "Refused", "Request", "error_body"]

log = structlog.get_logger("skillopt.sandbox.gateway")

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


def error_body(api: str, kind: str, message: str) -> dict[str, Any]:
    """The error body of ``api``'s wire format (Anthropic's for ``messages``, else OpenAI's)."""
    if api == "messages":
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"type": kind, "code": kind, "message": message}}


class BodyBudget:
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


class Refused(Exception):
    """Answer with ``status`` and close the connection."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


@dataclass
class Request:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes = b""


class Handler(Protocol):
    """What a connection needs of its server: the limits, the shared body budget, and the
    handler that answers each request it reads."""

    limits: GatewayLimits
    bodies: BodyBudget

    def handle(self, conn: Connection, req: Request) -> None: ...


class Connection:
    """One client connection, served on its own thread until it closes or breaks a limit."""

    def __init__(self, server: Handler, sock: socket.socket, peer: str) -> None:
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

    def _read_request(self, first: bool) -> Request | None:
        lim = self.limits
        idle = lim.idle_timeout_s if not first else lim.header_timeout_s
        event = self._next_event(time.monotonic() + idle, "idle")
        if isinstance(event, h11.ConnectionClosed):
            return None
        if not isinstance(event, h11.Request):
            raise Refused(400, "invalid_request_error", "gateway: malformed request")
        if len(event.headers) > lim.max_headers:
            raise Refused(431, "invalid_request_error", f"gateway: more than {lim.max_headers} header fields")
        headers: dict[str, str] = {}
        for name, value in event.headers:
            key = name.decode("latin-1").lower()
            headers[key] = (
                value.decode("latin-1")
                if key not in headers
                else headers[key] + "," + value.decode("latin-1")
            )
        req = Request(
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
            raise Refused(400, "invalid_request_error", "gateway: bad content-length") from None
        if declared > lim.max_body_bytes:
            raise Refused(
                413, "invalid_request_error", f"gateway: request body larger than {lim.max_body_bytes} bytes"
            )
        self._read_body(req, declared=declared, keep=True)
        return req

    def _read_body(self, req: Request, *, declared: int, keep: bool) -> None:
        lim = self.limits
        deadline = time.monotonic() + lim.body_timeout_s
        parts: list[bytes] = []
        reserved = 0
        try:
            if declared and not self.server.bodies.reserve(declared):
                raise Refused(503, "overloaded_error", "gateway: too many large requests in flight; retry")
            reserved = declared
            size = 0
            while True:
                event = self._next_event(deadline, "body")
                if isinstance(event, h11.EndOfMessage):
                    break
                if not isinstance(event, h11.Data):
                    raise Refused(400, "invalid_request_error", "gateway: malformed request body")
                size += len(event.data)
                if size > lim.max_body_bytes:
                    raise Refused(
                        413,
                        "invalid_request_error",
                        f"gateway: request body larger than {lim.max_body_bytes} bytes",
                    )
                if not keep:
                    continue
                if size > reserved:  # chunked (no length declared): reserve as it grows
                    grow = max(size - reserved, _RECV)
                    if not self.server.bodies.reserve(grow):
                        raise Refused(
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
                        raise Refused(
                            503, "overloaded_error", "gateway: too many large requests in flight; retry"
                        )
                    reserved += extra
                try:
                    req.body = decompress(raw, encoding, max_bytes=lim.max_decoded_bytes)
                except BodyError as exc:
                    raise Refused(exc.status, "invalid_request_error", f"gateway: {exc}") from exc
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
                except Refused as exc:
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
            self._refuse(Refused(exc.error_status_hint, "invalid_request_error", f"gateway: bad HTTP: {exc}"))
        except (TimeoutError, OSError, h11.LocalProtocolError):
            pass  # idle, trickling or vanished client: just close
        finally:
            with contextlib.suppress(OSError):
                self.sock.close()

    def _refuse(self, exc: Refused) -> None:
        log.warning("gateway.refused", peer=self.peer, status=exc.status, reason=exc.message[:200])
        if self.h11.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            with contextlib.suppress(OSError, h11.LocalProtocolError):
                self.send_json(exc.status, error_body("chat", exc.kind, exc.message), close=True)
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
