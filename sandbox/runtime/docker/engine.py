"""The Docker engine as the runtime uses it: one client, what the engine offers (OCI runtimes,
version), and the few calls every other module shares (list by label, remove, inspect).

Every engine error that leaves this package is one of :mod:`skillopt.errors`; ``docker``
exceptions are mapped here or caught by the caller in this package.
"""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import docker
import docker.errors
import structlog

from sandbox.runtime.spec import ContainerSpec, RuntimeConfig
from skillopt.errors import ConfigError, SandboxUnavailable

__all__ = ["ContainerSummary", "Engine", "list_containers"]

log = structlog.get_logger("skillopt.sandbox.runtime")


class Engine:
    """A connected Docker engine and the OCI runtimes it offers.

    Raises:
        SandboxUnavailable: the engine cannot be reached (the message says how to start it).
    """

    def __init__(self, config: RuntimeConfig) -> None:
        try:
            self.client = (
                docker.DockerClient(base_url=config.docker_base_url, max_pool_size=64)
                if config.docker_base_url
                else docker.from_env(max_pool_size=64)
            )
            if self.client.api.base_url.startswith("http+docker://"):
                # A unix socket takes no proxy: skip requests' per-call walk of the environment
                # for proxy settings (~0.12 ms of the service's CPU per engine call, measured).
                self.client.api.trust_env = False
            self.client.ping()
            self._version = self.client.version().get("Version", "")
            info = self.client.info()
        except docker.errors.DockerException as exc:
            raise SandboxUnavailable(
                f"cannot reach the Docker engine ({exc}); start it (scripts/setup.sh does) or set DOCKER_HOST"
            ) from exc
        #: The engine's default OCI runtime (what a spec with ``runtime=""`` runs under).
        self.default_runtime: str = info.get("DefaultRuntime") or "runc"
        self._runtimes: dict[str, Any] = info.get("Runtimes") or {}

    @property
    def version(self) -> str:
        return f"Docker {self._version}" if self._version else ""

    def available_runtimes(self) -> tuple[str, ...]:
        return tuple(sorted(self._runtimes))

    def runtime_name(self, spec: ContainerSpec) -> str:
        """The OCI runtime a container of ``spec`` runs under (``runc``, ``runsc`` ...)."""
        return spec.runtime or self.default_runtime

    def check_runtime(self, name: str) -> None:
        """Refuse an OCI runtime the engine does not have.

        Raises:
            ConfigError: naming the runtimes the engine has.
        """
        if name and name not in self._runtimes:
            known = ", ".join(sorted(self._runtimes)) or "none"
            raise ConfigError(
                f"container runtime {name!r} is not registered with the Docker engine (it has: {known}); "
                "for gVisor run: bash scripts/setup.sh --gvisor"
            )

    def runtime_has_network(self, name: str) -> bool:
        """Whether containers of runtime ``name`` can use a Docker network (exec agents need
        the gateway network). gVisor registered with ``--network=none`` cannot."""
        entry = self._runtimes.get(name or self.default_runtime) or {}
        args = entry.get("runtimeArgs") or entry.get("RuntimeArgs") or []
        return "--network=none" not in args and not any(
            a == "--network" and b == "none" for a, b in itertools.pairwise(args)
        )

    def running_since(self, container_id: str) -> str | None:
        """``State.StartedAt`` of a running container; None when it is gone or stopped.

        Raises:
            docker.errors.DockerException: the engine did not answer.
        """
        try:
            state = self.client.api.inspect_container(container_id).get("State") or {}
        except docker.errors.NotFound:
            return None
        return str(state.get("StartedAt", "")) if state.get("Running") else None

    def remove(self, ref: str) -> None:
        """Remove a container (and its anonymous volumes) whatever its state; what the engine
        refuses here the reaper retries later."""
        try:
            self.client.api.remove_container(ref, force=True, v=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            # "removal already in progress" is fine; anything else the reaper retries later.
            if "already in progress" not in str(exc):
                log.warning("container.remove_failed", container=ref, error=str(exc))

    def remove_all(self, refs: list[str]) -> None:
        """Remove containers in parallel (a loaded engine takes seconds per removal)."""
        if len(refs) <= 1:
            for ref in refs:
                self.remove(ref)
            return
        with ThreadPoolExecutor(max_workers=min(8, len(refs)), thread_name_prefix="remove") as ex:
            list(ex.map(self.remove, refs))

    def close(self) -> None:
        self.client.close()


@dataclass(frozen=True, slots=True)
class ContainerSummary:
    """One container as the engine's list call reports it (no per-container inspect)."""

    id: str
    name: str
    state: str  # created | running | exited | dead | ...
    labels: dict[str, str]
    created: float  # unix time


def list_containers(client: docker.DockerClient, label: str) -> list[ContainerSummary]:
    """Every container (running or not) carrying ``label`` (``key=value``), in one engine call.

    docker-py's ``containers.list`` inspects each container after listing it: a container
    removed in between raises ``NotFound`` for the whole call (seen in CI while rollouts
    churned), and N inspects per reap cost the engine. The list call alone has what we need.

    Raises:
        docker.errors.DockerException: the engine did not answer.
    """
    rows = client.api.containers(all=True, filters={"label": label})
    return [
        ContainerSummary(
            id=r["Id"],
            name=(r.get("Names") or ["/"])[0].lstrip("/"),
            state=str(r.get("State", "")),
            labels=dict(r.get("Labels") or {}),
            created=float(r.get("Created", 0)),
        )
        for r in rows
    ]
