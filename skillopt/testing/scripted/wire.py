"""HTTP/1.1 plumbing for the scripted model server: request bodies in, JSON and SSE out."""

from __future__ import annotations

import gzip
import itertools
import json
import zlib
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler
from typing import Any

__all__ = ["BodyError", "read_body", "send_body", "send_sse"]

_request_ids = itertools.count(1)


class BodyError(Exception):
    """The request body cannot be read; ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def read_body(h: BaseHTTPRequestHandler, headers: Mapping[str, str]) -> bytes:
    """The request body, de-chunked and decompressed (gzip/deflate).

    Raises:
        BodyError: bad framing (400), undecodable body (400), unknown encoding (415).
    """
    try:
        if headers.get("transfer-encoding", "").lower() == "chunked":
            parts: list[bytes] = []
            while True:
                size = int(h.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    h.rfile.readline()
                    break
                parts.append(h.rfile.read(size))
                h.rfile.readline()
            data = b"".join(parts)
        else:
            data = h.rfile.read(int(headers.get("content-length") or 0))
    except ValueError as exc:
        raise BodyError(400, f"scripted server: bad request framing: {exc}") from exc
    encoding = headers.get("content-encoding", "identity").lower()
    try:
        if encoding == "gzip":
            return gzip.decompress(data)
        if encoding == "deflate":
            return zlib.decompress(data)
    except (OSError, zlib.error) as exc:
        raise BodyError(400, f"scripted server: cannot decode {encoding} body: {exc}") from exc
    if encoding not in ("identity", ""):
        raise BodyError(415, f"scripted server: unsupported request content-encoding {encoding!r}")
    return data


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
