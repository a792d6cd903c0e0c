"""Container hardening defaults (DESIGN §4), each an option with a safe default."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace

from skillopt.errors import ConfigError
from skillopt.units import MiB

__all__ = [
    "DEFAULT_IMAGE",
    "EXEC_SKILLS_ROOTS",
    "ContainerSpec",
    "RuntimeConfig",
    "default_pool_size",
    "exec_runtime_choice",
    "net_sibling_of",
]

DEFAULT_IMAGE = "skillopt-runtime:latest"
#: Where agent CLIs discover skills (agent-clis.md §4-5): Codex in ``<cwd>/.agents/skills/``,
#: Claude Code in ``<cwd>/.claude/skills/``, each skill a folder ``<name>/``. A container's
#: skills folder is mounted read-only at each when it is created (mounts are fixed then, and
#: the warm pool creates containers before their rollout's skill is known); the rollout's
#: package appears in it as ``<name>/`` when it is placed, host side, at lease time.
EXEC_SKILLS_ROOTS = ("/workspace/.agents/skills", "/workspace/.claude/skills")


@dataclass(frozen=True, kw_only=True)
class ContainerSpec:
    """How one rollout container is created. Two equal specs share a warm pool.

    Every field defaults to the hardened setting; loosening one is an explicit choice.
    """

    image: str = DEFAULT_IMAGE
    #: Numeric ``uid:gid``; never root.
    user: str = "1000:1000"
    #: ``none``: no network at all. Exec agents use an internal network to the gateway only.
    network_mode: str = "none"
    read_only_root: bool = True
    memory_bytes: int = 1024 * MiB
    #: CPU share as a fraction of cores (``nano_cpus`` = cpus × 1e9).
    cpus: float = 1.0
    pids_limit: int = 256
    nofile: int = 1024
    #: Largest file a process may write (RLIMIT_FSIZE).
    fsize_bytes: int = 256 * MiB
    tmp_size_bytes: int = 256 * MiB
    workspace_size_bytes: int = 512 * MiB
    #: Inodes of the /tmp and workspace tmpfs. Unset, a tmpfs allows half the host's RAM pages
    #: in inodes, and each costs ~1 KiB of kernel memory charged to the container: a program
    #: creating empty files ran past its timeout toward an OOM kill instead of getting a clean
    #: ENOSPC (hostile suite, inode_exhaustion).
    tmp_inodes: int = 16384
    workspace_inodes: int = 32768
    #: Programs may be executed from the workspace (its tmpfs without ``noexec``): code runs of
    #: compiled languages run the binary they built there. Off for rollouts and sessions.
    workspace_exec: bool = False
    shm_size_bytes: int = 64 * MiB
    #: Docker's ``--init``. Off by default because the runner itself is a proper init: as PID 1
    #: it reaps every orphan, and the kernel drops signals sent to a namespace's init from inside
    #: it, so LLM-written code cannot kill its runner (which would turn its own failure into an
    #: infrastructure error, or stop the container). Turn on only to debug the runner.
    docker_init: bool = False
    #: OCI runtime, e.g. ``runsc`` for gVisor; empty = the engine default (runc).
    runtime: str = ""
    #: Modules the runner imports before work arrives, so each execution skips them.
    preimport: tuple[str, ...] = ("openpyxl",)
    #: Modules the runner imports (once, before forking) only when a program it runs mentions
    #: them. pandas is ~0.2 s of CPU per container, a third of a container's cost, and most
    #: spreadsheet programs never import it.
    import_on_demand: tuple[str, ...] = ("openpyxl", "pandas")
    #: Extra environment for the runner and every process it starts. Never secrets.
    env: Mapping[str, str] = field(default_factory=dict)
    #: Container paths where the rollout's skill package is mounted read-only (its SKILL.md
    #: at ``<path>/SKILL.md``).
    skill_mounts: tuple[str, ...] = ("/skill",)
    #: Container paths where a skills folder is mounted read-only, showing the rollout's
    #: package as ``<path>/<name>/`` (:data:`EXEC_SKILLS_ROOTS` for agent CLIs); empty: none.
    skills_roots: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        uid = self.user.split(":", 1)[0]
        if not uid.isdigit() or int(uid) == 0:
            raise ConfigError(f"container user must be a numeric non-root uid[:gid], got {self.user!r}")
        if self.memory_bytes < 32 * MiB:
            raise ConfigError(f"memory_bytes must be at least 32 MiB, got {self.memory_bytes}")
        if not 0 < self.cpus <= 256:
            raise ConfigError(f"cpus must be in (0, 256], got {self.cpus}")
        if self.pids_limit < 16:
            raise ConfigError(f"pids_limit must be at least 16, got {self.pids_limit}")
        if min(self.tmp_inodes, self.workspace_inodes) < 64:
            raise ConfigError("tmp_inodes and workspace_inodes must be at least 64")
        for key in self.env:
            if any(word in key.upper() for word in ("KEY", "TOKEN", "SECRET", "PASSWORD")):
                raise ConfigError(f"refusing to pass {key!r} into a rollout container: no secrets inside")

    def with_limits(self, *, memory_bytes: int | None = None, cpus: float | None = None) -> ContainerSpec:
        """This spec with per-rollout limits applied (``None`` keeps the current value)."""
        if not memory_bytes and not cpus:
            return self
        return replace(
            self,
            memory_bytes=int(memory_bytes) if memory_bytes else self.memory_bytes,
            cpus=float(cpus) if cpus else self.cpus,
        )

    @property
    def key(self) -> str:
        """Stable short identifier of this spec (pool key and container label)."""
        raw = json.dumps(asdict(self), sort_keys=True, default=list)
        return hashlib.sha256(raw.encode()).hexdigest()[:12]


@dataclass(frozen=True, kw_only=True)
class RuntimeConfig:
    """Host-level runtime settings."""

    #: Identifies this sandbox host; containers carry it as a label for the reaper.
    host_id: str
    #: Host directory for per-container control/skill dirs and the runner copy. When the
    #: service itself runs in a container this must be the same path on the host.
    state_dir: str
    #: Idle pre-started containers kept per active spec.
    pool_size: int = 4
    #: Cap on containers being created at once (concurrent ``docker run`` degrades badly).
    max_concurrent_creations: int = 2
    #: Warm refills (never a creation a rollout is waiting for) and removals of used containers
    #: start this long after the last container was taken, and at most 5x this after the
    #: first: a burst of rollout starts does not share the CPU with them.
    refill_delay_s: float = 0.2
    #: How long the runner may take to connect after start.
    start_timeout_s: float = 60.0
    #: Hard lifetime of any container; the reaper removes it afterwards whatever happens.
    max_container_lifetime_s: float = 6 * 3600.0
    #: Idle containers older than this are replaced with fresh ones.
    max_idle_s: float = 3600.0
    #: A spec's pool stops refilling when it has not been used for this long.
    pool_idle_ttl_s: float = 900.0
    #: How often the background reaper runs.
    reap_interval_s: float = 60.0
    #: Most specs that keep warm containers at once (the most recently used ones, plus the
    #: prewarmed default): a pool exists per distinct memory/CPU limit, and a token holder
    #: sending many distinct limits must not make the host keep a pool for each.
    max_warm_pools: int = 3
    #: Most idle containers over all pools (0: ``2 × pool_size``). Containers being created for a
    #: waiting rollout do not count: those are bounded by the host's capacity.
    max_idle_containers: int = 0
    docker_base_url: str = ""
    #: A container goes back to its tenant's pool after an execution (a rollout, a session's
    #: end, a code run), reset to a verified clean slate, until it has served this many
    #: executions; 0: never reused (every execution gets a fresh container). See
    #: ``docs/recycling.md``.
    reuse_max_executions: int = 64
    #: ... and only while younger than this (seconds since its creation; never beyond
    #: ``max_container_lifetime_s``, after which the reaper removes it whatever happens).
    reuse_max_age_s: float = 600.0

    def __post_init__(self) -> None:
        if not self.host_id or not all(c.isalnum() or c in "-_." for c in self.host_id):
            raise ConfigError(f"host_id must be non-empty [A-Za-z0-9._-], got {self.host_id!r}")
        if self.pool_size < 0 or self.max_concurrent_creations < 1:
            raise ConfigError("pool_size must be >= 0 and max_concurrent_creations >= 1")
        if not 0 <= self.refill_delay_s <= 60:
            raise ConfigError(f"refill_delay_s must be in [0, 60], got {self.refill_delay_s}")
        if self.max_warm_pools < 1 or self.max_idle_containers < 0:
            raise ConfigError("max_warm_pools must be >= 1 and max_idle_containers >= 0")
        if self.reuse_max_executions < 0:
            raise ConfigError(
                f"reuse_max_executions must be >= 0 (0: never reuse), got {self.reuse_max_executions}"
            )
        if not self.reuse_max_age_s > 0:
            raise ConfigError(f"reuse_max_age_s must be above 0, got {self.reuse_max_age_s}")

    @property
    def idle_cap(self) -> int:
        """Most idle containers kept over all pools."""
        return self.max_idle_containers or 2 * self.pool_size


def exec_runtime_choice(
    base_runtime: str, *, has_network: bool, required: bool, net_sibling: str = ""
) -> tuple[str, str]:
    """The OCI runtime exec agents run under, and why they cannot run at all ("" if they can).

    Exec agents (and sessions on the gateway network) need the gateway network. A runtime
    registered without networking (gVisor with ``--network=none``) cannot give them one: they run
    under its networked sibling ``net_sibling`` when the engine has one (``runsc-net``: gVisor
    with its own network stack, ``scripts/setup.sh --gvisor`` registers it), else they fall back
    to the engine default ("") — which results and Describe then report — unless the host
    requires its runtime, in which case they are refused.
    """
    if has_network or not base_runtime:
        return base_runtime, ""
    if net_sibling:
        return net_sibling, ""
    if required:
        return base_runtime, (
            f"cannot run under the required container runtime {base_runtime!r}: it needs the gateway "
            f"network and {base_runtime!r} is registered without networking (and no {base_runtime}-net "
            "runtime is registered: bash scripts/setup.sh --gvisor)"
        )
    return "", ""


def net_sibling_of(base_runtime: str, available: tuple[str, ...]) -> str:
    """The networked sibling of runtime ``base_runtime`` by name (``runsc`` -> ``runsc-net``), or
    "" when the engine has none."""
    name = f"{base_runtime}-net"
    return name if base_runtime and name in available else ""


#: Warm containers per host slot by default under gVisor. A gVisor container takes about twice
#: as long to start as a runc one here (``docker run true`` ~2.0 vs ~1.0 s, bench/README.md):
#: after a wave of ``capacity`` rollouts empties the pool, refilling it takes
#: ``capacity / max_concurrent_creations`` starts, ~8 s at 8 slots instead of ~4 s, longer than
#: the next wave of short rollouts waits. A second wave's worth of idle containers keeps that
#: wave warm too; each idle gVisor container holds ~50 MiB (its kernel and gofer included).
GVISOR_POOL_PER_SLOT = 2


def default_pool_size(capacity: int, runtime: str) -> int:
    """Idle warm containers per spec when none is configured: the host's ``capacity`` (one wave
    of rollouts starts warm), :data:`GVISOR_POOL_PER_SLOT` times that under gVisor (``runsc``
    and its registered variants, e.g. ``runsc-net``), whose containers start slower."""
    return capacity * (GVISOR_POOL_PER_SLOT if runtime.startswith("runsc") else 1)
