"""Reading HTTP/1.1 request bodies with hard caps (de-chunked, decompressed).

Two users: the model gateway's front end (``sandbox/gateway/http.py``, which parses HTTP with
h11 and uses :func:`decompress` here) and the scripted model server (a stdlib
``http.server`` test double, which uses :func:`read_body`). Every size read from the peer —
``Content-Length``, a chunk size, the decompressed size — is checked against a cap *before*
memory is spent on it, so a client cannot make the reader allocate more than the caps.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler

from skillopt.units import MiB

__all__ = ["DEFAULT_MAX_BODY_BYTES", "DEFAULT_MAX_DECODED_BYTES", "BodyError", "decompress", "read_body"]

DEFAULT_MAX_BODY_BYTES = 32 * MiB
DEFAULT_MAX_DECODED_BYTES = 64 * MiB
_MAX_CHUNK_LINE = 1024
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class BodyError(Exception):
    """The request body cannot be read; ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def decompress(data: bytes, encoding: str, *, max_bytes: int = DEFAULT_MAX_DECODED_BYTES) -> bytes:
    """``data`` decoded per its ``Content-Encoding`` (identity, gzip, deflate), never producing
    more than ``max_bytes`` (a 1 MB gzip bomb that inflates to 1 GB is cut off at the cap).

    Raises:
        BodyError: 413 over the cap, 400 undecodable, 415 unknown encoding.
    """
    encoding = (encoding or "identity").strip().lower()
    if encoding in ("identity", ""):
        if len(data) > max_bytes:
            raise BodyError(413, f"request body is larger than {max_bytes} bytes")
        return data
    wbits = _WBITS.get(encoding)
    if wbits is None:
        raise BodyError(415, f"unsupported request content-encoding {encoding[:40]!r}")
    try:
        d = zlib.decompressobj(wbits)
        out = d.decompress(data, max_bytes + 1)
        if len(out) > max_bytes or d.unconsumed_tail:
            raise BodyError(413, f"decompressed request body is larger than {max_bytes} bytes")
        out += d.flush()
    except zlib.error as exc:
        if encoding == "deflate" and wbits > 0:
            # Some clients send raw deflate without the zlib header.
            return _raw_deflate(data, max_bytes)
        raise BodyError(400, f"cannot decode {encoding} body: {exc}") from exc
    if len(out) > max_bytes:
        raise BodyError(413, f"decompressed request body is larger than {max_bytes} bytes")
    if not d.eof:
        raise BodyError(400, f"cannot decode {encoding} body: truncated stream")
    return out


def _raw_deflate(data: bytes, max_bytes: int) -> bytes:
    try:
        d = zlib.decompressobj(-zlib.MAX_WBITS)
        out = d.decompress(data, max_bytes + 1)
    except zlib.error as exc:
        raise BodyError(400, f"cannot decode deflate body: {exc}") from exc
    if len(out) > max_bytes or d.unconsumed_tail:
        raise BodyError(413, f"decompressed request body is larger than {max_bytes} bytes")
    return out


def read_body(
    h: BaseHTTPRequestHandler,
    headers: Mapping[str, str],
    *,
    max_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_decoded_bytes: int = DEFAULT_MAX_DECODED_BYTES,
) -> bytes:
    """The request body of a stdlib handler, de-chunked and decompressed (gzip/deflate), at
    most ``max_bytes`` on the wire and ``max_decoded_bytes`` decoded.

    Raises:
        BodyError: bad framing (400), over a cap (413), undecodable body (400), unknown
            encoding (415).
    """
    try:
        if headers.get("transfer-encoding", "").lower() == "chunked":
            parts: list[bytes] = []
            total = 0
            while True:
                line = h.rfile.readline(_MAX_CHUNK_LINE)
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size < 0:
                    raise ValueError(f"negative chunk size {size}")
                if size == 0:
                    h.rfile.readline(_MAX_CHUNK_LINE)
                    break
                total += size
                if total > max_bytes:
                    raise BodyError(413, f"request body is larger than {max_bytes} bytes")
                parts.append(h.rfile.read(size))
                h.rfile.readline(_MAX_CHUNK_LINE)
            data = b"".join(parts)
        else:
            length = int(headers.get("content-length") or 0)
            if length < 0:
                raise ValueError(f"negative content-length {length}")
            if length > max_bytes:
                raise BodyError(413, f"request body of {length} bytes is larger than {max_bytes} bytes")
            data = h.rfile.read(length)
    except ValueError as exc:
        raise BodyError(400, f"bad request framing: {str(exc)[:200]}") from exc
    return decompress(data, headers.get("content-encoding", "identity"), max_bytes=max_decoded_bytes)
