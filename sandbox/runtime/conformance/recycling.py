"""Checks of :meth:`SandboxRuntime.reset`: a used sandbox comes back as a verified clean slate,
or the reset refuses it. Each check leaves something behind in a sandbox of its own, resets it,
leases it again and probes from inside: the probe must see nothing of what came before."""

from __future__ import annotations

import json

from sandbox.runtime.base import SandboxHandle, Sweep
from sandbox.runtime.conformance.core import Conformance, _check, _raises
from sandbox.runtime.conformance.sessions import _stream
from skillopt.errors import SandboxResetFailed
from skillopt.types import SkillFile, SkillVersion

#: A program that leaves all it can for the next execution: files in every writable place (one
#: in a folder it locked itself out of), a daemon in its own session that ignores SIGTERM and
#: holds a lock, a stopped process, System V IPC objects of each kind, a POSIX message queue
#: where the kernel offers them, a file kept open after its unlink.
LEAVE_BEHIND = r"""
import ctypes, fcntl, os, signal, subprocess, sys, time
for place in ("/workspace", "/tmp", "/dev/shm", os.environ.get("HOME", "/workspace")):
    with open(os.path.join(place, "left-behind"), "w") as fh:
        fh.write("x" * 4096)
os.makedirs("/workspace/locked/inner", exist_ok=True)
open("/workspace/locked/inner/deep", "w").write("deep")
os.chmod("/workspace/locked", 0)
libc = ctypes.CDLL(None, use_errno=True)
ipc = [libc.shmget(0x5150, 65536, 0o1666), libc.semget(0x5151, 1, 0o1666), libc.msgget(0x5152, 0o1666)]
try:
    os.mkfifo("/tmp/fifo")
except OSError:
    pass
daemon = r'''
import fcntl, os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
fh = open("/tmp/lock", "w"); fcntl.flock(fh, fcntl.LOCK_EX)
held = open("/tmp/unlinked", "w"); held.write("y" * 65536); held.flush(); os.unlink("/tmp/unlinked")
if os.fork() == 0:
    os.setsid(); time.sleep(3600)
time.sleep(3600)
'''
subprocess.Popen([sys.executable, "-c", daemon], start_new_session=True)
stopped = subprocess.Popen(["sleep", "3600"], start_new_session=True)
os.kill(stopped.pid, signal.SIGSTOP)
time.sleep(0.5)  # the daemon took its lock and unlinked its file
print("LEFT", ipc, flush=True)
"""

#: What the next execution sees: other processes, anything in a writable place, IPC objects,
#: each place's used room (0 blocks: nothing hidden, nothing unlinked and still open).
PROBE = r"""
import json, os
me = os.getpid()
procs = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me)]
seen = {}
for place in ("/workspace", "/tmp", "/dev/shm"):
    names = sorted(os.listdir(place))
    vfs = os.statvfs(place)
    seen[place] = {"names": names, "used_blocks": vfs.f_blocks - vfs.f_bfree}
import ctypes, struct
libc, buf = ctypes.CDLL(None), ctypes.create_string_buffer(512)
libc.shmctl(0, 14, buf); shm = struct.unpack_from("@iL", buf.raw)[1]  # SHM_INFO: pages in use
libc.semctl(0, 0, 19, buf); sem = struct.unpack_from("@10i", buf.raw)[7]  # SEM_INFO: sets
libc.msgctl(0, 12, buf); msg = struct.unpack_from("@i", buf.raw)[0]  # MSG_INFO: queues
ipc = {"shm": shm, "sem": sem, "msg": msg}
print("PROBE " + json.dumps({"procs": procs, "places": seen, "ipc": ipc, "nofile": __import__("resource").getrlimit(__import__("resource").RLIMIT_NOFILE)[0], "nice": os.getpriority(os.PRIO_PROCESS, 0)}))
"""


def _probe(c: Conformance, handle: SandboxHandle) -> dict:
    box = c.runtime.lease(handle, "session/conformance-probe", output_limit_bytes=1 << 20)
    out, got = _stream(box, ["python3", "-c", PROBE])
    text = bytes(got.out[1]).decode()
    assert out.exit_code == 0, (out, text, bytes(got.out[2])[-2000:])
    return json.loads(text.split("PROBE ", 1)[1])


def _clean(report: dict) -> None:
    """The probe's report of a clean slate (nothing in any place, no process, no IPC object)."""
    assert report["procs"] == [], report
    for place, seen in report["places"].items():
        assert seen["names"] == [], (place, report)
        assert seen["used_blocks"] == 0, (place, report)
    assert report["ipc"] == {"shm": 0, "sem": 0, "msg": 0}, report


