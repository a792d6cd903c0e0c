"""The seam between two executions of one tenant, as data (issue 47; ``docs/recycling.md``).

Container recycling gives a tenant's next rollout the container its last one used, reset to a
verified clean slate. Each :class:`Seam` is a program that tries to leave something for that
next rollout or to make its verdict wrong; ``tests/sandbox/test_hostile_programs.py`` runs it
as a full rollout over gRPC and then :data:`PROBE` as the same tenant's next rollout, which must
see nothing of it and be graded as if it ran in a new container.

Both programs report which container they ran in, so the test knows whether the probe ran in
the recycled container (the reset held) or in another one (the reset refused: ``reuse`` False).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = ["PROBE", "SEAM", "Seam"]

# Shared by both sides: how a program names its container and reports.
_PRELUDE = """\
import ctypes, errno, fcntl, json, os, resource, signal, subprocess, sys, time
def container():
    # The engine's id of the container (its cgroup, as mounted), the device of its workspace
    # and the start time of its PID 1: together unique to one container (alone, the last is not:
    # under gVisor every init starts at the same tick of its own sandbox).
    cgroup = [l.split()[3] for l in open("/proc/self/mountinfo") if l.split()[4] == "/sys/fs/cgroup/memory"]
    with open("/proc/1/stat") as fh:
        start = fh.read().rsplit(")", 1)[1].split()[19]
    return f"{cgroup[:1]}:{os.stat('/workspace').st_dev}:{start}"
def report(**kw):
    print("REPORT " + json.dumps({"container": container(), **kw}, sort_keys=True), flush=True)
