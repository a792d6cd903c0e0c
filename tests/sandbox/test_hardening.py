"""Hostile programs against a real rollout container (DESIGN §7): each must be contained,
reported, and leave the runtime healthy. Real Docker, the real runtime image, the real runner."""

from __future__ import annotations

import json
import os
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.runtime.docker.runtime import DockerRuntime
from sandbox.runtime.lease import LeasedSandbox
from sandbox.runtime.spec import ContainerSpec, RuntimeConfig
from skillopt.errors import SandboxFileRefused

MiB = 1024 * 1024


@pytest.fixture(scope="module")
def runtime(docker_client) -> Iterator[DockerRuntime]:
    import shutil
    import tempfile

    state = tempfile.mkdtemp(prefix="so-hard-", dir="/tmp")
    rt = DockerRuntime(
        RuntimeConfig(host_id=f"test-hardening-{uuid.uuid4().hex[:6]}", state_dir=state, pool_size=0)
    )
    rt.reap(startup=True)
    yield rt
    rt.close()
    shutil.rmtree(state, ignore_errors=True)


def _box(runtime: DockerRuntime, **spec_kw) -> Iterator[LeasedSandbox]:
    handle = runtime.create(ContainerSpec(**spec_kw))
    try:
        yield LeasedSandbox(runtime, handle, output_limit_bytes=16 * 1024)
    finally:
        runtime.destroy(handle)


@pytest.fixture
def box(runtime) -> Iterator[LeasedSandbox]:
    yield from _box(runtime)


def run(box: LeasedSandbox, code: str, *, timeout_s: float = 30.0):
    box.write_file("prog.py", textwrap.dedent(code).encode())
    return box.run_python("prog.py", timeout_s=timeout_s)


def test_runs_code_as_unprivileged_user_without_capabilities(box):
    out = run(
        box,
        """
        import os, json
        status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
        print(json.dumps({k: status[k].strip() for k in ("Uid", "CapEff", "CapPrm", "CapBnd", "CapAmb", "NoNewPrivs")}))
        """,
    )
    assert out.exit_code == 0, out.stderr_tail
    st = json.loads(out.stdout_tail)
    assert st["Uid"].split()[0] == "1000"
    for cap in ("CapEff", "CapPrm", "CapBnd", "CapAmb"):
        assert int(st[cap], 16) == 0, (cap, st[cap])
    assert st["NoNewPrivs"] == "1"


def test_no_network(box):
    out = run(
        box,
        """
        import os, socket
        print("interfaces", sorted(os.listdir("/sys/class/net")))
        for target in [("1.1.1.1", 53), ("8.8.8.8", 443), ("172.17.0.1", 2375)]:
            try:
                socket.create_connection(target, timeout=2).close()
                print("CONNECTED", target)
            except OSError as exc:
                print("blocked", target, exc.errno)
        try:
            socket.getaddrinfo("example.com", 443)
            print("RESOLVED")
        except OSError:
            print("no dns")
        """,
    )
    assert out.exit_code == 0, out.stderr_tail
    assert "interfaces ['lo']" in out.stdout_tail
    assert "CONNECTED" not in out.stdout_tail and "RESOLVED" not in out.stdout_tail
    assert out.stdout_tail.count("blocked") == 3


def test_root_filesystem_and_mounts_are_read_only(box):
    out = run(
        box,
        """
        import errno
        for path in ["/etc/evil", "/usr/bin/evil", "/evil", "/opt/skillopt/runner.py", "/skill/SKILL.md", "/control/x"]:
            try:
                with open(path, "w") as fh:
                    fh.write("x")
                print("WROTE", path)
            except OSError as exc:
                print("denied", path, errno.errorcode.get(exc.errno))
        open("/tmp/ok", "w").write("tmp is writable")
        open("/workspace/ok", "w").write("workspace is writable")
        print("writable ok")
        """,
    )
    assert out.exit_code == 0, out.stderr_tail
    assert "WROTE" not in out.stdout_tail
    assert out.stdout_tail.count("denied") == 6
    assert "writable ok" in out.stdout_tail


def test_nothing_of_the_host_is_readable(box, runtime, tmp_path):
    marker = f"skillopt-host-marker-{os.getpid()}"
    (Path("/tmp") / marker).write_text("host secret")
    try:
        out = run(
            box,
            f"""
            import os
            hits = []
            for root in ["/tmp", "/workspace", "/skill", "/control", "/opt", "/root", "/home", "/var", "/etc", "/mnt"]:
                for dirpath, dirnames, filenames in os.walk(root):
                    if {marker!r} in filenames or {marker!r} in dirnames:
                        hits.append(dirpath)
            print("hits", hits)
            print("control", sorted(os.listdir("/control")))
            print("skill", sorted(os.listdir("/skill")))
            env_text = ""
            for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
                try:
                    env_text += open(f"/proc/{{pid}}/environ").read()
                except OSError:
                    pass
            print("secrets_in_env", any(k in env_text for k in ("API_KEY", "TOKEN", "SECRET", "sk-")))
            try:
                open("/etc/shadow").read()
                print("SHADOW READ")
            except OSError:
                print("shadow denied")
            """,
        )
    finally:
        (Path("/tmp") / marker).unlink()
    assert out.exit_code == 0, out.stderr_tail
    assert "hits []" in out.stdout_tail
    assert "control []" in out.stdout_tail  # the listening socket is gone once connected
    assert "secrets_in_env False" in out.stdout_tail
    assert "shadow denied" in out.stdout_tail


