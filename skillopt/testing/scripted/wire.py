"""HTTP/1.1 plumbing for the scripted model server: request bodies in, JSON and SSE out."""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler
from typing import Any

__all__ = ["BodyError", "read_body", "send_body", "send_sse"]

from skillopt.httpbody import BodyError, read_body

_request_ids = itertools.count(1)


def _start(h: BaseHTTPRequestHandler, status: int, headers: Mapping[str, str]) -> None:
    h.send_response(status)
    rid = f"req_scripted_{next(_request_ids)}"
    h.send_header("x-request-id", rid)  # OpenAI SDK
    h.send_header("request-id", rid)  # Anthropic SDK
    for k, v in headers.items():
        h.send_header(k, v)
    h.end_headers()


def send_body(
    h: BaseHTTPRequestHandler, status: int, payload: Any, headers: Mapping[str, str] | None = None
) -> None:
    """Send a JSON body (a str payload is sent as text). A vanished client is ignored."""
    if isinstance(payload, str):
        data, ctype = payload.encode(), "text/plain; charset=utf-8"
    else:
        data, ctype = json.dumps(payload, ensure_ascii=False).encode(), "application/json"
    try:
        _start(h, status, {"Content-Type": ctype, "Content-Length": str(len(data)), **(headers or {})})
        if h.command != "HEAD":
            h.wfile.write(data)
        h.wfile.flush()
    except OSError:  # the client went away (timeout tests): nothing left to do
        h.close_connection = True


def send_sse(h: BaseHTTPRequestHandler, frames: list[bytes]) -> None:
    """Send SSE frames as a chunked ``text/event-stream``, one flushed chunk per frame."""
    try:
        _start(
            h,
            200,
            {
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "Transfer-Encoding": "chunked",
            },
        )
        for frame in frames:
            # Flushing each frame makes clients see a real stream, not one buffered blob.
            h.wfile.write(f"{len(frame):x}\r\n".encode() + frame + b"\r\n")
            h.wfile.flush()
        h.wfile.write(b"0\r\n\r\n")
        h.wfile.flush()
    except OSError:
        h.close_connection = True
