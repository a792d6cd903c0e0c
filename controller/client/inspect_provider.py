"""Inspect AI sandbox provider ``skillopt``: every sample runs in a session on a skillopt fleet.

Registered through the package entry point ``[project.entry-points.inspect_ai]`` (install
``skillopt[inspect]``), so a task asks for it by name::

    Task(dataset=..., solver=..., scorer=..., sandbox=("skillopt", "skillopt.yaml"))

``skillopt.yaml`` (every key optional; the fleet keys are the ``sandbox.*`` keys of a run
config, and each missing one comes from its environment variable, as for every command:
``$SKILLOPT_ENDPOINTS``, ``$SKILLOPT_TOKEN_FILE`` then ``$SKILLOPT_SANDBOX_TOKEN``,
``$SKILLOPT_TLS_CA``, ``$SKILLOPT_TLS_CERT``, ``$SKILLOPT_TLS_KEY``)::

    endpoints: ["sandbox-1:50051", "dns:///skillopt-sandbox:50051"]   # or "a:1,b:2"
    token_file: ~/.config/skillopt/token
    tls_ca_file: ~/.config/skillopt/ca.crt          # the hosts' CA: TLS on
    tls_cert_file: ~/.config/skillopt/client.crt    # mutual TLS (docker/k8s): client
    tls_key_file: ~/.config/skillopt/client.key     #   certificate and its key
    image: skillopt-runtime:latest      # from the host's allow-list
    limits: {memory_mb: 2048, cpus: 1.0}
    network: none                       # or gateway (the host's model gateway only)
    isolation: gvisor                   # optional: only hosts running it under gVisor ("" = any)
    idle_ttl_s: 900
    max_lifetime_s: 7200
    skill: ./my-skill                   # a skill package folder (or a SKILL.md), mounted
                                        # read-only at /skill and, with network: gateway,
                                        # at /workspace/.claude/skills/<name>/ and
                                        # /workspace/.agents/skills/<name>/

Differences from Inspect's Docker sandbox, by design: commands run as one unprivileged user
(``user=`` anything else raises ``SandboxUserUnsupportedError``), the container has no network
unless ``network: gateway``, its root filesystem is read-only (the workdir ``/workspace`` and
``/tmp`` are writable), and only images on the host's allow-list run. A command that times out
takes every background process of the session with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
from pathlib import Path
from typing import Any, ClassVar, Literal, Union, overload

import yaml
from inspect_ai.util import (
    ExecResult,
    OutputLimitExceededError,
    SandboxEnvironment,
    SandboxEnvironmentConfigType,
    SandboxEnvironmentLimits,
    SandboxUserUnsupportedError,
    sandboxenv,
)
from pydantic import BaseModel, ConfigDict, Field

from controller.client.sessions import AsyncSandboxSession, SandboxSession, SessionEndpoints, client_sessions
from skillopt.errors import (
    ConfigError,
    SandboxFileMissing,
    SandboxFileTooLarge,
    SandboxIsADirectory,
    SandboxPermissionDenied,
    SkillOptError,
    UserUnsupported,
)
from skillopt.types import SkillVersion

__all__ = ["SkillOptSandboxConfig", "SkillOptSandboxEnvironment"]

#: Label every session this provider creates carries (``cli_cleanup`` finds them by it).
LABEL = "inspect-ai"


class SkillOptSandboxConfig(BaseModel):
    """The ``skillopt`` sandbox's configuration (a YAML file, or this model)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    endpoints: list[str] | str = Field(default_factory=list)
    token_file: str = ""
    tls_ca_file: str = ""
    tls_cert_file: str = ""
    tls_key_file: str = ""
    image: str = ""
    limits: dict[str, float] = Field(default_factory=dict)
    network: Literal["none", "gateway"] = "none"
    #: ``gvisor``: only a host whose container runs under gVisor will do (checked before any
    #: command; no such host is a ``ConfigError`` naming each host's runtime); "" = any.
    isolation: Literal["", "gvisor"] = ""
    idle_ttl_s: float = 0.0
    max_lifetime_s: float = 0.0
    #: A skill package folder or a single SKILL.md ("" = no skill), loaded and checked when
    #: the task starts (``~`` expanded; relative to the working directory).
    skill: str = ""

    def where(self) -> SessionEndpoints:
        """The fleet: these keys, each missing one from its environment variable.

        Raises:
            ConfigError: no endpoint, a malformed one, or an unreadable token or TLS file.
        """
        from controller.fleet.access import resolve_access

        access = resolve_access(config=self.model_dump(), config_prefix="the skillopt sandbox config's ")
        return SessionEndpoints.from_access(access)


