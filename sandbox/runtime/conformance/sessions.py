"""Checks of a sandbox driven as a session: streaming execution, output caps, timeouts,
cancel, the two sweep modes, files anywhere."""

from __future__ import annotations

import threading

from sandbox.runtime.base import SessionSandbox, Sweep
from sandbox.runtime.conformance.core import Conformance, _check, _raises
from skillopt.agents.sandbox import ExecOutcome
from skillopt.errors import (
    InvalidRequest,
    SandboxFileMissing,
    SandboxFileTooLarge,
    SandboxIsADirectory,
    SandboxPermissionDenied,
)

# -- sessions ------------------------------------------------------------------------------------


class _Collected:
    """What a streaming execution sent, by stream; ``seen`` is set at the first output."""

    def __init__(self) -> None:
        self.out: dict[int, bytearray] = {1: bytearray(), 2: bytearray()}
        self.seen = threading.Event()

    def __call__(self, fd: int, data: bytes) -> None:
        self.out[fd] += data
        self.seen.set()


def _stream(box: SessionSandbox, argv: list[str], **kw) -> tuple[ExecOutcome, _Collected]:
    got = _Collected()
    kw.setdefault("timeout_s", 30)
    kw.setdefault("output_limit_bytes", 1 << 20)
    return box.exec_streaming(argv, on_output=got, **kw), got


@_check
def check_session_exec_streams_output(c: Conformance) -> None:
    """Output arrives through ``on_output`` by stream (the outcome's tails stay empty); stdin,
    env and the working directory (relative to ``workdir``, or absolute) reach the command; a
    program that cannot start says why; ``python=`` runs a Python file with stdin and its exit
    code."""
    with c.session() as box:
        out, got = _stream(box, ["sh", "-c", "echo out; echo err >&2; exit 3"])
        assert (out.exit_code, bytes(got.out[1]), bytes(got.out[2])) == (3, b"out\n", b"err\n"), out
        assert (out.stdout_bytes, out.stderr_bytes, out.stdout_tail) == (4, 4, ""), out
        assert not (out.timed_out or out.cancelled or out.output_limit_exceeded), out
        _, got = _stream(box, ["cat"], stdin=b"from stdin")
        assert bytes(got.out[1]) == b"from stdin", got.out
        _, got = _stream(box, ["sh", "-c", "echo $SO_CHECK"], env={"SO_CHECK": "passed"})
        assert bytes(got.out[1]) == b"passed\n", got.out
        _stream(box, ["mkdir", "-p", "sub"])
        _, got = _stream(box, ["pwd"], cwd="sub")
        assert bytes(got.out[1]) == f"{box.workdir}/sub\n".encode(), got.out
        _, got = _stream(box, ["pwd"], cwd="/tmp")
        assert bytes(got.out[1]) == b"/tmp\n", got.out
        out, _ = _stream(box, ["no-such-program-here"])
        assert out.exit_code == 127 and out.spawn_error == "not_found", out
        _raises(InvalidRequest, lambda: _stream(box, []))
        box.write_path("prog.py", b"import sys\nprint(sys.stdin.read().upper())\nsys.exit(4)\n")
        out, got = _stream(box, [], python="prog.py", stdin=b"warm")  # the warm interpreter's fork
        assert (out.exit_code, bytes(got.out[1])) == (4, b"WARM\n"), (out, got.out)


@_check
def check_session_output_cap_kills_the_command(c: Conformance) -> None:
    with c.session() as box:
        out, got = _stream(box, ["sh", "-c", "while :; do echo flood; done"], output_limit_bytes=4096)
        assert out.output_limit_exceeded and out.exit_code is None, out
        assert len(got.out[1]) + len(got.out[2]) <= 4096, len(got.out[1])


@_check
def check_session_timeout_kills_the_command(c: Conformance) -> None:
    with c.session() as box:
        out, _ = _stream(box, ["sleep", "60"], timeout_s=1.0)
        assert out.timed_out and out.exit_code is None and not out.cancelled, out


