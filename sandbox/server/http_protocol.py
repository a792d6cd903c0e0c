"""The HTTP/1.1 protocol uvicorn runs for :class:`~sandbox.server.fusion_http.HttpApi`:
httptools (C) with a bound on a request's head, or h11 when httptools is not installed.

Why httptools: it takes half the CPU per request of uvicorn's pure-Python h11 (measured with
``ab`` against a handler that answers at once, 2,000 requests, 2-core machine: 1 client
550-670 µs vs 1,080-1,250 µs, 8 clients 465-595 µs vs 730-790 µs; the stdlib server before
them 530-680 µs and 505-875 µs), and the HTTP layer is a fair share of a code run's cost now
that containers are recycled (docs/recycling.md).

Why the subclass: httptools puts no bound on a request's line and headers. One 200 MB header
sent to it went whole into the host's memory (measured: +200 MB RSS), before any check of ours
can run. h11 refuses a head past 16 KiB itself, and the stdlib server before refused a line
past 64 KiB; here a head past :data:`MAX_HEAD_BYTES` is answered 400 and the connection
closed. The count is of the bytes received while a request's head is being parsed, so it may
run one read past the bound (uvloop reads 256 KiB at most), never further.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MAX_HEAD_BYTES", "http_protocol"]

#: Largest request line plus headers (a URL with a token and a few headers need under 1 KiB).
MAX_HEAD_BYTES = 64 * 1024


def http_protocol() -> tuple[Any, dict[str, Any]]:
    """uvicorn's ``http`` setting and the ``uvicorn.Config`` arguments that go with it."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # no httptools: h11, which bounds a head itself
        return "h11", {"h11_max_incomplete_event_size": MAX_HEAD_BYTES}

    class BoundedHead(HttpToolsProtocol):
        """httptools' protocol, refusing a head past :data:`MAX_HEAD_BYTES`."""

        #: Bytes of the current request's head received so far; None once it is parsed.
        _head: int | None = 0

        def data_received(self, data: bytes) -> None:
            if self._head is not None:
                self._head += len(data)
                if self._head > MAX_HEAD_BYTES:
                    self.send_400_response(f"request line and headers over {MAX_HEAD_BYTES} bytes")
                    return
            super().data_received(data)

        def on_message_begin(self) -> None:
            self._head = 0
            super().on_message_begin()

        def on_headers_complete(self) -> None:
            self._head = None
            super().on_headers_complete()

    return BoundedHead, {}