@functools.lru_cache(maxsize=8)
def _load_skill(path: str) -> SkillVersion:
    """The skill package at ``path``, read once per process (every sample mounts it)."""
    from skillopt.skill.package import load_skill  # the standard's parser: only when used

    return load_skill(Path(path))


def skill_of(config: SkillOptSandboxConfig) -> SkillVersion | None:
    """The configured skill (``None``: none).

    Raises:
        SkillError: the folder or file is not a valid skill package (every problem named).
    """
    return _load_skill(os.path.abspath(os.path.expanduser(config.skill))) if config.skill else None


def destroy_sessions(where: SessionEndpoints, session_id: str | None = None) -> int:
    """Destroy this token's sessions made by this provider (or just ``session_id``) on every
    host of ``where``; returns how many were destroyed."""
    from controller.client.sandbox_client import SandboxClient

    destroyed = 0
    for channel in where.channels():
        with SandboxClient(channel) as client:
            try:
                infos = client_sessions(client)
            except SkillOptError:
                continue
            for info in infos:
                if info.session_id == session_id or (session_id is None and info.labels.get(LABEL) == "1"):
                    with contextlib.suppress(SkillOptError):
                        destroyed += SandboxSession(client, info, owns_client=False).destroy()
    return destroyed


def _config(config: SandboxEnvironmentConfigType | None) -> SkillOptSandboxConfig:
    if config is None:
        return SkillOptSandboxConfig()
    if isinstance(config, SkillOptSandboxConfig):
        return config
    if isinstance(config, str):
        try:
            data = yaml.safe_load(Path(config).read_text(encoding="utf-8")) or {}
        except OSError as exc:
            raise ConfigError(f"skillopt sandbox config {config}: {exc.strerror or exc}") from exc
        return SkillOptSandboxConfig(**data)
    if isinstance(config, BaseModel):
        return SkillOptSandboxConfig(**config.model_dump())
    raise ConfigError(
        f"the skillopt sandbox takes a YAML file or SkillOptSandboxConfig, got {type(config).__name__}"
    )