@_check
def check_session_cancel_kills_the_command(c: Conformance) -> None:
    """``cancel_command`` from another thread ends the running command (``cancelled``) and the
    session goes on; a command whose cancel flag is set before it reaches the sandbox (the
    caller vanished meanwhile) is cancelled at once."""
    with c.session() as box:
        got = _Collected()
        ended: list[ExecOutcome] = []
        argv = ["sh", "-c", "echo started; exec sleep 600"]
        t = threading.Thread(
            target=lambda: ended.append(
                box.exec_streaming(argv, timeout_s=120, on_output=got, output_limit_bytes=1 << 20)
            )
        )
        t.start()
        assert got.seen.wait(60), "the command never started"
        box.cancel_command()
        t.join(60)
        assert ended and ended[0].cancelled and not ended[0].timed_out, ended
        flag = threading.Event()
        flag.set()
        box.cancel_command()  # before the command: the sandbox ignores it, the flag does not
        out, _ = _stream(box, ["sleep", "600"], cancelled=flag)
        assert out.cancelled and not out.timed_out, out
        out, got = _stream(box, ["echo", "still here"])
        assert bytes(got.out[1]) == b"still here\n", out


@_check
def check_session_sweep_modes(c: Conformance) -> None:
    """``Sweep.ON_KILL``: a background process outlives its command, until a command is killed
    (then every process goes). ``Sweep.ALWAYS``: nothing outlives the command."""
    with c.session() as box:

        def background(sweep: Sweep) -> str:
            out, got = _stream(box, ["sh", "-c", "sleep 300 >/dev/null 2>&1 & echo $!"], sweep=sweep)
            assert out.exit_code == 0, out
            return bytes(got.out[1]).decode().strip()

        def alive(pid: str) -> bool:
            return _stream(box, ["kill", "-0", pid])[0].exit_code == 0

        pid = background(Sweep.ON_KILL)
        assert alive(pid), "a background process of a session's command was killed"
        out, _ = _stream(box, ["sleep", "60"], timeout_s=1.0)
        assert out.timed_out and not alive(pid), "a killed command left the session's processes"
        assert not alive(background(Sweep.ALWAYS)), "Sweep.ALWAYS left a process behind"


@_check
def check_session_files_anywhere_with_typed_errors(c: Conformance) -> None:
    """Session files: absolute or relative to ``workdir``, links followed, binary round trip,
    and each refusal of its own kind."""
    data = bytes(range(256)) * 16
    with c.session() as box:
        box.write_path("/tmp/a/b.bin", data)
        assert box.read_path("/tmp/a/b.bin", max_bytes=len(data)) == data
        box.write_path("rel.txt", b"relative")
        assert box.read_path(f"{box.workdir}/rel.txt", max_bytes=100) == b"relative"
        _stream(box, ["sh", "-c", "ln -s /tmp/a/b.bin /tmp/link && mkfifo /tmp/fifo"])
        assert box.read_path("/tmp/link", max_bytes=len(data)) == data
        _raises(SandboxFileMissing, lambda: box.read_path("/tmp/nope", max_bytes=10))
        _raises(SandboxIsADirectory, lambda: box.read_path("/tmp/a", max_bytes=10))
        _raises(SandboxIsADirectory, lambda: box.write_path("/tmp/a", b"x"))
        _raises(SandboxPermissionDenied, lambda: box.write_path("/etc/evil", b"x"))
        _raises(SandboxPermissionDenied, lambda: box.read_path("/tmp/fifo", max_bytes=10))
        _raises(SandboxFileTooLarge, lambda: box.read_path("/tmp/a/b.bin", max_bytes=10))
        _raises(SandboxFileMissing, lambda: box.write_path("/tmp/a/b.bin/under-a-file", b"x"))
