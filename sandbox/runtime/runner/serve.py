"""The runner's start-up and its serve loop: connect to the service, say hello, then answer its
requests one at a time over that one connection until it closes."""

from __future__ import annotations

import os
import select
import signal
import socket
import sys
import time

from . import files
from .child import set_dumpable
from .imports import freeze_heap, preimport
from .process import PreforkedChild
from .protocol import (
    PROTOCOL_VERSION,
    ErrorCode,
    ExecRequest,
    Hello,
    ListRequest,
    Message,
    OomReply,
    OomRequest,
    Op,
    PingReply,
    PingRequest,
    ReadReply,
    ReadRequest,
    ResetRequest,
    RunnerError,
    WriteRequest,
    decode_request,
    encode_reply,
    recv_message,
    send_message,
)
from .reset import Baseline, reset
from .sweep import kill_everything_else


def start(connect: str, *, preimports: list[str], on_demand: list[str]) -> int:
    """Import ``preimports``, connect to the service's socket at ``connect``, say hello and
    serve until the service closes the connection; then kill every process left."""
    t0 = time.monotonic()
    imported = preimport(preimports)
    preimport_s = time.monotonic() - t0
    freeze_heap()
    dumpable_off = set_dumpable(False)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    # As the container's PID 1 the kernel only delivers signals we handle; ignoring SIGINT
    # (Python handles it by default) leaves the executed code no signal to kill us with.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(connect)
    hello = Hello(
        type="hello",
        protocol=PROTOCOL_VERSION,
        pid=os.getpid(),
        uid=os.getuid(),
        python=sys.version.split()[0],
        preimported=imported,
        preimport_s=preimport_s,
        non_dumpable=dumpable_off,
    )
    # The container as it is before any program ran: what a reset brings it back to.
    baseline = Baseline()
    send_message(sock, hello.encode())
    try:
        serve(sock, on_demand, baseline)
    finally:
        kill_everything_else()
    return 0


#: After an execution the next child is forked once the connection has been quiet this long,
#: not at once: the requests that follow an execution straight away (the service reading the
#: files it wrote, for grading) then do not wait behind the fork (under gVisor's ptrace platform
#: 20-30 ms of the runner's time, ~2 ms under runc), and a single-use container ended right
#: after its last execution never pays for a child it would not use. An execution arriving
#: before the fork forks on demand, as the first one would.
PREFORK_WHEN_IDLE_S = 0.05


def serve(sock: socket.socket, on_demand: list[str] | None = None, baseline: Baseline | None = None) -> None:
    child = PreforkedChild(sock.fileno(), on_demand)
    child.prefork()
    fork_when_idle = reset_done = False
    runner = _Runner(child, baseline)
    try:
        while True:
            if fork_when_idle and not select.select([sock], [], [], PREFORK_WHEN_IDLE_S)[0]:
                child.prefork()
                fork_when_idle = False
            try:
                header, payload = recv_message(sock)
            except EOFError:
                return
            op = header.get("op")
            if op == Op.CANCEL:  # arrived after its execution ended: nothing to do
                continue
            reply, data = runner.answer(header, payload, sock)
            send_message(sock, reply, data)
            # After a reset the next child waits for the service's next request: the service
            # checks the container's processes from outside first (only the runner may be left).
            fork_when_idle = (fork_when_idle or op == Op.EXEC or reset_done) and op != Op.RESET
            reset_done = op == Op.RESET
    finally:
        child.discard()


class _Runner:
    """What the serve loop answers with: the warm child and the container's baseline."""

    def __init__(self, child: PreforkedChild, baseline: Baseline | None) -> None:
        self.child, self.baseline = child, baseline

    def answer(self, header: dict, payload: bytes, sock: socket.socket) -> tuple[dict, bytes]:
        """The reply (header and payload) to one request; a refusal or a failure is a reply too."""
        try:
            reply, data = self._reply(decode_request(header), payload, sock)
            return encode_reply(reply, header.get("id")), data
        except RunnerError as exc:
            refused = exc.encode()
        except Exception as exc:  # report, keep serving
            refused = RunnerError(ErrorCode.INTERNAL, f"{type(exc).__name__}: {exc}").encode()
        refused["id"] = header.get("id")
        return refused, b""

    def _reply(self, request: Message, payload: bytes, sock: socket.socket) -> tuple[Message, bytes]:
        if isinstance(request, ExecRequest):
            return self.child.run(request, payload, sock), b""
        if isinstance(request, ResetRequest):
            if self.baseline is None:
                raise RunnerError(ErrorCode.BAD_OP, "this runner recorded no baseline: it cannot reset")
            self.child.discard()  # the warm child goes too; the next is forked from a clean runner
            return reset(self.baseline), b""
        if isinstance(request, WriteRequest):
            return files.write(request, payload), b""
        if isinstance(request, ReadRequest):
            return ReadReply(), files.read(request)
        if isinstance(request, ListRequest):
            return files.list_files(request), b""
        if isinstance(request, OomRequest):
            return _oom_count(), b""
        if isinstance(request, PingRequest):
            return PingReply(pid=os.getpid()), b""
        raise RunnerError(ErrorCode.BAD_OP, f"unhandled op {request.op!r}")  # pragma: no cover


def _oom_count() -> OomReply:
    """The container's own OOM-kill counter, for hosts where the service cannot read the
    container's cgroup itself (the service prefers its own reading)."""
    for path in ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"):
        try:
            with open(path) as fh:
                for line in fh:
                    name, _, value = line.partition(" ")
                    if name == "oom_kill":
                        return OomReply(oom_kill=int(value))
        except OSError:
            continue
    return OomReply(oom_kill=None)