@sandboxenv(name="skillopt")
class SkillOptSandboxEnvironment(SandboxEnvironment):
    """One sample's session on a skillopt sandbox host."""

    #: Sessions alive in this process (destroyed by ``task_cleanup`` if a sample's cleanup
    #: never ran).
    _live: ClassVar[dict[str, AsyncSandboxSession]] = {}

    def __init__(self, session: AsyncSandboxSession) -> None:
        super().__init__()
        self.session = session

    # -- lifecycle ---------------------------------------------------------------------------

    @classmethod
    def config_files(cls) -> list[str]:
        return ["skillopt.yaml", "skillopt.yml"]

    @classmethod
    def config_deserialize(cls, config: dict[str, Any]) -> BaseModel:
        return SkillOptSandboxConfig(**config)

    @classmethod
    def default_concurrency(cls) -> int | None:
        """Samples at once: the fleet's free session slots (``None`` when it cannot be asked)."""
        try:
            where = SessionEndpoints.resolve()  # the environment's fleet
        except ConfigError:
            return None
        from controller.client.sandbox_client import SandboxClient

        free = 0
        for channel in where.channels():
            with SandboxClient(channel) as client:
                try:
                    d = client.describe(timeout_s=5.0)
                except SkillOptError:
                    continue
                free += max(0, d.max_sessions - d.sessions)
        return free or None

    @classmethod
    async def task_init(cls, task_name: str, config: SandboxEnvironmentConfigType | None) -> None:
        cfg = _config(config)
        cfg.where()  # fail at task start, not per sample, on a bad config
        skill_of(cfg)  # ... or a bad skill package

    @classmethod
    async def sample_init(
        cls, task_name: str, config: SandboxEnvironmentConfigType | None, metadata: dict[str, str]
    ) -> dict[str, SandboxEnvironment]:
        cfg = _config(config)
        limits = cfg.limits
        session = await AsyncSandboxSession.create(
            cfg.where(),
            image=cfg.image,
            memory_bytes=int(limits.get("memory_mb", 0) * 1024 * 1024),
            cpus=float(limits.get("cpus", 0.0)),
            idle_ttl_s=cfg.idle_ttl_s,
            max_lifetime_s=cfg.max_lifetime_s,
            network=cfg.network,
            isolation=cfg.isolation,
            labels={LABEL: "1", "task": task_name[:200]},
            skill=skill_of(cfg),
        )
        cls._live[session.id] = session
        return {"default": cls(session)}

    @classmethod
    async def sample_cleanup(
        cls,
        task_name: str,
        config: SandboxEnvironmentConfigType | None,
        environments: dict[str, SandboxEnvironment],
        interrupted: bool,
    ) -> None:
        for env in environments.values():
            if isinstance(env, SkillOptSandboxEnvironment):
                await cls._destroy(env.session)

    @classmethod
    async def task_cleanup(
        cls, task_name: str, config: SandboxEnvironmentConfigType | None, cleanup: bool
    ) -> None:
        if cleanup:
            for session in list(cls._live.values()):
                await cls._destroy(session)

    @classmethod
    async def cli_cleanup(cls, id: str | None) -> None:
        """``inspect sandbox cleanup skillopt [ID]``: destroy this token's Inspect sessions on
        the fleet of ``$SKILLOPT_ENDPOINTS`` (or just session ``ID``)."""
        await asyncio.to_thread(destroy_sessions, SessionEndpoints.resolve(), id)

    @classmethod
    async def _destroy(cls, session: AsyncSandboxSession) -> None:
        cls._live.pop(session.id, None)
        # A host that is gone took its sessions with it; an ended session needs nothing.
        with contextlib.suppress(SkillOptError):
            await asyncio.shield(session.destroy())

    # -- operations --------------------------------------------------------------------------

    async def exec(
        self,
        cmd: list[str],
        input: str | bytes | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | None = None,
        timeout: int | None = None,
        timeout_retry: bool = True,
        concurrency: bool = True,
    ) -> ExecResult[str]:
        limit = SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE
        try:
            result = await self.session.exec(
                cmd,
                input=input,
                cwd=cwd or "",
                env=env or {},
                timeout=timeout,
                user=user or "",
                output_limit_bytes=2 * limit,
            )
        except UserUnsupported as exc:
            raise SandboxUserUnsupportedError(exc.message) from exc
        if result.spawn_error == "permission":
            raise PermissionError(f"{cmd[0]}: {result.message or 'permission denied'}")
        if result.timed_out:
            raise TimeoutError(f"command timed out after {timeout} s: {cmd[0]}")
        stdout = result.stdout.decode("utf-8", "replace")
        stderr = result.stderr.decode("utf-8", "replace")
        if result.output_limit_exceeded or max(len(result.stdout), len(result.stderr)) > limit:
            raise OutputLimitExceededError(
                limit_str=SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE_STR, truncated_output=stdout[:limit]
            )
        if result.spawn_error:
            what = "working directory" if result.spawn_error == "cwd" else "command"
            stderr = f"{cwd if result.spawn_error == 'cwd' else cmd[0]}: {what}: {result.message}\n"
        return ExecResult(success=result.success, returncode=result.returncode, stdout=stdout, stderr=stderr)

    async def write_file(self, file: str, contents: str | bytes) -> None:
        try:
            await self.session.write_file(file, contents)
        except SandboxIsADirectory as exc:
            raise IsADirectoryError(f"{file}: is a directory ({exc.message})") from exc
        except SandboxPermissionDenied as exc:
            raise PermissionError(f"{file}: permission denied ({exc.message})") from exc

    @overload
    async def read_file(self, file: str, text: Literal[True] = True) -> str: ...

    @overload
    async def read_file(self, file: str, text: Literal[False]) -> bytes: ...

    async def read_file(self, file: str, text: bool = True) -> Union[str | bytes]:  # noqa: UP007 - Inspect's signature
        try:
            data = await self.session.read_file(file, max_bytes=SandboxEnvironmentLimits.MAX_READ_FILE_SIZE)
        except SandboxFileMissing as exc:
            raise FileNotFoundError(f"{file}: no such file ({exc.message})") from exc
        except SandboxIsADirectory as exc:
            raise IsADirectoryError(f"{file}: is a directory ({exc.message})") from exc
        except SandboxPermissionDenied as exc:
            raise PermissionError(f"{file}: permission denied ({exc.message})") from exc
        except SandboxFileTooLarge as exc:
            raise OutputLimitExceededError(
                limit_str=SandboxEnvironmentLimits.MAX_READ_FILE_SIZE_STR, truncated_output=None
            ) from exc
        if not text:
            return data
        # Newlines kept as they are (Inspect's contract: like open(newline="")).
        return data.decode("utf-8")
