"""A sandbox host's policy for rollouts (:class:`ServiceConfig`, with the default and maximum
limits of a rollout) and for sessions (:class:`SessionConfig`): plain data, imported by the
service, its validation and its admission control."""

from __future__ import annotations

from dataclasses import dataclass, field

from sandbox.runtime.spec import ContainerSpec
from skillopt.errors import ConfigError
from skillopt.grader_pool import default_workers
from skillopt.skill.package import PackageLimits
from skillopt.types import Limits
from skillopt.units import MiB

__all__ = ["DEFAULT_LIMITS", "MAX_LIMITS", "ServiceConfig", "SessionConfig"]

DEFAULT_LIMITS = Limits(
    wall_time_s=600.0,
    max_turns=30,
    exec_timeout_s=120.0,
    memory_bytes=1024 * MiB,
    cpus=1.0,
    output_bytes=64 * 1024,
)
MAX_LIMITS = Limits(
    wall_time_s=3 * 3600.0,
    max_turns=200,
    exec_timeout_s=1800.0,
    memory_bytes=16 * 1024 * MiB,
    cpus=8.0,
    output_bytes=4 * MiB,
)


@dataclass(frozen=True, kw_only=True)
class ServiceConfig:
    """Host policy for rollouts."""

    host_id: str
    #: Maximum concurrent rollouts (further Runs get RESOURCE_EXHAUSTED).
    capacity: int = 4
    default_limits: Limits = DEFAULT_LIMITS
    max_limits: Limits = MAX_LIMITS
    #: Largest single input/gold file accepted.
    max_file_bytes: int = 32 * MiB
    #: Largest request accepted (all files together).
    max_request_bytes: int = 64 * MiB
    #: Largest skill accepted (its SKILL.md).
    max_skill_bytes: int = 1 * MiB
    #: Most files (SKILL.md included) and bytes of one skill package this host mounts
    #: (``skillopt serve --skill-max-files / --skill-max-mb``); Describe reports them.
    #: ``max_files=0``: no packages (SKILL.md alone, as hosts before packages).
    package_limits: PackageLimits = field(default_factory=PackageLimits)
    #: Memory for content-addressed request files kept between rollouts (all tokens together,
    #: least recently used out first; 0 = keep nothing: every request sends its files).
    blob_cache_bytes: int = 1024 * MiB
    #: Most test cases per side (task, grading) and files in all cases of a request.
    max_cases: int = 64
    max_files: int = 256
    #: Longest wait for a container before the rollout fails as infrastructure.
    acquire_timeout_s: float = 180.0
    #: A Run whose gRPC deadline leaves less than this is refused with DEADLINE_EXCEEDED.
    min_deadline_s: float = 2.0
    #: Refuse agents that cannot run under ``base_spec.runtime`` (instead of running them under
    #: the engine default, which every result and Describe would report).
    require_runtime: bool = False
    base_spec: ContainerSpec = field(default_factory=ContainerSpec)
    #: Worker processes that grade outputs off the rollout threads (``skillopt.grader_pool``);
    #: 0 = grade in the rollout's own thread.
    grader_workers: int = field(default_factory=default_workers)


@dataclass(frozen=True, kw_only=True)
class SessionConfig:
    """Host policy for sessions (the general remote sandbox API)."""

    #: Most live sessions on this host, all tokens together (further creates get
    #: RESOURCE_EXHAUSTED with a retry hint; running sessions are never degraded for a new one).
    max_sessions: int = 64
    #: Idle TTL when the client asks for none, and the longest one allowed.
    default_idle_ttl_s: float = 600.0
    max_idle_ttl_s: float = 24 * 3600.0
    #: Lifetime when the client asks for none; never more than the runtime's container lifetime.
    default_max_lifetime_s: float = 3600.0
    #: Largest file written or read, and largest stdin of one command.
    max_file_bytes: int = 256 * MiB
    max_stdin_bytes: int = 256 * MiB
    #: Most bytes of files and stdin the host holds in memory for sessions at once, all
    #: transfers together: a transfer waits for room (up to a minute, then RESOURCE_EXHAUSTED),
    #: so many tokens moving large files cannot run the host out of memory.
    max_buffered_bytes: int = 1024 * MiB
    buffer_wait_s: float = 60.0
    #: Output streamed back per command when the client asks for no cap, and the largest cap.
    default_output_bytes: int = 10 * MiB
    max_output_bytes: int = 64 * MiB
    #: Command timeout when the client gives none, and the longest one.
    default_exec_timeout_s: float = 600.0
    max_exec_timeout_s: float = 6 * 3600.0
    #: Images a session may ask for besides the host's runtime image.
    extra_images: tuple[str, ...] = ()
    #: Most labels per session.
    max_labels: int = 32
    #: Longest wait for a container when creating a session.
    acquire_timeout_s: float = 120.0

    def __post_init__(self) -> None:
        if self.max_sessions < 0:
            raise ConfigError(f"max_sessions must be 0 or more, got {self.max_sessions}")
        for name in ("default_idle_ttl_s", "default_max_lifetime_s", "default_exec_timeout_s"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"sessions.{name} must be positive, got {getattr(self, name)}")
        if self.max_buffered_bytes < max(self.max_file_bytes, self.max_stdin_bytes):
            raise ConfigError("sessions.max_buffered_bytes must hold at least one largest file or stdin")
        if self.default_output_bytes > self.max_output_bytes or self.default_idle_ttl_s > self.max_idle_ttl_s:
            raise ConfigError("a session default (output bytes, idle TTL) exceeds its maximum")
