"""Where and on what a rollout runs: the ``env`` section (the benchmark, its data and splits,
the agent, the limits of one rollout) and the ``sandbox`` section (the sandbox services the
rollouts run on, or the embedded one)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, TypeAlias

from pydantic import BeforeValidator, Field

from skillopt.config._fields import FieldError
from skillopt.config.schema._section import _Section
from skillopt.units import MiB
from skillopt.validation import Bounds, Canonical, Choices, Int, Words, show

if TYPE_CHECKING:
    from skillopt.skill.package import PackageLimits

__all__ = ["EnvConfig", "SandboxConfig", "SplitMode"]

SplitMode = Literal["split_file", "ratio"]
DigestPolicy = Literal["refuse", "warn"]
Isolation = Literal["", "gvisor"]
ModelCache = Literal["", "off", "record", "replay"]

SplitModeField: TypeAlias = Annotated[SplitMode, Canonical()]
DigestPolicyField: TypeAlias = Annotated[DigestPolicy, Canonical()]

#: A sandbox service's address: ``host:port``, ``[v6 address]:port`` or ``dns:///name:port``.
_ENDPOINT = re.compile(r"^(?:dns:///)?(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.\-]+):([0-9]{1,5})$")


def _mapping(raw: Any) -> Any:
    """``env.options``: null is no options."""
    return {} if raw is None else raw


class EnvConfig(_Section):
    """The benchmark environment: data, splits, agent and per-rollout limits."""

    SECTION: ClassVar[str] = "env"

    name: str
    """Env name (required), e.g. ``spreadsheetbench``; see :mod:`skillopt.envs.registry`."""
    skill_init: str = ""
    """Initial skill: a SKILL.md file or an Agent Skills package folder (SKILL.md with front
    matter, plus ``scripts/``, ``references/``, ``assets/``); ``""`` = the env's shipped initial
    skill. Must exist if set; checked when the config is loaded."""
    skill_max_files: Annotated[int, Bounds(ge=1)] = 200
    """Most files a skill package may hold (SKILL.md included)."""
    skill_max_mb: Annotated[float, Bounds(gt=0, unit=" MiB")] = 8
    """Most bytes a skill package may hold, in MiB (all its files together)."""
    split_mode: SplitModeField = "split_file"
    """``split_file`` = the data root's ``splits.json``; ``ratio`` = split by ``split_ratio``."""
    split_ratio: str = "2:1:7"
    """``train:selection:test`` proportions for ``split_mode: ratio`` (quote it in YAML)."""
    split_seed: Int = 42
    """Seed of the ratio split."""
    data_root: str = ""
    """Dataset directory; ``""`` = the env's vendored sample (layouts: docs/data.md; check one
    with ``skillopt data check``)."""
    allow_sample: bool = False
    """Let a run with real models use the env's vendored sample (a few items: it measures
    little and still costs money). Off: such a run is refused at startup; the offline
    simulation and the ``*_demo`` configs (which set it) are not affected."""
    agent: str = ""
    """Agent kind; ``""`` = the env's default (spreadsheetbench: ``codegen_multi``)."""
    options: Annotated[Mapping[str, Any], BeforeValidator(_mapping)] = Field(default_factory=dict)
    """Env-specific options (e.g. ``searchqa``: ``context_chars``), validated by the env's
    options model: unknown keys and bad values are errors naming ``env.options.<key>``. Stored
    with every default filled in, so config.json records them all."""
    max_turns: Annotated[int, Bounds(ge=1)] = 30
    """Model turns per rollout."""
    exec_timeout: Annotated[float, Bounds(gt=0, unit=" seconds")] = 120
    """Seconds per code execution inside the sandbox."""
    task_timeout: Annotated[float, Bounds(gt=0, unit=" seconds")] = 600
    """Seconds of wall time for a whole rollout."""
    workers: Annotated[int, Bounds(ge=1)] = 24
    """Concurrent rollouts."""
    memory_mb: Annotated[int, Bounds(ge=16)] = 1024
    """Memory limit of a rollout container (MiB, memory + swap)."""
    cpus: Annotated[float, Bounds(gt=0)] = 1.0
    """CPU limit of a rollout container (cores)."""
    max_model_tokens: Annotated[int, Bounds(ge=0, note=" (0 = no limit)")] = 0
    """Per-rollout model token budget (prompt + completion, enforced by the sandbox host's
    gateway; a rollout that uses it up fails as ``budget-exceeded``); 0 = no limit."""

    def _validate(self) -> None:
        self.split_fractions  # noqa: B018 - validates split_ratio
        if self.exec_timeout > self.task_timeout:
            raise FieldError(
                self._key("exec_timeout"),
                f"{self.exec_timeout} s exceeds env.task_timeout ({self.task_timeout} s), the whole rollout's budget",
            )

    @property
    def skill_limits(self) -> PackageLimits:
        """``skill_max_files`` and ``skill_max_mb`` as package limits."""
        from skillopt.skill.package import PackageLimits

        return PackageLimits(max_files=self.skill_max_files, max_bytes=int(self.skill_max_mb * MiB))

    @property
    def split_fractions(self) -> tuple[float, float, float]:
        """``split_ratio`` as fractions (train, selection, test) summing to 1."""
        parts = self.split_ratio.split(":")
        try:
            numbers = [float(p) for p in parts]
        except ValueError:
            numbers = []
        if len(numbers) != 3 or any(not math.isfinite(n) or n < 0 for n in numbers) or sum(numbers) <= 0:
            raise FieldError(
                self._key("split_ratio"),
                f'expected "train:selection:test" with three numbers >= 0 (e.g. "2:1:7"), got {show(self.split_ratio, "split_ratio")}',
            )
        total = sum(numbers)
        return (numbers[0] / total, numbers[1] / total, numbers[2] / total)


