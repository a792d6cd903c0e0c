"""A created container as the Docker runtime holds it, and its memory cgroup on the host."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sandbox.runtime.base import SandboxHandle
from sandbox.runtime.docker.connection import RunnerConnection
from sandbox.runtime.runner.protocol import Hello

__all__ = ["ContainerHandle", "memory_cgroup", "pids_cgroup"]


@dataclass(eq=False, kw_only=True)
class ContainerHandle(SandboxHandle):
    """One created container and everything the service holds for it."""

    #: The engine's container id.
    id: str
    #: Its host directory in the state dir (control socket, skill, lease file).
    dir: Path
    conn: RunnerConnection
    #: What its runner said when it connected.
    hello: Hello
    #: Its memory cgroup on the host (``None``: not visible; the runner's reading is used).
    memory_cgroup: Path | None
    #: Its pids cgroup on the host (``None``: not visible, or not the container's own
    #: processes: under gVisor it counts the sandbox kernel's).
    pids_cgroup: Path | None = None
    #: A skill package was placed in its folders since its last reset.
    skill_placed: bool = False

    @property
    def skill_dir(self) -> Path:
        """The package, mounted at the spec's ``skill_mounts``."""
        return self.dir / "skill"

    @property
    def skills_dir(self) -> Path:
        """The skills folder (the package as ``<name>/``), mounted at ``skills_roots``."""
        return self.dir / "skills"

    def oom_kills(self) -> int | None:
        """The container's OOM-kill counter, read from its memory cgroup on the host (``None``
        when the service cannot see it)."""
        return None if self.memory_cgroup is None else _read_oom_kill(self.memory_cgroup)

    def processes(self) -> int | None:
        """Processes (tasks) in the container, from its pids cgroup on the host (``None`` when
        the service cannot see it)."""
        if self.pids_cgroup is None:
            return None
        try:
            return int((self.pids_cgroup / "pids.current").read_text())
        except (OSError, ValueError):
            return None


def memory_cgroup(pid: int) -> Path | None:
    """Host path of a process's memory cgroup (v1 ``memory`` controller or the v2 unified
    hierarchy). ``None`` when the host's /proc or /sys/fs/cgroup is not visible (the service
    runs in a container without them): the runner's own reading is used then."""
    return _cgroup(pid, "memory", ("memory.oom_control", "memory.events"))


def pids_cgroup(pid: int) -> Path | None:
    """Host path of a process's pids cgroup (v1 ``pids`` controller or the v2 unified
    hierarchy); ``None`` when not visible."""
    return _cgroup(pid, "pids", ("pids.current",))


def _cgroup(pid: int, controller: str, probes: tuple[str, ...]) -> Path | None:
    """Host path of ``pid``'s cgroup for ``controller`` (v1) or of its unified (v2) cgroup,
    whichever holds one of the ``probes`` files."""
    if pid <= 0:
        return None
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            root = Path("/sys/fs/cgroup") / controller
        elif controllers == "":
            root = Path("/sys/fs/cgroup")
        else:
            continue
        candidate = root / path.lstrip("/")
        if any((candidate / probe).exists() for probe in probes):
            return candidate
    return None


def _read_oom_kill(cgroup: Path) -> int | None:
    for name in ("memory.events", "memory.oom_control"):
        try:
            text = (cgroup / name).read_text()
        except OSError:
            continue
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    return None
