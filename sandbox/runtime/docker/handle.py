"""A created container as the Docker runtime holds it, and its memory cgroup on the host."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sandbox.runtime.base import SandboxHandle
from sandbox.runtime.docker.connection import RunnerConnection
from sandbox.runtime.runner.protocol import Hello

__all__ = ["ContainerHandle", "memory_cgroup"]


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


def memory_cgroup(pid: int) -> Path | None:
    """Host path of a process's memory cgroup (v1 ``memory`` controller or the v2 unified
    hierarchy). ``None`` when the host's /proc or /sys/fs/cgroup is not visible (the service
    runs in a container without them): the runner's own reading is used then."""
    if pid <= 0:
        return None
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            candidate = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
            if (candidate / "memory.oom_control").exists():
                return candidate
        if controllers == "":
            candidate = Path("/sys/fs/cgroup") / path.lstrip("/")
            if (candidate / "memory.events").exists():
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