def test_fork_bomb_is_stopped_by_the_pids_limit(runtime):
    for box in _box(runtime, pids_limit=64):
        out = run(
            box,
            """
            import os, time
            children = 0
            try:
                while True:
                    if os.fork() == 0:
                        time.sleep(60)
                        os._exit(0)
                    children += 1
            except OSError as exc:
                print("fork refused after", children, "children:", exc.strerror, flush=True)
            time.sleep(60)
            """,
            timeout_s=5,
        )
        assert "fork refused after" in out.stdout_tail
        refused_after = int(out.stdout_tail.split("after")[1].split()[0])
        assert refused_after < 64
        assert out.timed_out
        # The runner swept the whole tree: the container is usable and nearly empty again.
        again = run(box, "import os; print(len([p for p in os.listdir('/proc') if p.isdigit()]))")
        assert again.exit_code == 0 and int(again.stdout_tail) <= 3


def test_memory_bomb_is_killed_and_reported_as_oom(runtime):
    for box in _box(runtime, memory_bytes=128 * MiB):
        out = run(
            box, "chunks = []\nwhile True:\n    chunks.append(bytearray(16 * 1024 * 1024))\n", timeout_s=60
        )
        assert out.oom_killed
        assert out.exit_code is None and out.signal == 9
        # The runner survived the OOM kill of its child.
        assert run(box, "print('still here')").stdout_tail == "still here\n"


def test_timeout_kills_the_whole_process_tree(box):
    out = run(
        box,
        """
        import os, subprocess, time
        subprocess.Popen(["sleep", "1000"])
        if os.fork() == 0:          # a detached grandchild in its own session
            os.setsid()
            if os.fork() == 0:
                time.sleep(1000)
            os._exit(0)
        print("spawned", flush=True)
        while True:
            pass
        """,
        timeout_s=2,
    )
    assert out.timed_out and out.exit_code is None
    assert "spawned" in out.stdout_tail
    left = run(box, "import os; print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))")
    pids = json.loads(left.stdout_tail)
    assert len(pids) == 2, pids  # the runner (PID 1) and this very process


def test_output_is_capped_keeping_the_tail(box):
    out = run(box, "import sys\nfor i in range(200000):\n    print(f'line {i:06d}')\nprint('THE END')\n")
    assert out.exit_code == 0
    assert out.stdout_bytes > 2_000_000
    assert len(out.stdout_tail.encode()) <= 16 * 1024
    assert out.stdout_tail.endswith("THE END\n")
    assert out.output_truncated


def test_code_cannot_kill_its_runner(box):
    out = run(
        box,
        """
        import os, signal
        for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            os.kill(os.getppid(), sig)
            os.kill(1, sig)
        print("signals sent")
        """,
    )
    assert out.exit_code == 0 and "signals sent" in out.stdout_tail
    assert run(box, "print('runner alive')").stdout_tail == "runner alive\n"


def test_disk_fill_is_bounded(runtime):
    for box in _box(runtime, workspace_size_bytes=32 * MiB, fsize_bytes=16 * MiB):
        out = run(
            box,
            """
            import errno
            written = 0
            try:
                with open("/workspace/fill", "wb") as fh:
                    while True:
                        fh.write(b"x" * 1024 * 1024)
                        fh.flush()
                        written += 1
            except OSError as exc:
                print("stopped at", written, "MiB:", errno.errorcode.get(exc.errno))
            """,
        )
        # RLIMIT_FSIZE (SIGXFSZ) or the tmpfs size stops the writer well before host disk matters.
        assert out.signal == 25 or ("stopped at" in out.stdout_tail), (
            out.signal,
            out.stdout_tail,
            out.stderr_tail,
        )


def test_symlinks_are_never_followed_when_reading_outputs(box):
    run(box, "import os\nos.symlink('/etc/passwd', 'output.xlsx')\nos.symlink('/etc', 'dir')\n")
    with pytest.raises(SandboxFileRefused):
        box.read_file("output.xlsx", max_bytes=1 << 20)
    with pytest.raises(SandboxFileRefused):
        box.read_file("dir/passwd", max_bytes=1 << 20)  # a linked directory, too
    assert [f.path for f in box.list_files()] == ["prog.py"]


def test_paths_outside_the_workspace_are_refused(box):
    from skillopt.errors import InvalidRequest

    for bad in ("/etc/passwd", "../x", "a/../../x", ""):
        with pytest.raises(InvalidRequest):
            box.write_file(bad, b"x")
