"""A sandbox host's configuration, the one ``skillopt serve`` runs with: one frozen pydantic model
(:class:`HostConfig`), read from a YAML file (``--config host.yaml``) with the command line's
flags over it (:func:`load_host_config`), printed back as YAML (``--print-config``,
:func:`config_yaml`), and turned into the :class:`~sandbox.server.serve.ServerConfig` that
:func:`~sandbox.server.serve.serve` runs (:func:`server_config`).

Every key is a flag: ``max_sessions`` is ``--max-sessions``. A few keys also say their unit or
kind where the flag does not (``drain_grace_s`` is ``--drain-grace``, ``tls_cert_file`` is
``--tls-cert``); :func:`flag_of` gives each key's flag. Bounds and choices are declared in the
field types and worded by :mod:`skillopt.validation`, like the run config's: a bad value's message
names the flag when a flag gave it (``--grader-workers must be 0 or more, got -1``), the key and
the file when the file did (``grader_workers (from host.yaml): must be 0 or more, got -1``).

No key holds a secret. The token comes from the file ``token_file`` names, else from the
environment variable ``SKILLOPT_SANDBOX_TOKEN``; model keys come from the variables or files the
provider profiles name. Both are read by :func:`server_config` and never printed.

This module is imported as soon as ``skillopt serve`` parses its flags (they are made from
:class:`HostConfig`), so it imports only pydantic and light modules at the top; the loader and the
server's types (gRPC, the Docker SDK) are imported where they are used.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from sandbox.runtime.spec import DEFAULT_IMAGE, ContainerSpec, RuntimeConfig, default_pool_size
from skillopt.errors import ConfigError
from skillopt.grader_pool import default_workers
from skillopt.logs import REDACTED, is_secret_key, redact
from skillopt.units import MiB
from skillopt.validation import Bounds, Canonical, FieldError, problems

if TYPE_CHECKING:
    from sandbox.server.serve import ServerConfig
    from sandbox.service.config import ServiceConfig

__all__ = [
    "TOKEN_ENV",
    "Flag",
    "HostConfig",
    "config_yaml",
    "default_host_id",
    "flag_of",
    "load_host_config",
    "server_config",
]

#: The environment variable holding the token when no ``token_file`` is given.
TOKEN_ENV = "SKILLOPT_SANDBOX_TOKEN"
#: Origin of a value nobody set (``--print-config`` says it after the value).
DEFAULT = "default"
#: Origin of a value the host works out when nobody set it (``host_id``, ``pool_size``).
DERIVED = "derived"
#: What PyYAML ends a lone scalar's document with.
YAML_END = "\n...\n"


@dataclasses.dataclass(frozen=True)
class Flag:
    """How a key is spelled on the command line, declared on the fields that need it:
    ``Annotated[float, Flag("--drain-grace")]``.

    Attributes:
        name: the flag; "" = ``--`` and the key with dashes (``max_sessions``: ``--max-sessions``).
        metavar: what ``--help`` shows for the value; "" = argparse's default.
        const: the value of the flag given alone (``--simulate`` means ``--simulate on``);
            "" = the flag needs a value.
    """

    name: str = ""
    metavar: str = ""
    const: str = ""


def _default(cls: type[Any], name: str) -> Any:
    """The default of dataclass ``cls``'s field ``name``: the host's defaults are the runtime's."""
    return next(f.default for f in dataclasses.fields(cls) if f.name == name)


def _default_state_dir() -> str:
    if os.geteuid() == 0:
        return "/var/lib/skillopt/sandbox"
    return str(Path.home() / ".cache" / "skillopt" / "sandbox")


def _default_capacity() -> int:
    return max(2, os.cpu_count() or 2)


def default_host_id(listen: str) -> str:
    """A host id unique per service on this machine: ``<hostname>-<port>``, or with port 0 (a
    free port picked at start) ``<hostname>-<6 random hex>``."""
    port = listen.rsplit(":", 1)[-1] if ":" in listen else ""
    suffix = port if port.isdigit() and int(port) > 0 else uuid.uuid4().hex[:6]
    return f"{socket.gethostname()}-{suffix}"


#: A container's hard lifetime (seconds, a whole number): the longest it may be reused.
_LIFETIME_S = int(_default(RuntimeConfig, "max_container_lifetime_s"))
_HOST_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")

LogLevel = Literal["debug", "info", "warning", "error", "critical"]