@_check
def check_a_reset_leaves_a_verified_clean_slate(c: Conformance) -> None:
    """A session's execution leaves files everywhere, a locked folder, a daemon holding a lock
    and an unlinked file, a stopped process, System V IPC objects; after :meth:`reset` the next
    execution sees none of it, and its places have all their room."""
    with c.own() as handle:
        box = c.runtime.lease(handle, "session/conformance", output_limit_bytes=1 << 20)
        out, got = _stream(box, ["python3", "-c", LEAVE_BEHIND], sweep=Sweep.ON_KILL)
        assert out.exit_code == 0 and b"LEFT" in got.out[1], (out, bytes(got.out[2])[-2000:])
        report = c.runtime.reset(handle)
        assert report.files_removed >= 5, report
        _clean(_probe(c, handle))
        again = c.runtime.reset(handle)  # and a reset of a clean sandbox finds nothing to do
        assert (again.files_removed, again.ipc_removed) == (0, 0), again


@_check
def check_a_spoiled_sandbox_is_never_reset(c: Conformance) -> None:
    """An execution that timed out spoils its sandbox: the reset refuses it (the pool then
    destroys it), whatever state it is in."""
    with c.own() as handle:
        box = c.runtime.lease(handle, "session/conformance", output_limit_bytes=1 << 20)
        out, _ = _stream(box, ["sleep", "30"], timeout_s=0.5)
        assert out.timed_out, out
        assert handle.taint == "timeout", handle.taint
        exc = _raises(SandboxResetFailed, lambda: c.runtime.reset(handle))
        assert isinstance(exc, SandboxResetFailed) and exc.reason == "spoiled", exc


@_check
def check_a_reset_puts_back_or_refuses_what_a_program_did_to_the_runner(c: Conformance) -> None:
    """A program of the runner's uid may lower the runner's soft limits (``prlimit``) or its
    priority (``nice``): the reset puts back what it can (the limit), refuses what it cannot
    (a raised nice value), and the next execution never inherits either."""
    lower_nofile = (
        "import resource\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "print(resource.prlimit(1, resource.RLIMIT_NOFILE, (64, hard)))\n"
    )
    with c.own() as handle:
        box = c.runtime.lease(handle, "session/conformance", output_limit_bytes=1 << 20)
        _stream(box, ["python3", "-c", lower_nofile])
        try:
            c.runtime.reset(handle)
        except SandboxResetFailed as refused:  # a runtime may refuse rather than restore
            assert refused.reason == "runner", refused
        else:
            assert _probe(c, handle)["nofile"] == c.spec.nofile
    renice = "import os\nos.setpriority(os.PRIO_PROCESS, 1, 10)\nprint(os.getpriority(os.PRIO_PROCESS, 1))\n"
    with c.own() as handle:
        box = c.runtime.lease(handle, "session/conformance", output_limit_bytes=1 << 20)
        out, got = _stream(box, ["python3", "-c", renice])
        if out.exit_code == 0 and got.out[1].strip() == b"10":  # the runtime let it happen
            exc = _raises(SandboxResetFailed, lambda: c.runtime.reset(handle))
            assert isinstance(exc, SandboxResetFailed) and exc.reason == "runner", exc
        else:
            c.runtime.reset(handle)
            assert _probe(c, handle)["nice"] == 0


@_check
def check_a_reset_empties_the_skill_folders(c: Conformance) -> None:
    """A skill package placed for one execution is gone after the reset (the next execution
    gets its own, or none)."""
    skill = SkillVersion(
        name="conformance-skill",
        content="---\nname: conformance-skill\ndescription: a check\n---\n# body\n",
        files=(SkillFile(path="scripts/run.sh", data=b"#!/bin/sh\necho hi\n", executable=True),),
    )
    with c.own() as handle:
        box = c.runtime.lease(handle, "session/conformance", output_limit_bytes=1 << 20)
        box.write_skill(skill)
        _, got = _stream(box, ["ls", "-A", "/skill"])
        assert sorted(got.out[1].split()) == [b"SKILL.md", b"scripts"], got.out
        c.runtime.reset(handle)
        box = c.runtime.lease(handle, "session/conformance", output_limit_bytes=1 << 20)
        _, got = _stream(box, ["ls", "-A", "/skill"])
        assert got.out[1].split() == [], got.out
