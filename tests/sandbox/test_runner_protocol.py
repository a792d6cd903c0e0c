"""The runner protocol on its own: typed messages, framing, refusals, the timeout rule, and the
runner package's in-container loading. No Docker here; every container test drives the real
runner over this protocol too."""

from __future__ import annotations

import ast
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.runtime.runner import protocol
from sandbox.runtime.runner.protocol import (
    BACKSTOP_SLACK_S,
    SWEEP_DEADLINE_S,
    ErrorCode,
    ExecReply,
    ExecRequest,
    Hello,
    ListRequest,
    OomRequest,
    ProtocolError,
    ReadRequest,
    RunnerError,
    Sweep,
    WriteRequest,
    check_reply,
    decode_request,
    encode_reply,
    encode_request,
    recv_message,
    send_message,
    timeout_confirmed,
)

RUNNER_DIR = Path(protocol.__file__).parent


@pytest.mark.parametrize(
    "request_",
    [
        WriteRequest(path="a/b.txt"),
        WriteRequest(path="/etc/x", confined=False, mode=0o600),
        ReadRequest(path="x", max_bytes=10, confined=False),
        ListRequest(max_files=3),
        OomRequest(),
        ExecRequest(
            timeout_s=1.5, argv=["sh", "-c", "true"], stream=True, sweep=Sweep.ON_KILL.value, stdin_size=3
        ),
        ExecRequest(timeout_s=2, python="p.py", args=["x"], env={"A": "b"}, cwd="/tmp"),
    ],
)
def test_every_request_survives_the_wire_as_itself(request_):
    header = encode_request(request_, 7)
    assert header["id"] == 7 and header["op"] == request_.op
    assert decode_request(header) == request_
    assert type(request_)(**request_.values()) == request_  # the runner's job pipe


def test_fields_at_their_default_are_not_sent():
    assert encode_request(ExecRequest(timeout_s=2, argv=["true"]), 1) == {
        "op": "exec",
        "id": 1,
        "timeout_s": 2,
        "argv": ["true"],
    }
    assert ExecReply.decode(encode_reply(ExecReply(exit_code=0), 1)) == ExecReply(exit_code=0)


def test_an_unknown_or_malformed_request_is_refused_as_bad_op():
    with pytest.raises(RunnerError) as unknown:
        decode_request({"op": "fs_write", "path": "x"})
    assert unknown.value.code == ErrorCode.BAD_OP
    with pytest.raises(RunnerError) as malformed:
        decode_request({"op": "exec", "timeout_s": "soon"})
    assert malformed.value.code == ErrorCode.BAD_OP


def test_a_reply_from_the_runner_is_checked_field_by_field():
    """The runner shares its uid with the code it runs: a reply whose fields have the wrong
    type is a protocol error, never passed on."""
    good = encode_reply(ExecReply(exit_code=3, stdout_bytes=4, stdout_tail="out\n", duration_s=1), 1)
    reply = ExecReply.decode(good)
    assert (reply.exit_code, reply.stdout_tail, reply.duration_s, reply.signal) == (3, "out\n", 1.0, None)
    for field, bad in [
        ("exit_code", "0"),
        ("exit_code", True),
        ("stdout_bytes", 1.5),
        ("timed_out", 1),
        ("stdout_tail", 5),
        ("spawn_error", "x"),
    ]:
        with pytest.raises(ProtocolError, match=field):
            ExecReply.decode({**good, field: bad})
    with pytest.raises(ProtocolError):
        Hello.decode({"type": "hello", "protocol": 1, "pid": 1})  # no uid
    hello = Hello(type="hello", protocol=protocol.PROTOCOL_VERSION, pid=1, uid=1000)
    assert Hello.decode(hello.encode()).protocol == protocol.PROTOCOL_VERSION  # always sent
    with pytest.raises(ProtocolError):
        Hello.decode({"type": "hello", "pid": 1, "uid": 1000})  # a runner that names no version


def test_a_refusal_keeps_its_code_and_a_bounded_message():
    check_reply({"ok": True})
    with pytest.raises(RunnerError) as refused:
        check_reply(RunnerError(ErrorCode.TOO_LARGE, "x" * 5000).encode())
    assert refused.value.code == ErrorCode.TOO_LARGE and len(refused.value.message) == 2000
    with pytest.raises(RunnerError):
        check_reply({"ok": "yes"})


