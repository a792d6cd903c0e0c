"""Checks of a sandbox driven by a rollout: files, executions, limits, lifecycle, the skill
package mount, network."""

from __future__ import annotations

import functools
import stat
import threading
import time
from dataclasses import replace

from sandbox.runtime.conformance.core import Conformance, _check, _raises
from sandbox.runtime.spec import EXEC_SKILLS_ROOTS
from skillopt.errors import (
    Cancelled,
    ConfigError,
    ImageMissing,
    InvalidRequest,
    OutputLimitExceeded,
    SandboxFileMissing,
    SandboxFileRefused,
    SandboxUnavailable,
)
from skillopt.types import SkillFile, SkillVersion


@_check
def check_binary_round_trip(c: Conformance) -> None:
    """Every byte value survives write → read, in nested directories."""
    data = bytes(range(256)) * 64
    with c.box() as box:
        box.write_file("a/b/c.bin", data)
        assert box.read_file("a/b/c.bin", max_bytes=len(data)) == data
        box.write_file("a/b/c.bin", b"replaced")
        assert box.read_file("a/b/c.bin", max_bytes=1024) == b"replaced"


@_check
def check_read_errors_are_typed(c: Conformance) -> None:
    """Missing, refused (symlink, linked directory, directory) and too large are told apart."""
    with c.box() as box:
        _raises(SandboxFileMissing, lambda: box.read_file("nope.txt", max_bytes=10))
        _raises(SandboxFileMissing, lambda: box.read_file("no/such/dir.txt", max_bytes=10))
        out = box.run_command(
            ["sh", "-c", "ln -s /etc/passwd link && ln -s /etc dir && mkdir real && echo 12345678 > big"],
            timeout_s=30,
        )
        assert out.exit_code == 0, out.stderr_tail
        _raises(SandboxFileRefused, lambda: box.read_file("link", max_bytes=1 << 20))
        _raises(SandboxFileRefused, lambda: box.read_file("dir/passwd", max_bytes=1 << 20))
        _raises(SandboxFileRefused, lambda: box.read_file("real", max_bytes=1 << 20))
        _raises(OutputLimitExceeded, lambda: box.read_file("big", max_bytes=4))
        assert box.read_file("big", max_bytes=9) == b"12345678\n"


@_check
def check_a_program_holds_only_its_stdio(c: Conformance) -> None:
    """An executed program inherits no descriptor of its runner's (its connection to the
    service, the pipes of other executions): a command holds 0, 1 and 2 only; a Python program
    also the close-on-exec pipe its runner reads a start failure from, and never a socket."""
    with c.box() as box:
        box.write_file(
            "fds.py",
            b"import os, stat\nfds = [int(f) for f in os.listdir('/proc/self/fd')]\n"
            b"print(*sorted(stat.S_IFMT(os.fstat(f).st_mode) for f in fds if f > 2 and os.path.exists(f'/proc/self/fd/{f}')))\n",
        )
        out = box.run_command(["python3", "fds.py"], timeout_s=30)
        assert out.exit_code == 0 and out.stdout_tail == "\n", out
        out = box.run_python("fds.py", timeout_s=30)
        kinds = [int(k) for k in out.stdout_tail.split()]
        assert out.exit_code == 0 and stat.S_IFSOCK not in kinds and kinds.count(stat.S_IFIFO) <= 1, out


@_check
def check_paths_outside_the_workspace_are_refused(c: Conformance) -> None:
    with c.box() as box:
        for bad in ("/etc/passwd", "../x", "a/../../x", "", "a\\b"):
            _raises(InvalidRequest, functools.partial(box.write_file, bad, b"x"))
            _raises(InvalidRequest, functools.partial(box.read_file, bad, max_bytes=10))
        box.run_command(["ln", "-s", "/tmp", "tmplink"], timeout_s=30)
        _raises(InvalidRequest, lambda: box.write_file("tmplink/evil", b"x"))


