"""Executions: one program at a time in a pre-forked child, its output collected or streamed,
its timeout and output cap enforced, and what it left behind swept afterwards."""

from __future__ import annotations

import marshal
import os
import select
import signal
import socket
import sys
import time

from .child import WarmChild, read_spawn_error
from .files import write_all
from .imports import import_into_parent, mentions
from .protocol import (
    OUTPUT_CHUNK_BYTES,
    WORKSPACE,
    ExecReply,
    ExecRequest,
    Op,
    Sweep,
    output_header,
    recv_message,
    send_message,
)
from .sweep import drain_wakeups, kill_everything_else, reap_children

#: Output beyond which a collected (not streamed) execution is killed; only its tails are kept.
KILL_AFTER_OUTPUT_BYTES = 64 << 20


class PreforkedChild:
    """Runs one execution at a time in a pre-forked child and keeps the next one ready.

    ``on_demand``: modules imported into this parent (before forking) the first time a program
    mentions them."""

    def __init__(self, ctl_fd: int, on_demand: list[str] | None = None) -> None:
        self.ctl_fd = ctl_fd
        self.warm: WarmChild | None = None
        self.on_demand = list(on_demand or [])

    def prefork(self) -> None:
        if self.warm is None:
            self.warm = WarmChild(self.ctl_fd)

    def discard(self) -> None:
        if self.warm is not None:
            self.warm.discard()
            self.warm = None

    def run(self, request: ExecRequest, payload: bytes, sock: socket.socket | None = None) -> ExecReply:
        """Run one execution. With ``request.stream`` the output goes to ``sock`` as it comes
        (at most ``output_limit_bytes`` in all, beyond which the program is killed) and a cancel
        arriving on ``sock`` kills it. ``request.sweep``: :data:`Sweep.ALWAYS` (every process
        but the runner is killed afterwards) or :data:`Sweep.ON_KILL` (background processes
        outlive the command unless it was killed, when everything goes)."""
        self._import_on_demand(request)
        self.prefork()
        warm, self.warm = self.warm, None
        assert warm is not None
        execution = _Execution(request, warm, payload, sock if request.stream else None)
        execution.pump()
        return execution.finish()

    def _import_on_demand(self, request: ExecRequest) -> None:
        pending = [m for m in self.on_demand if m not in sys.modules]
        if pending and request.python and not request.argv:
            wanted = mentions(os.path.join(request.cwd or WORKSPACE, request.python), pending)
            if wanted:
                self.discard()  # the warm child was forked without them
                import_into_parent(wanted)