def test_framing_round_trip_and_bounds():
    a, b = socket.socketpair()
    with a, b:
        send_message(a, {"op": "write", "path": "p"}, b"\x00\xff" * 10)
        header, payload = recv_message(b)
        assert header == {"op": "write", "path": "p", "size": 20} and payload == b"\x00\xff" * 10
        send_message(a, {"type": "out"}, b"z" * 100)
        with pytest.raises(ProtocolError, match="exceeds 10"):
            recv_message(b, max_size=10)  # refused before the payload is read
    a, b = socket.socketpair()
    with a, b:
        a.sendall(b"\x00\x00\x00\x03[1]")
        with pytest.raises(ProtocolError, match="not an object"):
            recv_message(b)
        a.close()
        with pytest.raises(EOFError):
            recv_message(b)


def test_the_runner_timeout_counts_only_when_the_host_clock_agrees():
    assert timeout_confirmed(True, 2.0, 2.0) and timeout_confirmed(True, 1.97, 2.0)
    assert not timeout_confirmed(True, 0.5, 2.0)  # the runner's word alone
    assert not timeout_confirmed(False, 9.0, 2.0)
    assert BACKSTOP_SLACK_S == 45.0 and BACKSTOP_SLACK_S > SWEEP_DEADLINE_S


def test_the_runner_package_is_stdlib_only():
    """It runs on the image's Python with nothing of the project: every import is the standard
    library's or a sibling module's."""
    for path in sorted(RUNNER_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                assert top in sys.stdlib_module_names or top == "__future__", f"{path.name} imports {name}"


def test_the_runner_loads_its_modules_under_one_private_package_name(tmp_path):
    """In the container the package directory is run as ``python3 -I runner.py``: its modules
    are imported as ``_skillopt_runner.*``, so a program's own ``protocol.py`` or ``files.py``
    is never shadowed by the runner's."""
    copy = tmp_path / "opt"
    copy.mkdir()
    for path in RUNNER_DIR.glob("*.py"):
        shutil.copy(path, copy / path.name)
    probe = (
        "import importlib, importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('entry', {str(copy / 'runner.py')!r})\n"
        "entry = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(entry)\n"
        "entry._load_package()\n"
        "serve = importlib.import_module(entry.PACKAGE + '.serve')\n"
        "names = {'protocol', 'files', 'serve', 'process', 'child', 'sweep', 'imports'}\n"
        "print(sorted(names & set(sys.modules)), serve.__name__, sys.modules[entry.PACKAGE + '.protocol'].PROTOCOL_VERSION)\n"
    )
    out = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["[]", "_skillopt_runner.serve", str(protocol.PROTOCOL_VERSION)]


def test_runner_sha256_is_the_digest_of_the_package_files_in_name_order():
    from sandbox.runtime.docker.statedir import runner_digest, runner_sources

    sources = runner_sources()
    assert set(sources) == {p.name for p in RUNNER_DIR.glob("*.py")} and "protocol.py" in sources
    digest = runner_digest(sources)
    assert len(digest) == 64 and runner_digest(dict(reversed(sources.items()))) == digest
    assert runner_digest({**sources, "protocol.py": sources["protocol.py"] + b"\n"}) != digest
    # A file's bytes cannot move into its neighbour's without changing the digest.
    moved = {"a.py": b"xy", "b.py": b""}
    assert runner_digest(moved) != runner_digest({"a.py": b"x", "b.py": b"y"})


def test_the_runner_command_line_is_the_one_the_service_builds():
    from sandbox.runtime.runner.runner import _options

    assert _options(
        ["--connect", "/control/runner.sock", "--preimport", "", "--import-on-demand", "a,b"]
    ) == {
        "--connect": "/control/runner.sock",
        "--preimport": "",
        "--import-on-demand": "a,b",
    }
    assert _options(["--connect", "/s"])["--preimport"] == "openpyxl"
    for bad in ([], ["--connect"], ["--connect", "/s", "--verbose", "1"]):
        with pytest.raises(SystemExit):
            _options(bad)


def test_the_installed_runner_is_byte_compiled_for_this_python(tmp_path):
    """Each container imports the runner from a read-only mount: without bytecode there, every
    start would compile it again."""
    import importlib.util

    from sandbox.runtime.docker.statedir import StateDir

    state = StateDir(tmp_path)
    try:
        digest, installed = state.install_runner()
        assert sorted(p.name for p in installed.glob("*.py")) == sorted(
            p.name for p in RUNNER_DIR.glob("*.py")
        )
        for module in installed.glob("*.py"):
            cached = Path(importlib.util.cache_from_source(str(module)))
            assert cached.exists() == (module.name != "runner.py"), module.name
        assert state.install_runner() == (digest, installed)  # a second install changes nothing
    finally:
        state.close()
