"""The controller's view of the fleet's hosts: their health, what they reported, what the
fleet tells observers about them."""

from __future__ import annotations

import collections
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from controller.client.sandbox_client import SandboxClient
from skillopt.types import HostDescription, SkillVersion

__all__ = ["FleetEvent", "HostHealth", "HostState"]


class HostHealth(enum.StrEnum):
    """A host's health as the fleet sees it."""

    UP = "up"  # serving: rollouts may be placed here
    DOWN = "down"  # failed a connect or a stream, or its health watch broke: never chosen
    DRAINING = "draining"  # said it is shutting down: never chosen until it serves again


@dataclass(frozen=True)
class FleetEvent:
    """What the fleet reports to ``on_event`` (progress display, tests): ``kind`` is one of
    ``host_down``, ``host_up``, ``host_full``, ``retry``, ``host_skipped`` (a host that cannot
    mount the batch's skill package: left out of its placement, ``detail`` says why)."""

    kind: str
    address: str
    detail: str = ""
    rollout_id: str = ""


@dataclass
class HostState:
    """The controller's view of one host."""

    client: SandboxClient
    address: str
    capacity: int
    health: HostHealth = HostHealth.UP
    in_flight: int = 0
    #: Consecutive rollout-level failures (a tie-breaker in placement).
    failures: int = 0
    host_id: str = ""
    providers: tuple[str, ...] = ()
    #: Not chosen before this ``time.monotonic()`` (backing off a full host).
    full_until: float = 0.0
    full_backoff_s: float = 0.0
    #: The last (monotonic time, health) transitions, for the run log and tests.
    history: collections.deque[tuple[float, HostHealth]] = field(
        default_factory=lambda: collections.deque(maxlen=64)
    )
    #: Rollouts placed here, and when the last one was (``time.monotonic()``).
    placements: int = 0
    last_placement: float = 0.0
    #: Its address no longer resolves from its ``dns:///`` endpoint: out of the fleet for good.
    gone: bool = False
    #: What ``Describe`` said (image tag → digest; version and build; agent CLI labels).
    image_digests: dict[str, str] = field(default_factory=dict)
    #: Images of agents with their own image (tag → digest; "" = not built there).
    agent_image_digests: dict[str, str] = field(default_factory=dict)
    #: The OCI runtime each ``env/agent`` it can run runs under (``runc``, ``runsc``, ``runsc-net``).
    agent_runtimes: dict[str, str] = field(default_factory=dict)
    #: The OCI runtime its containers without a network run under (sessions, code runs).
    container_runtime: str = ""
    version: str = ""
    service_build: str = ""
    image_labels: dict[str, str] = field(default_factory=dict)
    #: Why placement must not use this host although it serves (its runtime image is not the
    #: one the run is pinned to); "" = usable.
    excluded: str = ""
    #: Skill packages it mounts (most files and bytes of one); 0 = it predates packages.
    skill_package_max_files: int = 0
    skill_package_max_bytes: int = 0
    #: Languages of its SandboxFusion-compatible HTTP API and that API's port (none, 0: off).
    languages: tuple[str, ...] = ()
    http_port: int = 0

    def apply(self, info: HostDescription) -> None:
        """Take what the host's ``Describe`` said (the caller holds the fleet's lock)."""
        self.capacity = max(1, info.capacity)
        self.host_id = info.host
        self.providers = tuple(info.providers)
        self.image_digests = dict(info.image_digests)
        self.agent_image_digests = dict(info.agent_image_digests)
        self.agent_runtimes = dict(info.agent_runtimes)
        self.container_runtime = info.container_runtime
        self.version, self.service_build = info.version, info.service_build
        self.image_labels = dict(info.image_labels)
        self.skill_package_max_files = info.skill_package_max_files
        self.skill_package_max_bytes = info.skill_package_max_bytes
        self.languages, self.http_port = tuple(info.languages), info.http_port

    def package_refusal(self, skill: SkillVersion) -> str:
        """Why this host cannot mount ``skill`` ("" when it can, or when ``skill`` is one file):
        it predates packages, or the package exceeds its limits (it would refuse it)."""
        if not skill.files or not self.host_id:  # not described yet: its Describe will tell
            return ""
        if self.skill_package_max_files <= 0:
            return (
                f"{self.address} (skillopt {self.version or 'unknown'}) predates skill packages: it "
                "mounts SKILL.md alone"
            )
        files = 1 + len(skill.files)
        size = len(skill.content.encode("utf-8")) + sum(len(f.data) for f in skill.files)
        if files > self.skill_package_max_files or size > self.skill_package_max_bytes:
            return (
                f"{self.address} mounts skill packages of at most {self.skill_package_max_files} files "
                f"and {self.skill_package_max_bytes} bytes; {skill.name!r} has {files} files, {size} bytes"
            )
        return ""

    def mismatch(self, pin: str, agent_pins: Mapping[str, str]) -> str:
        """Why this host does not run the run's runtime image digest ``pin`` or its agent
        images ``agent_pins`` (tag → digest); "" when it does (or reports nothing to tell)."""
        for image, want in agent_pins.items():
            have = self.agent_image_digests.get(image)
            if have is not None and have != want:  # a host that reports no such field: older
                return f"{self.address} runs {image} {have or '(not built)'}, not the run's {want}"
        if not pin or not self.image_digests or pin in self.image_digests.values():
            return ""
        have = ", ".join(self.image_digests.values()) or "none"
        return f"{self.address} runs runtime image {have}, not the run's {pin}"