@_check
def check_a_failing_program_is_data(c: Conformance) -> None:
    """Exit codes, stdout and stderr come back; a non-zero exit is not an exception."""
    with c.box() as box:
        out = box.run_command(["sh", "-c", "echo out; echo err >&2; exit 3"], timeout_s=30)
        assert (out.exit_code, out.stdout_tail, out.stderr_tail) == (3, "out\n", "err\n"), out
        assert not out.timed_out and not out.oom_killed
        box.write_file("p.py", b"import sys\nprint(sys.argv[1:])\nraise SystemExit(5)\n")
        out = box.run_python("p.py", args=["x", "y"], timeout_s=30)
        assert out.exit_code == 5 and out.stdout_tail == "['x', 'y']\n", out
        out = box.run_command(["cat"], timeout_s=30, stdin=b"from stdin")
        assert out.stdout_tail == "from stdin", out
        out = box.run_command(["sh", "-c", "echo $SO_CHECK"], timeout_s=30, env={"SO_CHECK": "passed"})
        assert out.stdout_tail == "passed\n", out
        _raises(InvalidRequest, lambda: box.run_command([], timeout_s=30))


@_check
def check_a_timeout_kills_the_process_tree(c: Conformance) -> None:
    with c.box() as box:
        out = box.run_command(["sh", "-c", "(sleep 1000 &) ; sleep 1000"], timeout_s=1.5)
        assert out.timed_out and out.exit_code is None, out
        count = "cat /proc/[0-9]*/comm 2>/dev/null | grep -c '^sleep$' || true"
        after = box.run_command(["sh", "-c", count], timeout_s=30)
        assert after.stdout_tail.strip() == "0", after


@_check
def check_output_keeps_the_tail(c: Conformance) -> None:
    with c.box(output_limit_bytes=4096) as box:
        out = box.run_command(["sh", "-c", "seq 1 100000; echo THE-END"], timeout_s=60)
        assert out.exit_code == 0 and out.stdout_tail.endswith("THE-END\n"), out.stdout_tail[-100:]
        assert len(out.stdout_tail.encode()) <= 4096 and out.stdout_bytes > 4096 and out.output_truncated


@_check
def check_the_shell_tools_agents_run_see_files(c: Conformance) -> None:
    """The commands an agent CLI runs first in a workspace list and inspect files under every
    runtime, without an error on stderr: coreutils' ls and stat (statx with AT_NO_AUTOMOUNT,
    which gVisor before 2023 rejects; ``ls -l`` reads each entry's security.selinux, which
    gVisor 2024-07 answers with EBADF for a symlink and EACCES for an unreadable directory
    (``/root``): the runtime image's preloaded
    docker/runtime/gvisor_compat.c mends both), cp -a, du and find."""
    with c.box() as box:
        box.write_file("dir/a.txt", b"alpha\n")
        script = (
            "set -e; ln -s a.txt dir/link; ls -la / >/dev/null; ls -la dir; stat -c '%s %n' dir/a.txt; cp -a dir copy; "
            "du -s copy >/dev/null; find . -name a.txt | sort"
        )
        out = box.run_command(["sh", "-c", script], timeout_s=30)
        assert out.exit_code == 0 and not out.stderr_tail, out
        lines = out.stdout_tail.splitlines()
        assert any(line.endswith(" a.txt") for line in lines), out
        assert any(line.endswith(" link -> a.txt") for line in lines), out
        assert "6 dir/a.txt" in lines and lines[-2:] == ["./copy/a.txt", "./dir/a.txt"], out


@_check
def check_listing_shows_regular_files_only(c: Conformance) -> None:
    with c.box() as box:
        box.write_file("x/one.txt", b"1")
        box.write_file("two.txt", b"22")
        box.run_command(["ln", "-s", "/etc/passwd", "link"], timeout_s=30)
        listed = sorted((f.path, f.size_bytes) for f in box.list_files())
        assert listed == [("two.txt", 2), ("x/one.txt", 1)], listed