class SandboxConfig(_Section):
    """Where rollouts run: remote sandbox services over gRPC, or an embedded local one."""

    SECTION: ClassVar[str] = "sandbox"

    endpoints: Words = ()
    """Sandbox services as ``host:port`` (or ``unix:/path``), or ``dns:///NAME:PORT`` for every
    address NAME resolves to (re-resolved during the run, e.g. a Kubernetes headless Service);
    empty = start an embedded local service for the run and stop it afterwards."""
    token_file: str = ""
    """File holding the bearer token sent to the services; ``""`` = no token."""
    tls_ca_file: str = ""
    """PEM bundle to verify the services' certificates; ``""`` = plaintext unless a cert is set."""
    tls_cert_file: str = ""
    """Client certificate (PEM) for mutual TLS; needs ``tls_key_file``."""
    tls_key_file: str = ""
    """Client private key (PEM) for mutual TLS; needs ``tls_cert_file``."""
    embedded_capacity: Annotated[int, Bounds(ge=0, note=" (0 = auto)")] = 0
    """Concurrent rollouts of the embedded service; 0 = derived from the host's cores and memory."""
    embedded_pool_size: Annotated[int, Bounds(ge=0, note=" (0 = auto)")] = 0
    """Pre-started idle containers of the embedded service; 0 = derived from the capacity (twice
    the capacity under gVisor, whose containers start slower), none when the env's agent needs
    no container (the QA agents)."""
    image: str = "skillopt-runtime:latest"
    """Rollout runtime image."""
    runtime: str = ""
    """Docker runtime of rollout containers; ``""`` = the engine's default, ``runsc`` = gVisor."""
    isolation: Annotated[Isolation, Choices('"" or gvisor')] = ""
    """Isolation the run requires of every container it runs in: ``gvisor`` = each host must run
    this run's agent under gVisor (``skillopt serve --runtime runsc``; exec agents under
    ``runsc-net``), or the run stops before any rollout with the hosts and what they offer; the
    embedded service then uses ``runsc`` unless ``sandbox.runtime`` says otherwise; ``""`` = any."""
    rpc_timeout_slack_s: Annotated[float, Bounds(ge=0.0)] = 60
    """Seconds added to a rollout's wall time for the RPC deadline (queueing, container start)."""
    model_cache: Annotated[ModelCache, Choices("off, record or replay")] = ""
    """Model exchange cache of the rollouts: ``off``, ``record``, ``replay`` (a miss is an error);
    ``""`` = the sandbox host's default."""
    model_cache_dir: str = ""
    """The embedded sandbox's record/replay store (created if missing); ``""`` = none."""
    host_down_timeout_s: Annotated[float, Bounds(gt=0, unit=" seconds")] = 300
    """Stop the run (resumable) when no sandbox host has been reachable this long; a host that
    is down is left at once and taken back when its health check serves again."""
    image_digest_policy: DigestPolicyField = "refuse"
    """A run is pinned to the runtime image digest it started on (kept by ``--resume``):
    ``refuse`` = never place rollouts on a host running another image (and refuse a fleet whose
    hosts differ), ``warn`` = use such hosts and say so."""

    def _validate(self) -> None:
        if self.model_cache in ("record", "replay") and not self.endpoints and not self.model_cache_dir:
            raise FieldError(
                self._key("model_cache"),
                "record/replay on the embedded sandbox needs sandbox.model_cache_dir",
            )
        seen: set[str] = set()
        for i, endpoint in enumerate(self.endpoints):
            key = f"{self._key('endpoints')}[{i}]"
            if endpoint in seen:
                raise FieldError(key, f"{endpoint!r} is listed twice")
            seen.add(endpoint)
            if endpoint.startswith("unix:") and len(endpoint) > len("unix:"):
                continue
            match = _ENDPOINT.match(endpoint)
            if not match or not 1 <= int(match.group(1)) <= 65535:
                raise FieldError(
                    key,
                    f'expected "host:port" (port 1-65535), "dns:///name:port" or "unix:/path", got {endpoint!r}',
                )
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            raise FieldError(
                self._key("tls_cert_file" if self.tls_key_file else "tls_key_file"),
                "sandbox.tls_cert_file and sandbox.tls_key_file must be set together (mutual TLS)",
            )
        self._non_empty("image")
        if self.runtime != self.runtime.strip() or " " in self.runtime:
            raise FieldError(
                self._key("runtime"), f"must be a runtime name such as runsc, got {self.runtime!r}"
            )
