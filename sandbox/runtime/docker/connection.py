"""The service's end of the runner protocol (:mod:`sandbox.runtime.runner.protocol`): one
connection per container, over the unix socket the runner opened to the service."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from sandbox.runtime.runner.protocol import (
    CANCEL,
    OUTPUT_CHUNK_BYTES,
    Message,
    ProtocolError,
    check_reply,
    encode_request,
    is_output,
    recv_message,
    send_message,
)

__all__ = ["RunnerConnection"]

#: Largest reply payload from a runner unless the request allows more (only reads carry one).
_MAX_REPLY_BYTES = 1024 * 1024
R = TypeVar("R", bound=Message)


class RunnerConnection:
    """The service's end of the runner protocol (framing shared with the runner itself)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._next_id = 0
        self.closed = False

    def call(
        self,
        request: Message,
        payload: bytes = b"",
        *,
        reply: type[R],
        timeout_s: float,
        max_reply_bytes: int = _MAX_REPLY_BYTES,
        on_output: Callable[[int, bytes], None] | None = None,
        cancelled: threading.Event | None = None,
    ) -> tuple[R, bytes]:
        """Send one request and wait for its reply (of type ``reply``).

        Args:
            max_reply_bytes: largest reply payload accepted (a read's ``max_bytes``); the
                runner shares its uid with the code it runs, so its replies are bounded
                before they are read, never trusted to be.
            on_output: for a streaming execution, called with ``(fd, bytes)`` for every
                output message the runner sends before its reply (each at most 64 KiB).
            cancelled: for a streaming execution, its cancel flag. Checked once the request is
                out: a :meth:`cancel_execution` sent before the request reached the runner was
                ignored there (nothing ran yet), so a flag already set sends one after it.

        Raises:
            RunnerError: the runner refused the request.
            TimeoutError: no reply within ``timeout_s``.
            EOFError: the runner went away (container killed or crashed), or broke the protocol
                (a reply larger than allowed, or malformed: the connection is closed).
        """
        with self._lock:
            self._next_id += 1
            deadline = time.monotonic() + timeout_s
            try:
                with self._send_lock:
                    self._sock.settimeout(timeout_s)
                    send_message(self._sock, encode_request(request, self._next_id), payload)
                    if cancelled is not None and cancelled.is_set():
                        send_message(self._sock, CANCEL)
                while True:
                    self._sock.settimeout(max(deadline - time.monotonic(), 0.001))
                    header, data = recv_message(self._sock, max_size=max_reply_bytes)
                    if not is_output(header):
                        check_reply(header)
                        return reply.decode(header), data
                    if on_output is None or len(data) > OUTPUT_CHUNK_BYTES:
                        raise ProtocolError("unexpected output message")
                    on_output(2 if header.get("fd") == 2 else 1, data)
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise EOFError(str(exc)) from exc
            except ProtocolError as exc:  # oversize or garbled: out of sync
                self.closed = True
                raise EOFError(f"runner broke the protocol: {exc}") from exc
            except TimeoutError:
                self.closed = True  # the stream is out of sync now; never reuse it
                raise

    def cancel_execution(self) -> None:
        """Ask the runner to kill the streaming execution in flight (from another thread than
        the one in :meth:`call`); the call then returns the execution's reply. Never raises."""
        with self._send_lock, contextlib.suppress(OSError):
            send_message(self._sock, CANCEL)

    def is_alive(self) -> bool:
        """False when the runner closed the connection (an idle runner never sends)."""
        if self.closed:
            return False
        try:
            self._sock.settimeout(0)
            return self._sock.recv(1, socket.MSG_PEEK) != b""
        except BlockingIOError:
            return True
        except OSError:
            return False

    def abort(self) -> None:
        """Wake any thread blocked on this connection (it sees EOF) without releasing the fd.

        Closing from another thread would free the fd number while that thread still polls it;
        a socket opened meanwhile (the pool refilling) would get the number and the blocked
        thread would then read someone else's connection.
        """
        self.closed = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        """Release the connection; only when no other thread uses it any more."""
        self.abort()
        with contextlib.suppress(OSError):
            self._sock.close()