@_check
def check_kill_ends_a_running_call(c: Conformance) -> None:
    """``kill`` from another thread ends a blocked call: Cancelled when the rollout was
    cancelled, SandboxUnavailable otherwise; later calls fail the same way."""
    cancel = threading.Event()
    with c.fresh(cancel=cancel) as box:
        started = threading.Event()
        box.write_file("spin.py", b"import sys\nprint('spinning', flush=True)\nwhile True:\n    pass\n")
        box_error: list[BaseException] = []

        def spin() -> None:
            started.set()
            try:
                box.run_python("spin.py", timeout_s=120)
            except (Cancelled, SandboxUnavailable) as exc:
                box_error.append(exc)

        t = threading.Thread(target=spin)
        t.start()
        assert started.wait(30)
        cancel.set()
        box.kill()
        t.join(60)
        assert not t.is_alive() and box_error, box_error
        _raises((Cancelled, SandboxUnavailable), lambda: box.run_command(["true"], timeout_s=10))


@_check
def check_wall_time_bounds_every_call(c: Conformance) -> None:
    from skillopt.errors import RolloutTimeout

    with c.box(deadline=time.monotonic() + 1.0) as box:
        exc = _raises(RolloutTimeout, lambda: box.run_command(["sleep", "30"], timeout_s=30))
        assert "wall time" in str(exc), exc


@_check
def check_lifecycle(c: Conformance) -> None:
    """create → alive → lease → destroy; a destroyed sandbox is not alive; names are unique;
    the runtime reports which isolation it used."""
    runtime, spec = c.runtime, c.spec
    a, b = runtime.create(spec), runtime.create(spec)
    try:
        assert a.name != b.name and runtime.alive(a) and runtime.alive(b)
        assert a.image_digest and a.spec == spec and a.created_at > 0
        assert runtime.runtime_name(spec)
    finally:
        runtime.destroy(a)
    assert not runtime.alive(a)
    box = runtime.lease(b, "conformance/lifecycle")
    box.write_skill(SkillVersion(content="# skill\n"))
    out = box.run_command(["cat", "/skill/SKILL.md"], timeout_s=30)
    assert out.stdout_tail == "# skill\n", out
    runtime.kill(b)
    runtime.kill(b)  # twice: never raises
    runtime.destroy(b)
    runtime.destroy(b)


_PKG = SkillVersion(
    name="conformance-pkg",
    content="---\nname: conformance-pkg\ndescription: The conformance suite's package.\n---\n# Body\n",
    files=(
        SkillFile(path="references/notes.md", data=b"# Notes\n"),
        SkillFile(
            path="scripts/hello.sh", data=b'#!/bin/sh\necho "hello from the package $*"\n', executable=True
        ),
    ),
)