class HostConfig(BaseModel):
    """Everything a sandbox host is started with (``skillopt serve``'s flags, or the keys of its
    ``--config`` file). Frozen and checked when built: a ``HostConfig`` that exists is valid.

    Raises:
        FieldError: a value of the wrong type or out of its bounds, naming the key.
    """

    # defer_build: the validator is built when a config is first built, not when ``serve --help``
    # only reads the fields.
    model_config = ConfigDict(
        frozen=True, extra="forbid", allow_inf_nan=False, use_attribute_docstrings=True, defer_build=True
    )

    # -- where it listens, and who may call --------------------------------------------------
    listen: str = "127.0.0.1:50051"
    """HOST:PORT of the gRPC service (port 0: any free port)."""
    token_file: str = ""
    """File holding the bearer token clients must send. One token per line makes each line a tenant
    whose sessions no other token sees, optionally followed by max_sessions=N (that tenant's cap).
    "": the token in the environment variable SKILLOPT_SANDBOX_TOKEN, else none (then only a
    loopback listener, unless insecure)."""
    insecure: bool = False
    """Allow a listener beyond loopback without a token (a trusted network only)."""
    tls_cert_file: Annotated[str, Flag("--tls-cert")] = ""
    """PEM certificate chain for TLS; "": plaintext."""
    tls_key_file: Annotated[str, Flag("--tls-key")] = ""
    """PEM private key of the TLS certificate."""
    tls_client_ca_file: Annotated[str, Flag("--tls-client-ca")] = ""
    """PEM CA; clients must present a certificate it signed (mutual TLS)."""
    health_listen: str = ""
    """HOST:PORT of a plaintext listener serving only grpc.health.v1 (e.g. for Kubernetes' gRPC
    probes, which cannot do TLS); it reports NOT_SERVING while draining, like the main port.
    "": none."""
    http_listen: str = ""
    """HOST:PORT of a SandboxFusion-compatible HTTP API (POST /run_code, /run_jupyter; "": off):
    each request runs in a fresh hardened container. Tokens as on gRPC: 'Authorization: Bearer T'
    or the endpoint URL http://HOST:PORT/t/T (docs/http-api.md); beyond loopback it needs a token
    (or insecure)."""
    code_image: str = ""
    """Image of the HTTP API's code runs; "": skillopt-runtime-polyglot:latest when built here,
    else the rollout image (which runs python and bash only)."""
    metrics_listen: Annotated[str, Flag(metavar="HOST:PORT")] = ""
    """HOST:PORT serving Prometheus metrics over plaintext HTTP at /metrics ("": off; no token:
    nothing secret in them; needs skillopt[metrics]; docs/observability.md)."""

    # -- this host and its containers --------------------------------------------------------
    host_id: str = ""
    """This host's id (container labels, results, fleet status); "": the machine's name and the
    listen port (HOSTNAME-50051), or HOSTNAME-<random> with port 0, so that several hosts on one
    machine are told apart."""
    state_dir: str = Field(default_factory=_default_state_dir)
    """Host directory for per-container files and the lock."""
    capacity: Annotated[int, Bounds(ge=1, said="1 or more")] = Field(default_factory=_default_capacity)
    """Most rollouts running at once."""
    pool_size: Annotated[int, Bounds(ge=0, said="0 or more")] | None = None
    """Idle warm containers per container spec; unset (null): the capacity, twice the capacity
    under runtime runsc, whose containers start slower."""
    max_creations: Annotated[int, Bounds(ge=1, said="1 or more")] = _default(
        RuntimeConfig, "max_concurrent_creations"
    )
    """Containers being created at once."""
    grader_workers: Annotated[int, Bounds(ge=0, said="0 or more")] = Field(default_factory=default_workers)
    """Processes that grade outputs off the rollout threads (one per core, at most 4); 0: grade in
    the rollout's thread."""
    image: str = DEFAULT_IMAGE
    """Rollout runtime image."""
    runtime: str = ""
    """OCI runtime of the containers, e.g. runsc (gVisor); "": the engine's default."""
    require_runtime: bool = False
    """Refuse agents that cannot run under the runtime instead of running them under the engine's
    default (exec agents on a runsc host run under runsc-net, its networked sibling, when the
    engine has it: scripts/setup.sh --gvisor registers both); Describe and every result say which
    runtime was used either way."""
    memory_mb: Annotated[int, Bounds(ge=32, said="at least 32 (MiB)")] = (
        _default(ContainerSpec, "memory_bytes") // MiB
    )
    """Default memory limit of a rollout container (MiB)."""
    cpus: Annotated[float, Bounds(gt=0, le=256)] = _default(ContainerSpec, "cpus")
    """Default CPU limit of a rollout container (cores; a fraction is a share of one)."""
    reuse_max_executions: Annotated[int, Bounds(ge=0, said="0 or more", note=" (0: never reused)")] = (
        _default(RuntimeConfig, "reuse_max_executions")
    )
    """A container goes back to its tenant's pool after an execution (a rollout, a session's end, a
    code run), reset to a verified clean slate, at most this many times; 0: never reused (every
    execution gets a fresh container)."""
    reuse_max_age_s: Annotated[float, Bounds(gt=0, le=_LIFETIME_S, unit=" seconds")] = _default(
        RuntimeConfig, "reuse_max_age_s"
    )
    """A container goes back to its tenant's pool, as above, only while younger than this many
    seconds (at most a container's hard lifetime)."""

    # -- models ----------------------------------------------------------------------------
    providers_file: Annotated[str, Flag("--providers")] = ""
    """YAML file of model provider profiles (docs/models.md); "": none."""
    provider_specs: Annotated[
        tuple[str, ...], Flag("--provider", metavar="NAME=KIND,base_url=URL[,api_key_env=VAR]")
    ] = ()
    """More model provider profiles, one per item (a flag repeated)."""
    gateway_cache_dir: str = ""
    """Record/replay store of model exchanges; "": none (only mode off)."""
    gateway_cache_mode: Literal["off", "record", "replay"] = "off"
    """Model cache mode of rollouts that do not choose one (replay: a miss is an error)."""
    exec_agents: Literal["auto", "on", "off"] = "auto"
    """Agent CLIs in containers on the firewalled gateway network (needs root for iptables): auto
    (when this host can), on (refuse to start when it cannot), off."""
    simulate: Annotated[Literal["off", "on", "noisy"], Flag(const="on")] = "off"
    """Also serve the offline simulation's target (scripted models, no key): provider profiles
    'sim' (OpenAI APIs) and 'sim-anthropic' (Messages), for `skillopt train --simulate on|noisy
    --endpoints ...`. on and noisy both serve both targets (deterministic and noisy): the run's
    --simulate chooses by the model it asks for."""

    # -- sessions and what clients send ------------------------------------------------------
    max_sessions: Annotated[int, Bounds(ge=0, said="0 or more")] = 64
    """Most live sessions (the general sandbox API) on this host, all tokens together; further
    creates are refused with a retry hint (0: no sessions)."""
    session_images: Annotated[tuple[str, ...], Flag("--session-image")] = ()
    """Images sessions may ask for besides the rollout image (each must be built on this host)."""
    session_idle_ttl_s: Annotated[
        float, Bounds(gt=0, le=24 * 3600, unit=" seconds"), Flag("--session-idle-ttl")
    ] = 600.0
    """Idle time after which a session that asked for no TTL of its own ends (seconds)."""
    blob_cache_mb: Annotated[int, Bounds(ge=0, said="0 or more")] = 1024
    """Memory for the request files and skills clients send once and then name by SHA-256 (corpora,
    workbooks, skills), all tokens together, least recently used out first (MiB; 0: keep nothing,
    every request sends its files)."""
    skill_max_files: Annotated[int, Bounds(ge=0, said="0 or more")] = 200
    """Most files (SKILL.md included) of a skill package this host mounts; a larger package is
    refused before anything runs, naming the rule; Describe reports the limit (0: mount SKILL.md
    alone, as hosts before packages did; clients send packages elsewhere)."""
    skill_max_mb: Annotated[float, Bounds(gt=0, said="positive")] = 8.0
    """Most MiB of one skill package, all its files together."""

    # -- running it ------------------------------------------------------------------------
    port_file: str = ""
    """Write the bound gRPC port to this file once listening; "": none."""
    http_port_file: str = ""
    """Write the HTTP API's bound port to this file once listening; "": none."""
    drain_grace_s: Annotated[float, Bounds(ge=0, unit=" seconds"), Flag("--drain-grace")] = 30.0
    """Seconds running rollouts may take to finish on SIGTERM before they are cancelled."""
    exit_with_parent: bool = False
    """Drain and exit when stdin reaches EOF (the embedded sandbox: its controller holds the pipe)."""
    log_format: Literal["json", "console"] = "json"
    """json lines, or console for a person."""
    log_level: Annotated[LogLevel, Canonical({"warn": "warning"})] = "info"
    """Threshold of the logs."""

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            hints = {name: f.rebuild_annotation() for name, f in type(self).model_fields.items()}
            raise FieldError(*problems(exc, prefix="", hints=hints)[0]) from None

    @model_validator(mode="after")
    def _checked(self) -> HostConfig:
        """The rules no bound declares: a host id fit for container labels, an image named."""
        if self.host_id and not set(self.host_id) <= _HOST_ID_CHARS:
            raise FieldError(
                "host_id", f"must be letters, digits, '.', '_' and '-' only, got {self.host_id!r}"
            )
        if not self.image.strip():
            raise FieldError("image", "must not be empty")
        return self

    def resolved(self) -> HostConfig:
        """This configuration with what it leaves to the host worked out: ``host_id`` (from the
        machine's name and the listen port) and ``pool_size`` (from the capacity and runtime)."""
        return HostConfig(
            **{
                **self.model_dump(),
                "host_id": self.host_id or default_host_id(self.listen),
                "pool_size": default_pool_size(self.capacity, self.runtime)
                if self.pool_size is None
                else self.pool_size,
            }
        )