class _Tail:
    """Keeps the last ``cap`` bytes of a stream and counts everything seen."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.buf = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        self.buf += data
        if len(self.buf) > self.cap:
            del self.buf[: len(self.buf) - self.cap]

    def text(self) -> str:
        return self.buf.decode("utf-8", "replace")


class _Execution:
    """One execution in flight: the child's pipes, what they carried, and how it ended.

    ``sock``: the service's connection when the output is streamed (and a cancel may arrive on
    it), else ``None``."""

    def __init__(self, request: ExecRequest, warm: WarmChild, payload: bytes, sock: socket.socket | None):
        self.request, self.warm, self.sock = request, warm, sock
        self.cap = request.output_limit_bytes
        self.kill_after = self.cap if sock is not None else KILL_AFTER_OUTPUT_BYTES
        self.started_ns = time.time_ns()
        self.t0 = time.monotonic()
        # The job pipe stays inside the runner: marshal is ~5x cheaper than JSON both ways, on
        # the path from request to the program's first instruction.
        write_all(warm.job_w, marshal.dumps(request.values()))
        os.close(warm.job_w)
        self.stdin = memoryview(payload if request.stdin_size else b"")
        self.writers = [warm.in_w]
        if not self.stdin:
            os.close(warm.in_w)
            self.writers = []
        self.tails = {warm.out_r: _Tail(self.cap), warm.err_r: _Tail(self.cap)}
        self.open_fds = {warm.out_r, warm.err_r}
        self.watch = [sock.fileno()] if sock is not None else []
        self.status: int | None = None
        self.timed_out = self.output_exceeded = self.cancelled = False
        self.streamed = 0

    def pump(self) -> None:
        """Move stdin and output until the child exited and its pipes are closed, or the
        execution timed out, was cancelled or flooded its output cap."""
        deadline = self.t0 + self.request.timeout_s
        while self.status is None or self.open_fds:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.timed_out = True
                return
            rlist = [*self.open_fds, *([self.warm.pidfd] if self.status is None else []), *self.watch]
            # Ready fds come back in ``rlist`` order: the pipes are read before the exit closes them.
            ready_r, ready_w, _ = select.select(rlist, self.writers, [], remaining)
            if ready_w:
                self._feed_stdin()
            for fd in ready_r:
                if fd in self.watch:
                    self.cancelled = _cancel_requested(self.sock)
                    if self.cancelled:
                        return
                elif fd == self.warm.pidfd:
                    self._child_exited()
                else:
                    self._read(fd)
            if self.tails[self.warm.out_r].total + self.tails[self.warm.err_r].total > self.kill_after:
                self.output_exceeded = True
                return

    def finish(self) -> ExecReply:
        """Kill what must die, sweep, release the child's pipes; the reply."""
        status = self.status
        killed = status is None
        if status is None:
            status = self._kill_child()
        if killed or self.request.sweep == Sweep.ALWAYS.value:
            leftovers = kill_everything_else()
        else:
            leftovers = 0
            reap_children()  # background processes stay; exited orphans are reaped
        spawn = read_spawn_error(self.warm.spawn_r)
        if self.warm.owns_fd:
            os.close(self.warm.pidfd)
        for fd in self.open_fds:
            _drain_nonblocking(fd, self.tails[fd])
            os.close(fd)
        for fd in self.writers:
            os.close(fd)
        duration = time.monotonic() - self.t0
        exit_code = os.waitstatus_to_exitcode(status)
        sig = -exit_code if exit_code < 0 else None
        out, err = self.tails[self.warm.out_r], self.tails[self.warm.err_r]
        return ExecReply(
            exit_code=None if sig is not None else exit_code,
            signal=sig,
            timed_out=self.timed_out,
            cancelled=self.cancelled,
            output_limit_exceeded=self.output_exceeded,
            stdout_bytes=out.total,
            stderr_bytes=err.total,
            duration_s=duration,
            started_at_ns=self.started_ns,
            leftover_processes=leftovers,
            spawn_error=spawn,
            stdout_tail="" if self.sock is not None else out.text(),
            stderr_tail="" if self.sock is not None else err.text(),
        )

    def _feed_stdin(self) -> None:
        fd = self.writers[0]
        try:
            n = os.write(fd, self.stdin[:OUTPUT_CHUNK_BYTES])
            self.stdin = self.stdin[n:]
        except BrokenPipeError:
            self.stdin = memoryview(b"")
        if not self.stdin:
            os.close(fd)
            self.writers = []

    def _read(self, fd: int) -> None:
        data = os.read(fd, OUTPUT_CHUNK_BYTES)
        if data:
            self.tails[fd].feed(data)
            if self.sock is not None:
                self._send(fd, data)
        else:
            os.close(fd)
            self.open_fds.discard(fd)

    def _child_exited(self) -> None:
        """The pid fd is readable: the direct child is gone (or, without a pidfd, some child).
        Whatever it left behind must not keep our pipes open (daemonized grandchildren): read
        what is buffered and close them; the sweep comes later."""
        if self.warm.owns_fd:
            _, self.status = os.waitpid(self.warm.pid, 0)
        else:
            drain_wakeups(self.warm.pidfd)
            done, status = os.waitpid(self.warm.pid, os.WNOHANG)
            if done == 0:
                return  # another child (an orphan) exited
            self.status = status
        for fd in list(self.open_fds):
            tail = self.tails[fd]
            before = tail.total
            _drain_nonblocking(fd, tail)
            added = tail.total - before
            if self.sock is not None and added > 0:
                self._send(fd, bytes(tail.buf[-added:]) if added <= len(tail.buf) else bytes(tail.buf))
            os.close(fd)
            self.open_fds.discard(fd)

    def _kill_child(self) -> int:
        """Timed out, flooded or cancelled: kill the direct child first so its status is ours
        to read (the sweep then takes whatever else it started); its wait status."""
        pid = self.warm.pid
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return os.waitpid(pid, 0)[1]

    def _send(self, fd: int, data: bytes) -> None:
        """Stream what fits of ``data`` under the output cap, in messages of at most 64 KiB."""
        sock = self.sock
        if sock is None:  # not a streaming execution: its output is kept as a tail instead
            return
        part = data[: max(self.cap - self.streamed, 0)]
        header = output_header(2 if fd == self.warm.err_r else 1)
        for i in range(0, len(part), OUTPUT_CHUNK_BYTES):
            send_message(sock, header, part[i : i + OUTPUT_CHUNK_BYTES])
        self.streamed += len(part)


def _cancel_requested(sock: socket.socket | None) -> bool:
    """Whether the service asked to cancel the running execution (or went away)."""
    if sock is None:
        return False
    try:
        header, _ = recv_message(sock, max_size=0)
    except (EOFError, OSError, ValueError):
        return True
    return header.get("op") == Op.CANCEL


def _drain_nonblocking(fd: int, tail: _Tail) -> None:
    os.set_blocking(fd, False)
    try:
        while True:
            data = os.read(fd, OUTPUT_CHUNK_BYTES)
            if not data:
                return
            tail.feed(data)
    except BlockingIOError:
        return
