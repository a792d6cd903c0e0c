"""What every host of a fleet reports, and whether the fleet is fit to run one experiment.

A fleet is fit when every host serves and all of them run the same environment: the same
runtime image digest (the container every rollout runs in), the same runner, the same service
build and version. ``skillopt fleet status`` prints this; the controller pins a run to the
digest it started with (``controller/session.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

from controller.client.sandbox_client import ChannelConfig, SandboxClient
from controller.fleet import discovery
from skillopt.errors import SkillOptError

__all__ = ["HostReport", "fleet_problems", "probe_fleet"]


@dataclass(frozen=True, kw_only=True)
class HostReport:
    """One host as probed: its health check, and its ``Describe`` when it answered."""

    address: str
    #: SERVING, NOT_SERVING (draining) or DOWN (no answer); "" before the probe.
    health: str
    error: str = ""
    host: str = ""
    version: str = ""
    service_build: str = ""
    engine_version: str = ""
    capacity: int = 0
    free_slots: int = 0
    running: int = 0
    #: Live sessions (the general sandbox API) and the host's cap on them.
    sessions: int = 0
    max_sessions: int = 0
    draining: bool = False
    container_runtime: str = ""
    available_runtimes: tuple[str, ...] = ()
    image_digests: dict[str, str] = field(default_factory=dict)
    runner_sha256: str = ""
    agents: tuple[str, ...] = ()
    unavailable_agents: dict[str, str] = field(default_factory=dict)
    #: The OCI runtime each agent's containers run under (``env/agent`` → ``runc``, ``runsc``,
    #: ``runsc-net``): exec agents on the gateway network may differ from ``container_runtime``.
    agent_runtimes: dict[str, str] = field(default_factory=dict)
    providers: tuple[str, ...] = ()
    image_labels: dict[str, str] = field(default_factory=dict)
    #: Skill packages it mounts (most files and bytes of one); 0: SKILL.md alone (a host that
    #: predates packages, or runs with --skill-max-files 0).
    skill_package_max_files: int = 0
    skill_package_max_bytes: int = 0
    #: Languages of its SandboxFusion-compatible HTTP API and that API's port (none, 0: off).
    languages: tuple[str, ...] = ()
    http_port: int = 0
    #: Container recycling: most executions per container (one tenant's) and its oldest age
    #: (0: never reused).
    reuse_max_executions: int = 0
    reuse_max_age_s: float = 0.0

    @property
    def gvisor(self) -> bool:
        return "runsc" in self.available_runtimes

    @property
    def up(self) -> bool:
        return self.health == "SERVING" and not self.error

    def to_dict(self) -> dict:
        return {**asdict(self), "gvisor": self.gvisor, "up": self.up}


def _probe_one(channel: ChannelConfig, timeout_s: float) -> HostReport:
    with SandboxClient(channel) as client:
        if not client.healthy(timeout_s=timeout_s):
            try:  # tell a draining host (it answers, NOT_SERVING) from one that is gone
                d = client.describe(timeout_s=timeout_s)
            except SkillOptError as exc:
                return HostReport(address=channel.address, health="DOWN", error=exc.message)
            return _report(channel.address, "NOT_SERVING", d)
        try:
            d = client.describe(timeout_s=timeout_s)
        except SkillOptError as exc:  # serves health, refuses us: a token or TLS problem
            return HostReport(address=channel.address, health="SERVING", error=exc.message)
        return _report(channel.address, "SERVING", d)


def _report(address: str, health: str, d) -> HostReport:
    return HostReport(
        address=address,
        health=health,
        host=d.host,
        version=d.version,
        service_build=d.service_build,
        engine_version=d.engine_version,
        capacity=d.capacity,
        free_slots=d.free_slots,
        running=d.running,
        sessions=d.sessions,
        max_sessions=d.max_sessions,
        draining=d.draining,
        container_runtime=d.container_runtime,
        available_runtimes=tuple(d.available_runtimes),
        image_digests=dict(d.image_digests),
        runner_sha256=d.runner_sha256,
        agents=tuple(d.agents),
        unavailable_agents=dict(d.unavailable_agents),
        agent_runtimes=dict(d.agent_runtimes),
        providers=tuple(d.providers),
        image_labels=dict(d.image_labels),
        skill_package_max_files=d.skill_package_max_files,
        skill_package_max_bytes=d.skill_package_max_bytes,
        languages=tuple(d.languages),
        http_port=d.http_port,
        reuse_max_executions=d.reuse_max_executions,
        reuse_max_age_s=d.reuse_max_age_s,
    )


def probe_fleet(channels: Sequence[ChannelConfig], *, timeout_s: float = 5.0) -> list[HostReport]:
    """Probe every host (``dns:///`` endpoints expanded to their addresses), in parallel.

    Raises:
        ConfigError: a malformed ``dns:///`` endpoint.
    """
    hosts: list[ChannelConfig] = []
    empty: list[str] = []
    for ch in channels:
        found = discovery.expand(ch)
        hosts += found
        if not found:
            empty.append(ch.address)
    with ThreadPoolExecutor(max_workers=max(1, min(32, len(hosts)))) as pool:
        reports = list(pool.map(lambda c: _probe_one(c, timeout_s), hosts))
    return reports + [
        HostReport(address=a, health="DOWN", error="the name resolves to no address") for a in empty
    ]


def fleet_problems(reports: Sequence[HostReport]) -> list[str]:
    """Why this fleet is not fit for one experiment ([] when it is): hosts down, draining or
    refusing us, and any difference in runtime image digest, runner, service build or version."""
    problems = [
        f"{r.address}: {'down' if r.health == 'DOWN' else 'draining' if r.health == 'NOT_SERVING' else 'refuses us'}"
        + (f" ({r.error})" if r.error else "")
        for r in reports
        if not r.up
    ]
    answered = [r for r in reports if r.host]
    for what, value in (
        ("runtime image digest", lambda r: tuple(sorted(r.image_digests.items()))),
        ("runner", lambda r: r.runner_sha256),
        ("service build", lambda r: r.service_build),
        ("service version", lambda r: r.version),
    ):
        seen: dict[object, list[str]] = {}
        for r in answered:
            seen.setdefault(value(r), []).append(r.address)
        if len(seen) > 1:
            groups = "; ".join(f"{_show(k)} on {', '.join(v)}" for k, v in seen.items())
            problems.append(f"hosts differ in {what}: {groups}")
    return problems


def _show(value: object) -> str:
    if isinstance(value, tuple):
        return ", ".join(f"{tag}={digest[:19]}" for tag, digest in value) or "none"
    return str(value)[:19] or "none"