def flag_of(key: str) -> Flag:
    """The command-line spelling of ``key`` (a field of :class:`HostConfig`), its name filled in."""
    field = HostConfig.model_fields[key]
    declared = next((m for m in field.metadata if isinstance(m, Flag)), Flag())
    return dataclasses.replace(declared, name=declared.name or "--" + key.replace("_", "-"))


def load_host_config(
    path: str | Path | None, flags: Mapping[str, Any] | None = None
) -> tuple[HostConfig, dict[str, str]]:
    """The host's effective configuration: defaults, then the file's keys, then the flags given.

    Args:
        path: a YAML file of keys (``listen: 0.0.0.0:50051``); None: no file.
        flags: key → value of the flags given on the command line (a repeated flag's list
            replaces the file's list).

    Returns:
        The configuration, :meth:`HostConfig.resolved`, and where each key's value came from:
        key → the flag (``--capacity``), the file, ``default``, or ``derived`` (``host_id`` and
        ``pool_size`` worked out by :meth:`HostConfig.resolved`).

    Raises:
        ConfigError: an unreadable or malformed file, an unknown key (with the closest one), or a
            bad value, naming the flag or the key and the file that gave it.
    """
    data: dict[str, Any] = {}
    label = ""
    if path is not None:
        from skillopt.config import read_yaml_mapping

        label = str(path)
        data = read_yaml_mapping(Path(path), label, expected="a mapping of keys (listen: ..., capacity: ...)")
        for key in data:
            _check_key(key, label)
    given = {k: v for k, v in (flags or {}).items() if v is not None}
    try:
        config = HostConfig(**{**data, **given})
    except FieldError as exc:
        key = exc.key.split("[", 1)[0]  # session_images[1]: the list's flag or key
        if key in given:
            raise ConfigError(f"{flag_of(key).name} {exc.problem}") from None
        if key in data:
            raise FieldError(exc.key, exc.problem, origin=label) from None
        raise
    origins = {
        key: flag_of(key).name if key in given else label if key in data else DEFAULT
        for key in HostConfig.model_fields
    }
    for key in ("host_id", "pool_size"):
        if getattr(config, key) in ("", None):
            origins[key] = DERIVED
    return config.resolved(), origins


