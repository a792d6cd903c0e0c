"""Reading HTTP/1.1 request bodies in stdlib ``http.server`` handlers (de-chunked, decompressed).

Shared by the model gateway and the scripted model server.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler

__all__ = ["BodyError", "read_body"]


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
        raise BodyError(400, f"bad request framing: {exc}") from exc
    encoding = headers.get("content-encoding", "identity").lower()
    try:
        if encoding == "gzip":
            return gzip.decompress(data)
        if encoding == "deflate":
            return zlib.decompress(data)
    except (OSError, zlib.error) as exc:
        raise BodyError(400, f"cannot decode {encoding} body: {exc}") from exc
    if encoding not in ("identity", ""):
        raise BodyError(415, f"unsupported request content-encoding {encoding!r}")
    return data