"""

#: What the next rollout of the tenant sees. Everything it reports must hold whatever ran
#: before it in the container (see ``CLEAN``).
PROBE = _PRELUDE + textwrap.dedent(
    r"""
    me = os.getpid()
    procs = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me)]
    planted = []
    for place in ("/tmp", "/dev/shm", "/dev/mqueue"):
        if os.path.isdir(place):
            planted += [f"{place}/{n}" for n in os.listdir(place)]
    for dirpath, dirs, files in os.walk("/workspace"):
        for name in files + dirs:
            path = os.path.join(dirpath, name)
            if "seam" in name or name in ("json.py", "sitecustomize.py", ".bashrc", ".profile", "output.xlsx") and dirpath == "/workspace":
                planted.append(path)
    buf = ctypes.create_string_buffer(512)
    libc = ctypes.CDLL(None)
    libc.shmctl(0, 14, buf); shm = __import__("struct").unpack_from("@iL", buf.raw)[1]  # SHM_INFO: pages
    libc.semctl(0, 0, 19, buf); sem = __import__("struct").unpack_from("@10i", buf.raw)[7]  # SEM_INFO: sets
    libc.msgctl(0, 12, buf); msg = __import__("struct").unpack_from("@i", buf.raw)[0]  # MSG_INFO: queues
    ipc = {"shm": shm, "sem": sem, "msg": msg}
    room = {}
    for place, size in (("/tmp", 128 << 20), ("/dev/shm", 32 << 20), ("/workspace", 128 << 20)):
        path = f"{place}/probe-room"
        try:
            with open(path, "wb") as fh:
                chunk = b"\0" * (1 << 20)
                for _ in range(size >> 20):
                    fh.write(chunk)
            room[place] = "ok"
        except OSError as exc:
            room[place] = errno.errorcode.get(exc.errno, str(exc.errno))
        finally:
            if os.path.exists(path):
                os.unlink(path)
    lock = open("/tmp/seam-lock-probe", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        locked = "free"
    except OSError:
        locked = "held"
    lock.close(); os.unlink("/tmp/seam-lock-probe")
    import json as json_module
    report(
        procs=procs,
        planted=sorted(planted),
        ipc=ipc,
        room=room,
        lock=locked,
        nofile=resource.getrlimit(resource.RLIMIT_NOFILE)[0],
        nice=os.getpriority(os.PRIO_PROCESS, 0),
        runner_nice=os.getpriority(os.PRIO_PROCESS, 1),
        cpus=len(os.sched_getaffinity(0)),
        json_from=os.path.dirname(json_module.__file__),
        shell_env=subprocess.run(["sh", "-c", "echo $SEAM_POISON"], capture_output=True, text=True).stdout.strip(),
        umask=oct(os.umask(0o022)),
    )
    """
)

#: The probe's report after a clean seam (``container``, ``nofile``, ``cpus`` and ``json_from``
#: are compared with a probe run first, in a fresh container: see the test).
CLEAN: dict[str, Any] = {
    "procs": [],
    "planted": [],
    "ipc": {"shm": 0, "sem": 0, "msg": 0},
    "room": {"/tmp": "ok", "/dev/shm": "ok", "/workspace": "ok"},
    "lock": "free",
    "nice": 0,
    "runner_nice": 0,
    "shell_env": "",
    "umask": "0o22",
}


@dataclass(frozen=True)
class Seam:
    """One program that tries to reach the tenant's next rollout through the recycled container.

    Attributes:
        name: test id.
        code: the program (its prelude is prepended; it must end with ``report(...)``).
        reuse: whether the probe must run in the same container (the reset holds: True) or in
            another one (the reset must refuse it: False).
        infra: the program's own rollout ends with this typed infrastructure error ("" = it
            ends normally and reports); its container is then never reused.
        runsc: fields that differ under gVisor, with the reason at the program.
    """

    name: str
    code: str
    reuse: bool = True
    infra: str = ""
    runsc: dict[str, Any] = field(default_factory=dict)

    def under(self, runtime: str) -> Seam:
        return replace(self, **self.runsc) if runtime.startswith("runsc") else self

    def program(self) -> str:
        return _PRELUDE + textwrap.dedent(self.code)


SEAM: tuple[Seam, ...] = (
    Seam(
        "daemon_in_its_own_session",
        # Double-forked, in a new session and process group, ignoring SIGTERM and SIGHUP, with a
        # stopped sibling: all of it must be gone before the next rollout.
        """
        daemon = "import signal, time\\nfor s in (signal.SIGTERM, signal.SIGHUP):\\n    signal.signal(s, signal.SIG_IGN)\\ntime.sleep(3600)\\n"
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execvp(sys.executable, [sys.executable, "-c", daemon])
            os._exit(0)
        stopped = subprocess.Popen(["sleep", "3600"], start_new_session=True)
        os.kill(stopped.pid, signal.SIGSTOP)
        report(left="daemon")
        """,
    ),
    Seam(
        "files_in_every_writable_place",
        # Dotfiles a shell reads, a module that would shadow the standard library for a program
        # started in the workspace, a folder locked against its own owner, a FIFO, a file
        # unlinked while a process keeps it open.
        """
        for place in ("/tmp", "/dev/shm", os.environ["HOME"], "/workspace"):
            with open(os.path.join(place, "seam-file"), "w") as fh:
                fh.write("left behind")
        open("/workspace/json.py", "w").write("raise SystemExit('poisoned json')\\n")
        open("/workspace/sitecustomize.py", "w").write("import os; os.environ['SEAM_POISON'] = '1'\\n")
        open("/workspace/.bashrc", "w").write("export SEAM_POISON=1\\n")
        open("/workspace/.profile", "w").write("export SEAM_POISON=1\\n")
        os.makedirs("/workspace/seam-locked/a/b", exist_ok=True)
        open("/workspace/seam-locked/a/b/c", "w").write("deep")
        os.chmod("/workspace/seam-locked", 0)
        os.mkfifo("/tmp/seam-fifo")
        os.symlink("/etc/passwd", "/tmp/seam-link")
        report(left="files")
        """,
    ),
    Seam(
        "ipc_objects_and_a_held_lock",
        # System V shared memory, a semaphore set and a message queue (they outlive every
        # process), POSIX shared memory in /dev/shm, a lock held by a daemon.
        """
        libc = ctypes.CDLL(None, use_errno=True)
        ids = [libc.shmget(0x5EA1, 1 << 20, 0o1666), libc.semget(0x5EA2, 4, 0o1666), libc.msgget(0x5EA3, 0o1666)]
        fd = os.open("/dev/shm/seam-posix-shm", os.O_CREAT | os.O_RDWR, 0o600)
        os.ftruncate(fd, 1 << 20)
        libc.mq_open.restype = ctypes.c_int
        queue = libc.mq_open(b"/seam-queue", os.O_CREAT | os.O_RDWR, 0o600, None)  # in /dev/mqueue
        holder = "import fcntl, time\\nfh = open('/tmp/seam-lock-probe', 'w')\\nfcntl.flock(fh, fcntl.LOCK_EX)\\ntime.sleep(3600)\\n"
        subprocess.Popen([sys.executable, "-c", holder], start_new_session=True)
        time.sleep(0.3)
        report(left="ipc", ids=[i >= 0 for i in ids], queue=queue >= 0)
        """,
    ),
    Seam(
        "the_runner_tampered_with",
        # What a process of the runner's uid can try on it: write its code (a read-only mount),
        # its memory (it is not dumpable), trace it; and what it can do: lower its soft limits,
        # move its CPU affinity, lower its I/O priority. The reset puts those back, and the next
        # rollout inherits none of them.
        """
        tried = {}
        for path in ("/opt/skillopt/serve.py", "/proc/1/mem"):
            try:
                open(path, "r+b").write(b"x")
                tried[path] = "allowed"
            except OSError as exc:
                tried[path] = errno.errorcode.get(exc.errno, str(exc.errno))
        libc = ctypes.CDLL(None, use_errno=True)
        tried["ptrace"] = "allowed" if libc.ptrace(16, 1, None, None) == 0 else errno.errorcode.get(ctypes.get_errno(), "?")
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.prlimit(1, resource.RLIMIT_NOFILE, (32, hard))
        os.sched_setaffinity(1, {sorted(os.sched_getaffinity(0))[0]})
        if os.uname().machine == "x86_64":
            libc.syscall(251, 1, 1, 3 << 13)  # ioprio_set(IOPRIO_WHO_PROCESS, 1, the idle class)
        report(left="runner", tried=tried)
        """,
    ),
    Seam(
        "the_runner_signalled",
        # PID 1 of a PID namespace only gets the signals it handles: SIGKILL, SIGTERM and
        # SIGSTOP from the program are dropped, and the runner serves the next rollout as ever.
        """
        for sig in (signal.SIGSTOP, signal.SIGTERM, signal.SIGKILL):
            try:
                os.kill(1, sig)
            except OSError:
                pass
        time.sleep(0.2)
        report(left="signals", runner_state=open("/proc/1/stat").read().rsplit(")", 1)[1].split()[0])
        """,
        # gVisor does not shield a namespace's init from its own namespace's SIGKILL (the
        # hostile suite's kill program says so too): the runner dies, the program's rollout is
        # a lost container, and the probe gets another one.
        runsc={"reuse": False, "infra": "sandbox_unavailable"},
    ),
    Seam(
        "the_runner_slowed_down",
        # Raising the runner's nice value is allowed to a process of its uid and cannot be
        # undone without CAP_SYS_NICE: the reset must refuse the container.
        """
        os.setpriority(os.PRIO_PROCESS, 1, 19)
        report(left="nice", runner_nice=os.getpriority(os.PRIO_PROCESS, 1))
        """,
        reuse=False,
    ),
    Seam(
        "every_tmpfs_filled",
        # /tmp, /dev/shm and the workspace filled to their limits (the next rollout needs
        # room), one file kept open by a daemon after its unlink (room a listing cannot see).
        """
        for place in ("/tmp", "/dev/shm", "/workspace"):
            try:
                with open(f"{place}/seam-fill", "wb") as fh:
                    while True:
                        fh.write(b"\\0" * (1 << 20))
            except OSError:
                pass
        keeper = "import os, time\\nfh = open('/tmp/seam-held', 'wb')\\nos.unlink('/tmp/seam-held')\\ntime.sleep(3600)\\n"
        subprocess.Popen([sys.executable, "-c", keeper], start_new_session=True)
        report(left="full")
        """,
    ),
    Seam(
        "the_expected_output_written_early",
        # An output for every case of the next rollout, and at the workspace's root, before the
        # next program runs: its rollout must still be graded on what it writes itself.
        """
        import glob, shutil
        for case in glob.glob("/workspace/**/input.xlsx", recursive=True):
            folder = os.path.dirname(case)
            shutil.copy(case, os.path.join(folder, "output.xlsx"))
            shutil.copy(case, os.path.join(folder, "seam-output-copy.xlsx"))
        shutil.copy(glob.glob("/workspace/**/input.xlsx", recursive=True)[0], "/workspace/output.xlsx")
        report(left="outputs")
        """,
    ),
)