def _check_key(key: Any, label: str) -> None:
    """Refuse a key of the file that is no field, with the closest field or every field."""
    from skillopt.config import unknown_key_message

    fields = tuple(HostConfig.model_fields)
    if key in fields:
        return
    name = str(key)
    if is_secret_key(name):
        raise ConfigError(
            f"{name!r} in {label}: secrets are never read from the host's configuration file; put "
            f"the token in a file named by token_file (--token-file), or in {TOKEN_ENV}"
        )
    raise ConfigError(unknown_key_message(name, name, fields, where=f" in {label}"))


def config_yaml(
    config: HostConfig, origins: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> str:
    """``config`` as YAML a ``--config`` file can hold, every key with where its value came from
    in a comment after it; the token is said to be set, never shown."""
    env = os.environ if environ is None else environ
    lines = ["# skillopt serve: the effective configuration (skillopt serve --config FILE reads it back)"]
    if config.token_file:
        lines.append("# token: read from token_file")
    elif env.get(TOKEN_ENV):
        lines.append(f"# token: {REDACTED} (from {TOKEN_ENV})")
    else:
        lines.append("# token: none (loopback listeners only, unless insecure)")
    for key, value in config.model_dump(mode="json").items():
        # Flow style: one line per key, so that its origin can follow it.
        shown = yaml.safe_dump(redact(value, key), default_flow_style=True, width=10**6)
        lines.append(f"{key}: {shown.removesuffix(YAML_END).rstrip()}  # {origins.get(key, DEFAULT)}")
    return "\n".join(lines) + "\n"


def server_config(
    host: HostConfig, *, provider_specs: Sequence[str] = (), environ: Mapping[str, str] | None = None
) -> ServerConfig:
    """What :func:`~sandbox.server.serve.serve` runs for ``host``, with every file it names read
    now: the token file (else the token from ``SKILLOPT_SANDBOX_TOKEN``), the provider profiles
    (each one must build), the TLS files; ``provider_specs`` are profiles besides the host's own
    (the offline simulation's).

    Raises:
        ConfigError: a file that cannot be read or is malformed, half a TLS setup, a provider
            that does not build, a metrics address that is not HOST:PORT (or no
            prometheus-client for it), naming the flag.
    """
    from sandbox.server.serve import ServerConfig, server_credentials
    from sandbox.service.config import SessionConfig
    from skillopt.models.profiles import load_profiles, validate_profiles

    env = os.environ if environ is None else environ
    host = host.resolved()
    token, tenants = _tokens(host, env)
    providers = load_profiles(
        file=host.providers_file or None, specs=[*host.provider_specs, *provider_specs], environ=env
    )
    validate_profiles(providers)  # every configured provider builds, or the host does not start
    config = ServerConfig(
        listen=host.listen,
        token=token,
        tenants=tuple(tenants),
        sessions=SessionConfig(
            max_sessions=host.max_sessions,
            extra_images=host.session_images,
            default_idle_ttl_s=host.session_idle_ttl_s,
        ),
        insecure=host.insecure,
        tls_cert_file=host.tls_cert_file,
        tls_key_file=host.tls_key_file,
        tls_client_ca_file=host.tls_client_ca_file,
        drain_grace_s=host.drain_grace_s,
        runtime=_runtime_config(host),
        service=_service_config(host),
        providers=providers,
        gateway_cache_dir=host.gateway_cache_dir,
        gateway_cache_mode=host.gateway_cache_mode,
        exec_agents=host.exec_agents,
        health_listen=host.health_listen,
        http_listen=host.http_listen,
        code_image=host.code_image,
        metrics_listen=host.metrics_listen,
    )
    if host.metrics_listen:
        from sandbox.observability.metrics import parse_listen, require_client

        parse_listen(host.metrics_listen)  # refuse before anything starts
        require_client()
    server_credentials(config)  # half a TLS setup or a missing file: refuse before anything starts
    return config


def _tokens(host: HostConfig, env: Mapping[str, str]) -> tuple[str | None, list[tuple[str, int]]]:
    """The single token (from the environment) or the tenants (from the token file)."""
    from sandbox.service.tenants import parse_token_file

    if not host.token_file:
        return env.get(TOKEN_ENV) or None, []
    try:
        text = Path(host.token_file).read_text()
    except OSError as exc:
        raise ConfigError(f"--token-file {host.token_file}: cannot read it ({exc.strerror or exc})") from None
    return None, parse_token_file(text, source=f"token file {host.token_file}")


def _runtime_config(host: HostConfig) -> RuntimeConfig:
    assert host.pool_size is not None  # the host is resolved
    return RuntimeConfig(
        host_id=host.host_id,
        state_dir=host.state_dir,
        pool_size=host.pool_size,
        max_concurrent_creations=host.max_creations,
        reuse_max_executions=host.reuse_max_executions,
        reuse_max_age_s=host.reuse_max_age_s,
    )


def _service_config(host: HostConfig) -> ServiceConfig:
    from sandbox.service.config import DEFAULT_LIMITS, ServiceConfig
    from skillopt.skill.package import PackageLimits

    spec = ContainerSpec(
        image=host.image, runtime=host.runtime, memory_bytes=host.memory_mb * MiB, cpus=host.cpus
    )
    return ServiceConfig(
        host_id=host.host_id,
        capacity=host.capacity,
        base_spec=spec,
        default_limits=dataclasses.replace(DEFAULT_LIMITS, memory_bytes=spec.memory_bytes, cpus=spec.cpus),
        require_runtime=host.require_runtime,
        grader_workers=host.grader_workers,
        blob_cache_bytes=host.blob_cache_mb * MiB,
        package_limits=PackageLimits(max_files=host.skill_max_files, max_bytes=int(host.skill_max_mb * MiB)),
    )
