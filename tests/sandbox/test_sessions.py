"""Sessions (the general sandbox API) on a real host: tenancy, caps, lifetimes, streaming,
typed errors, and the isolation a session gets (hostile cases)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import docker.errors
import grpc
import pytest

from controller.client.sessions import SandboxSession, SessionEndpoints, list_sessions
from sandbox.api.v1 import sandbox_pb2 as pb
from sandbox.service.config import SessionConfig
from skillopt.errors import (
    Draining,
    InvalidRequest,
    SandboxFileMissing,
    SandboxFileTooLarge,
    SandboxIsADirectory,
    SandboxPermissionDenied,
    SessionLimit,
    UnknownSession,
    UserUnsupported,
)
from skillopt.types import SkillVersion
from tests.sandbox.conftest import RUNTIMES, start_service

MiB = 1024 * 1024
TOKEN_A = "tenant-a-" + uuid.uuid4().hex
TOKEN_B = "tenant-b-" + uuid.uuid4().hex
TOKEN_CAPPED = "tenant-c-" + uuid.uuid4().hex


@pytest.fixture(scope="module", params=RUNTIMES)
def host(request, docker_client, scripted):
    yield from start_service(
        scripted,
        container_runtime=request.param,
        capacity=2,
        pool_size=2,
        server_kw={
            "tenants": ((TOKEN_A, 0), (TOKEN_B, 0), (TOKEN_CAPPED, 1)),
            "sessions": SessionConfig(
                max_sessions=4,
                max_file_bytes=8 * MiB,
                max_stdin_bytes=8 * MiB,
                max_buffered_bytes=16 * MiB,
                buffer_wait_s=1.0,
            ),
        },
    )


def where(host, token: str) -> SessionEndpoints:
    return SessionEndpoints(endpoints=(host.running.address,), token=token)


@pytest.fixture
def session_a(host) -> Iterator[SandboxSession]:
    with SandboxSession.create(where(host, TOKEN_A), labels={"who": "a"}) as session:
        yield session


def test_a_session_with_default_limits_takes_a_warm_rollout_container(host, session_a):
    session = host.running.servicer.sessions._sessions[session_a.id]
    assert session.spec == host.running.service.config.base_spec  # the rollouts' warm pool


def test_a_session_runs_commands_and_moves_files(session_a):
    result = session_a.exec(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (result.exit_code, result.stdout, result.stderr) == (3, b"out\n", b"err\n")
    session_a.write_file("dir/in.bin", b"\x00\xff" * 1000)
    assert session_a.exec(["wc", "-c", "dir/in.bin"]).stdout.split()[0] == b"2000"
    assert session_a.read_file("/workspace/dir/in.bin") == b"\x00\xff" * 1000
    assert session_a.exec(["cat"], input=b"abc").stdout == b"abc"
    assert session_a.exec(["pwd"], cwd="dir").stdout == b"/workspace/dir\n"
    assert session_a.exec(["sh", "-c", "echo $X"], env={"X": "42"}).stdout == b"42\n"
    assert session_a.exec(["id", "-u"]).stdout == b"1000\n"


def test_files_fail_with_distinct_typed_errors(session_a):
    with pytest.raises(SandboxFileMissing, match=r"nope\.txt"):
        session_a.read_file("nope.txt")
    with pytest.raises(SandboxIsADirectory):
        session_a.read_file("/etc")
    with pytest.raises(SandboxPermissionDenied, match="shadow"):
        session_a.read_file("/etc/shadow")
    with pytest.raises(SandboxPermissionDenied):
        session_a.write_file("/etc/evil", b"x")  # read-only root
    session_a.write_file("big.txt", b"a" * 4096)
    with pytest.raises(SandboxFileTooLarge):
        session_a.read_file("big.txt", max_bytes=1024)
    with pytest.raises(SandboxFileTooLarge):
        session_a.write_file("huge.bin", b"\0" * (8 * MiB + 1))  # over the host's file limit
    session_a.exec(["mkdir", "-p", "adir"])
    with pytest.raises(SandboxIsADirectory):
        session_a.write_file("adir", b"x")
    # A FIFO neither blocks the session's runner nor is written or read through.
    session_a.exec(["mkfifo", "pipe"])
    with pytest.raises(SandboxPermissionDenied):
        session_a.write_file("pipe", b"x")
    with pytest.raises(SandboxPermissionDenied):
        session_a.read_file("pipe")


def test_transfers_share_a_bounded_host_buffer(host, session_a):
    """Files and stdin in flight count against one host-wide budget: beyond it a transfer
    waits, then is refused with a retry hint; nothing is held once transfers end."""
    manager = host.running.servicer.sessions
    taken = manager.reserve_buffer(12 * MiB)  # other transfers in flight
    try:
        with pytest.raises(SessionLimit, match="moving"):
            session_a.write_file("blob", b"x" * (6 * MiB))
        with pytest.raises(SessionLimit, match="moving"):
            session_a.exec(["wc", "-c"], input=b"y" * (6 * MiB))
        assert session_a.exec(["wc", "-c"], input=b"y" * MiB).stdout.split()[0] == str(MiB).encode()
    finally:
        manager.release_buffer(taken)
    session_a.write_file("blob", b"x" * (6 * MiB))
    assert len(session_a.read_file("blob")) == 6 * MiB
    assert manager._buffered == 0


def test_commands_that_cannot_start_say_why(session_a):
    assert session_a.exec(["/etc/passwd"]).spawn_error == "permission"
    missing = session_a.exec(["no-such-program"])
    assert (missing.spawn_error, missing.returncode) == ("not_found", 127)
    assert session_a.exec(["ls"], cwd="/no/such/dir").spawn_error == "cwd"
    with pytest.raises(UserUnsupported, match="root"):
        session_a.exec(["whoami"], user="root")
    assert session_a.exec(["whoami"], user="sandbox").stdout == b"sandbox\n"
    with pytest.raises(InvalidRequest):
        session_a.exec([])


def test_output_is_streamed_as_it_comes_and_a_cancelled_call_kills_the_command(host, session_a):
    """The first line arrives while the command still sleeps; cancelling the call (the client
    going away) kills the command and leaves the session usable."""
    start = pb.ExecStart(session_id=session_a.id, argv=["sh", "-c", "echo first; exec sleep 600"])
    call = session_a.client.call("Exec", iter([pb.ExecInput(start=start)]), timeout_s=120)
    first = next(iter(call))
    assert first.stdout == b"first\n"
    call.cancel()
    ps = session_a.exec(["ps", "-eo", "args"])
    assert b"sleep 600" not in ps.stdout
    assert session_a.exec(["echo", "still here"]).stdout == b"still here\n"


def test_a_timeout_kills_the_whole_tree_and_output_is_capped(session_a):
    result = session_a.exec(["sh", "-c", "sleep 300 & setsid sleep 301 & sleep 302"], timeout=1)
    assert result.timed_out and result.exit_code is None
    assert b"sleep 30" not in session_a.exec(["ps", "-eo", "args"]).stdout
    flood = session_a.exec(["sh", "-c", "yes"], output_limit_bytes=100_000, timeout=60)
    assert flood.output_limit_exceeded and len(flood.stdout) <= 100_000


def test_background_processes_outlive_a_command_but_not_the_session(host, docker_client):
    with SandboxSession.create(where(host, TOKEN_A)) as session:
        session.exec(["sh", "-c", "setsid sleep 1000 >/dev/null 2>&1 </dev/null &"])
        assert b"sleep 1000" in session.exec(["ps", "-eo", "args"]).stdout
        name = session_container(host, session.id)
    pools = host.running.service.pools
    assert pools.wait_released(timeout_s=60)
    if pools.holds(name) != "recycled":  # destroyed: nothing of it runs
        with pytest.raises(docker.errors.NotFound):
            docker_client.containers.get(name)
        return
    # Reset for the token's next session (docs/recycling.md), which gets it: the background
    # process of the last one is gone.
    with SandboxSession.create(where(host, TOKEN_A)) as session:
        assert session_container(host, session.id) == name
        assert b"sleep 1000" not in session.exec(["ps", "-eo", "args"]).stdout


def test_another_tokens_session_is_invisible(host, session_a):
    with SandboxSession.create(where(host, TOKEN_B)) as session_b:
        listed_b = [s.session_id for s in list_sessions(where(host, TOKEN_B))]
        assert listed_b == [session_b.id]
        assert session_a.id in [s.session_id for s in list_sessions(where(host, TOKEN_A))]
        intruder = SandboxSession(session_b.client, session_a.info, owns_client=False)
        for attempt in (
            lambda: intruder.exec(["ls"]),
            lambda: intruder.read_file("x"),
            lambda: intruder.write_file("x", b"x"),
            lambda: intruder.extend(60),
        ):
            with pytest.raises(UnknownSession):
                attempt()
        assert intruder.destroy() is False  # "no such session" for this token
        # Neither sees the other's files or processes: separate containers.
        session_a.write_file("/tmp/secret-a", b"a's")
        with pytest.raises(SandboxFileMissing):
            session_b.read_file("/tmp/secret-a")
    assert session_a.exec(["echo", "ok"]).stdout == b"ok\n"


def test_a_session_has_no_network_and_cannot_reach_the_host(session_a):
    probe = (
        "import socket,sys\n"
        "for addr in [('172.17.0.1', 22), ('10.0.0.1', 80), ('1.1.1.1', 53)]:\n"
        "    try:\n"
        "        socket.create_connection(addr, timeout=2); print('reached', addr)\n"
        "    except OSError as e:\n"
        "        print('blocked', addr, e.errno)\n"
    )
    result = session_a.exec(["python3", "-c", probe], timeout=30)
    assert b"reached" not in result.stdout and result.stdout.count(b"blocked") == 3
    interfaces = session_a.read_file("/proc/net/dev").decode()
    assert [line.split(":")[0].strip() for line in interfaces.splitlines()[2:]] == ["lo"]


CONNECT = (
    "import socket,sys\n"
    "for host, port in [a.split(':') for a in sys.argv[1:]]:\n"
    "    try:\n"
    "        socket.create_connection((host, int(port)), timeout=3); print('reached', host)\n"
    "    except OSError as e:\n"
    "        print('blocked', host)\n"
)


def test_only_a_gateway_session_reaches_the_gateway_and_nothing_else(host):
    front = host.running.front
    assert front is not None, "this test host runs as root: it has the gateway network"
    gateway = front.url.split("//", 1)[1].rstrip("/")
    probe = ["python3", "-c", CONNECT, gateway, "1.1.1.1:53", "172.17.0.1:22"]
    with SandboxSession.create(where(host, TOKEN_A), network="gateway") as box:
        assert box.info.network == "gateway"
        out = box.exec(probe, timeout=30).stdout.decode()
    assert out.splitlines() == [f"reached {gateway.split(':')[0]}", "blocked 1.1.1.1", "blocked 172.17.0.1"]
    with SandboxSession.create(where(host, TOKEN_A)) as box:
        assert box.exec(probe, timeout=30).stdout.decode().count("blocked") == 3


def test_caps_refuse_politely_with_a_retry_hint(host):
    with SandboxSession.create(where(host, TOKEN_CAPPED), idle_ttl_s=300) as first:
        with pytest.raises(SessionLimit) as refused:
            SandboxSession.create(where(host, TOKEN_CAPPED))
        assert 0 < refused.value.retry_after_s <= 300
        assert first.exec(["echo", "unharmed"]).stdout == b"unharmed\n"
    held = [SandboxSession.create(where(host, TOKEN_A)) for _ in range(4)]
    try:
        with pytest.raises(SessionLimit, match="maximum of 4"):
            SandboxSession.create(where(host, TOKEN_B))
        assert all(s.exec(["true"]).exit_code == 0 for s in held)
        assert host.client.describe().sessions == 4
    finally:
        for s in held:
            s.destroy()


def test_bad_requests_are_refused_with_clear_errors(host):
    with pytest.raises(InvalidRequest, match="not allowed on this host"):
        SandboxSession.create(where(host, TOKEN_A), image="alpine:latest")
    with pytest.raises(InvalidRequest, match="network"):
        SandboxSession.create(where(host, TOKEN_A), network="host")
    with pytest.raises(InvalidRequest, match=r"\.\."):
        SandboxSession.create(where(host, TOKEN_A), files={"../escape": b"x"})
    ghost = SandboxSession(host.client, pb.SessionInfo(session_id="s-nope"), owns_client=False)
    with pytest.raises(UnknownSession):
        ghost.exec(["ls"])
    with pytest.raises(grpc.RpcError) as raw:
        list(host.client.call("Exec", iter([pb.ExecInput(stdin=b"x")]), timeout_s=30))
    assert raw.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_seeded_files_and_skill_are_in_place(host):
    with SandboxSession.create(
        where(host, TOKEN_A),
        files={"task.md": b"do it", "data/x.txt": b"1"},
        skill=SkillVersion(content="# My skill"),
    ) as session:
        assert session.read_file("task.md") == b"do it"
        assert session.read_file("/skill/SKILL.md") == b"# My skill"
        with pytest.raises(SandboxPermissionDenied):
            session.write_file("/skill/SKILL.md", b"tampered")


def test_an_abandoned_session_is_reaped_after_its_idle_ttl(host):
    """A client that starts a command and vanishes: the command is killed with the call, and
    the session goes once its idle TTL lapses."""
    manager = host.running.servicer.sessions
    before = manager.count()
    session = SandboxSession.create(where(host, TOKEN_B), idle_ttl_s=1)
    call = session.client.call(
        "Exec",
        iter([pb.ExecInput(start=pb.ExecStart(session_id=session.id, argv=["sleep", "600"]))]),
        timeout_s=120,
    )
    done = threading.Event()
    threading.Thread(target=lambda: (_drain(call), done.set()), daemon=True).start()
    session.client.close()  # the client vanishes mid-exec
    assert done.wait(30)
    assert manager.wait_count(before, timeout_s=30)
    with pytest.raises(UnknownSession):
        SandboxSession.attach(session.id, host.running.address, token=TOKEN_B)


def test_a_cancel_just_before_the_command_reaches_the_container_still_kills_it(host):
    """The client may vanish after its Exec was accepted but before the command reached the
    container. The runner ignores a cancel that comes before its command (nothing runs yet), so
    the command is cancelled again once sent; this race once left ``sleep 600`` running and
    its session busy for good (the abandoned-session test above failed in CI)."""
    manager = host.running.servicer.sessions
    with SandboxSession.create(where(host, TOKEN_B)) as client_session:
        session = manager._sessions[client_session.id]
        abandoned = threading.Event()
        abandoned.set()  # the call ended: flag set, then the cancel sent, as the RPC does
        session.box.cancel_command()
        result = manager.exec(
            session, ["sleep", "600"], on_output=lambda fd, data: None, timeout_s=30, cancelled=abandoned
        )
        assert result.cancelled and not result.timed_out, result
        assert client_session.exec(["echo", "still here"]).stdout == b"still here\n"


def test_a_draining_host_refuses_new_sessions_and_ends_live_ones(docker_client, scripted):
    gen = start_service(scripted, capacity=1, pool_size=1)
    svc = next(gen)
    session = SandboxSession.create(SessionEndpoints(endpoints=(svc.running.address,), token=svc.token))
    manager = svc.running.servicer.sessions
    manager.draining = True
    with pytest.raises(Draining):
        SandboxSession.create(SessionEndpoints(endpoints=(svc.running.address,), token=svc.token))
    manager.draining = False
    with pytest.raises(StopIteration):
        next(gen)  # leaves serve(): drains, then destroys what is left
    assert manager.count() == 0
    session.client.close()


# -- helpers ---------------------------------------------------------------------------------


def _drain(call) -> None:
    try:
        for _ in call:
            pass
    except grpc.RpcError:
        pass


def session_container(host, session_id: str) -> str:
    for s in host.running.servicer.sessions._sessions.values():
        if s.id == session_id:
            return s.box.handle.name
    raise AssertionError(f"no session {session_id}")