@_check
def check_a_skill_package_runs_read_only(c: Conformance) -> None:
    """A package is mounted read-only at the skill mounts and, as ``<name>/``, at the skills
    roots: a script runs from the mount with its executable bit, the sandbox's user can change
    nothing in it (write, create, remove, rename, chmod), and placing another package replaces
    it; a version placed again (by reference, where the runtime keeps versions) is the same."""
    runtime = c.runtime
    handle = runtime.create(replace(c.spec, skills_roots=EXEC_SKILLS_ROOTS))
    try:
        box = runtime.lease(handle, "conformance/package")
        box.write_skill(_PKG, version="conformance-pkg-v1")
        homes = ["/skill", *(f"{root}/{_PKG.name}" for root in EXEC_SKILLS_ROOTS)]
        for home in homes:
            out = box.run_command([f"{home}/scripts/hello.sh", "x"], timeout_s=30)
            assert out.exit_code == 0 and out.stdout_tail == "hello from the package x\n", (home, out)
            out = box.run_command(
                [
                    "stat",
                    "-c",
                    "%a %n",
                    f"{home}/SKILL.md",
                    f"{home}/scripts/hello.sh",
                    f"{home}/references/notes.md",
                ],
                timeout_s=30,
            )
            modes = [line.split(" ", 1)[0] for line in out.stdout_tail.splitlines()]
            assert modes == ["644", "755", "644"], (home, out)
        before = box.run_command(
            ["sh", "-c", "cd /skill && sha256sum SKILL.md scripts/* references/*"], timeout_s=30
        )
        assert before.exit_code == 0, before
        for home in homes:
            for argv in (
                ["sh", "-c", f"echo x >> {home}/SKILL.md"],
                ["sh", "-c", f"echo x > {home}/scripts/hello.sh"],
                ["touch", f"{home}/new.md"],
                ["mkdir", f"{home}/scripts/more"],
                ["rm", "-f", f"{home}/references/notes.md"],
                ["mv", f"{home}/scripts/hello.sh", f"{home}/hello.sh"],
                ["chmod", "777", f"{home}/scripts/hello.sh"],
                ["chmod", "755", f"{home}/references/notes.md"],
            ):
                out = box.run_command(argv, timeout_s=30)
                assert out.exit_code != 0, (argv, out)
        for root in EXEC_SKILLS_ROOTS:  # no other skill can be planted beside it
            out = box.run_command(["mkdir", f"{root}/planted"], timeout_s=30)
            assert out.exit_code != 0, out
        after = box.run_command(
            ["sh", "-c", "cd /skill && sha256sum SKILL.md scripts/* references/*"], timeout_s=30
        )
        assert after.stdout_tail == before.stdout_tail, (before, after)
        box.write_skill(SkillVersion(name="other", content="# one file\n"))
        out = box.run_command(
            ["sh", "-c", f"cat /skill/SKILL.md; ls /skill; ls {EXEC_SKILLS_ROOTS[0]}"], timeout_s=30
        )
        assert out.stdout_tail == "# one file\nSKILL.md\nother\n", out
        box.write_skill(_PKG, version="conformance-pkg-v1")  # placed before: by reference
        for home in homes:
            out = box.run_command(
                ["sh", "-c", f"{home}/scripts/hello.sh y && stat -c %a {home}/scripts/hello.sh"], timeout_s=30
            )
            assert out.stdout_tail == "hello from the package y\n755\n", (home, out)
        out = box.run_command(["touch", f"{homes[-1]}/scripts/hello.sh"], timeout_s=30)
        assert out.exit_code != 0, out
    finally:
        runtime.destroy(handle)


@_check
def check_configuration_errors_are_typed(c: Conformance) -> None:
    runtime, spec = c.runtime, c.spec
    _raises(ImageMissing, lambda: runtime.image_digest("skillopt-no-such-image:never"))
    _raises(ImageMissing, lambda: runtime.create(replace(spec, image="skillopt-no-such-image:never")))
    _raises(ConfigError, lambda: runtime.check_runtime("no-such-oci-runtime"))
    runtime.check_runtime("")  # the default always exists
    assert isinstance(runtime.runtime_has_network(""), bool)


@_check
def check_a_healthy_host_reports_no_problem(c: Conformance) -> None:
    # The host's health check asks these (never raising): an engine that answers and storage
    # with room say nothing; storage that cannot hold what is asked says why.
    assert c.runtime.engine_problem() == ""
    assert c.runtime.storage_problem(0) == ""
    problem = c.runtime.storage_problem(1 << 62)
    assert problem and "free" in problem, problem


@_check
def check_no_network_by_default(c: Conformance) -> None:
    assert c.spec.network_mode == "none"
    with c.box() as box:
        box.write_file(
            "net.py",
            b"import socket\ntry:\n    socket.create_connection(('1.1.1.1', 53), timeout=2)\n"
            b"    print('CONNECTED')\nexcept OSError:\n    print('blocked')\n",
        )
        out = box.run_python("net.py", timeout_s=30)
        assert out.stdout_tail == "blocked\n", out
