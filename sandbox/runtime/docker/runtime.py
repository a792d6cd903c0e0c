"""Hardened rollout containers on a local Docker engine: the Docker implementation of
:class:`sandbox.runtime.base.SandboxRuntime`.

A container is created with every hardening default of :class:`ContainerSpec` (``create.py``),
used by one rollout or session at a time (``sandbox.py``, over its runner connection:
``connection.py``), and between two executions of its tenant reset to a verified clean slate
(:meth:`DockerRuntime.reset`; the runner's half is ``runner/reset.py``) or removed. The façade
below holds the pieces, each in its own module: the engine (``engine.py``), the state directory
(``statedir.py``), the image cache (``images.py``), the creator and the reaper (``reaper.py``).
"""

from __future__ import annotations

import contextlib
import shutil
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import docker.errors
import structlog

from sandbox.runtime.base import (
    ReapReport,
    ResetReport,
    SandboxHandle,
    SandboxRuntime,
    SessionSandbox,
    SlotState,
)
from sandbox.runtime.docker.create import ContainerCreator
from sandbox.runtime.docker.engine import Engine
from sandbox.runtime.docker.handle import ContainerHandle
from sandbox.runtime.docker.images import ImageCache
from sandbox.runtime.docker.reaper import Reaper
from sandbox.runtime.docker.sandbox import DockerSandbox
from sandbox.runtime.docker.statedir import StateDir
from sandbox.runtime.owner import Owner, current_owner
from sandbox.runtime.runner.protocol import PingReply, PingRequest, ResetReply, ResetRequest, RunnerError
from sandbox.runtime.skilldir import PlacedPackages, clear_placed
from sandbox.runtime.spec import ContainerSpec, RuntimeConfig
from skillopt.errors import SandboxResetFailed

__all__ = ["DockerRuntime"]

log = structlog.get_logger("skillopt.sandbox.runtime")

#: Longest a reset may take before the container is given up (a clean one takes milliseconds;
#: emptying a workspace of 30,000 files a few hundred).
_RESET_TIMEOUT_S = 20.0


class DockerRuntime(SandboxRuntime):
    """Creates, watches and removes hardened rollout containers on one Docker engine (OCI
    runtime runc by default, or e.g. gVisor's runsc per :attr:`ContainerSpec.runtime`).

    Raises:
        ConfigError: the state dir is in use by another service, or too deep for sockets.
        SandboxUnavailable: the engine cannot be reached.
    """

    name = "docker"

    def __init__(self, config: RuntimeConfig) -> None:
        self.config = config
        self.instance = uuid.uuid4().hex[:12]
        self.state = StateDir(config.state_dir)
        self.state_dir = self.state.path
        self.engine = Engine(config)
        self.client = self.engine.client
        self.runner_sha256, runner_dir = self.state.install_runner()
        #: Skill packages placed before, by version: placed again as hard links.
        self.packages = PlacedPackages(self.state.packages)
        self.images = ImageCache(self.client)
        self._live: dict[str, ContainerHandle] = {}
        self._live_lock = threading.Lock()
        #: This process as the owner of what it creates (the label other hosts sweep by).
        try:
            self.owner: Owner = current_owner(self.engine.running_since)
        except docker.errors.DockerException:
            self.owner = current_owner()
        self.creator = ContainerCreator(
            config,
            self.engine,
            self.images,
            self.state,
            owner_label=self.owner.label(),
            instance=self.instance,
            runner_dir=runner_dir,
        )
        self.reaper = Reaper(
            self.engine,
            self.state,
            host_id=config.host_id,
            instance=self.instance,
            owner=self.owner,
            live=self._live_names,
        )

    # -- what the engine offers --------------------------------------------------------------

    def available_runtimes(self) -> tuple[str, ...]:
        return self.engine.available_runtimes()

    @property
    def engine_version(self) -> str:
        return self.engine.version

    def engine_problem(self) -> str:
        try:
            self.client.ping()
        except Exception as exc:  # any failure to reach the engine
            return f"container engine unreachable: {exc}"
        return ""

    def storage_problem(self, min_free_bytes: int) -> str:
        try:
            free = shutil.disk_usage(self.state_dir).free
        except OSError as exc:
            return f"state dir {self.state_dir}: {exc.strerror or exc}"
        if free < min_free_bytes:
            return f"state dir {self.state_dir} has {free} bytes free (< {min_free_bytes})"
        return ""

    def runtime_name(self, spec: ContainerSpec) -> str:
        return self.engine.runtime_name(spec)

    def check_runtime(self, name: str) -> None:
        self.engine.check_runtime(name)

    def runtime_has_network(self, name: str) -> bool:
        return self.engine.runtime_has_network(name)

    def image_digest(self, image: str) -> str:
        """Image ID (``sha256:…``) of a locally built image, resolved once: this runtime then
        creates every container of ``image`` from that ID (see :class:`ImageCache`).

        Raises:
            ImageMissing: the image is not on this host.
            SandboxUnavailable: the engine did not answer.
        """
        return self.images.digest(image)

    def image_labels(self, image: str) -> dict[str, str]:
        return self.images.labels(image)

    # -- containers --------------------------------------------------------------------------

    def create(self, spec: ContainerSpec) -> ContainerHandle:
        """Create and start one container and wait for its runner to connect.

        Raises:
            ImageMissing: the spec's image is not built.
            ContainerStartFailed: Docker refused, or the runner did not come up in time.
        """
        handle = self.creator.create(spec)
        with self._live_lock:
            self._live[handle.name] = handle
        log.debug("container.created", container=handle.name, start_s=round(handle.start_s, 3))
        return handle

    def lease(
        self,
        handle: SandboxHandle,
        holder: str,
        *,
        output_limit_bytes: int = 64 * 1024,
        deadline: float | None = None,
        cancel: threading.Event | None = None,
    ) -> SessionSandbox:
        """Hand a created container to one rollout or session (recorded in its lease file,
        for the reaper and for whoever looks at the host).

        Raises:
            SandboxUnavailable: the state dir cannot be written (a full disk).
        """
        container = _container(handle)
        container.state = SlotState.LEASED
        if holder:
            self.state.write_lease(container.dir, holder)
        return DockerSandbox(
            self,
            container,
            output_limit_bytes=output_limit_bytes,
            deadline=deadline,
            cancel=cancel,
            packages=self.packages,
        )

    def reset(self, handle: SandboxHandle) -> ResetReport:
        """Reset a used container for its tenant's next execution (the contract:
        :meth:`SandboxRuntime.reset`). The runner empties and checks the inside
        (``runner/reset.py``); from the host this checks the container's pids cgroup (only its
        runner left) and OOM counter (never a kill), and empties its skill folders.

        Raises:
            SandboxResetFailed: as in the contract.
        """
        container = _container(handle)
        if container.taint:
            raise SandboxResetFailed(
                f"container {container.name} is spoiled: {container.taint}", reason="spoiled"
            )
        t0 = time.monotonic()
        try:
            reply, _ = container.conn.call(ResetRequest(), reply=ResetReply, timeout_s=_RESET_TIMEOUT_S)
        except (TimeoutError, EOFError, OSError, RunnerError) as exc:
            container.spoil("runner-error")
            raise SandboxResetFailed(
                f"container {container.name}: its runner did not reset: {exc}", reason="unreachable"
            ) from None
        problems = [*reply.problems, *self._host_problems(container)]
        if not problems:
            try:  # checked: the runner may fork its next child now (it waited for this request)
                container.conn.call(PingRequest(), reply=PingReply, timeout_s=_RESET_TIMEOUT_S)
            except (TimeoutError, EOFError, OSError, RunnerError) as exc:
                problems.append(f"unreachable: its runner did not answer after the reset: {exc}")
        if problems:
            container.spoil("reset")
            reason = problems[0].partition(":")[0] if ":" in problems[0] else "other"
            raise SandboxResetFailed(
                f"container {container.name}: {'; '.join(problems)}"[:2000], reason=reason
            )
        if container.skill_placed:
            try:
                clear_placed(container.skill_dir, container.skills_dir)
            except OSError as exc:
                container.spoil("host-error")
                raise SandboxResetFailed(
                    f"container {container.name}: cannot empty its skill folders: {exc.strerror or exc}",
                    reason="files",
                ) from None
            container.skill_placed = False
        container.state = SlotState.IDLE
        return ResetReport(
            duration_s=time.monotonic() - t0,
            files_removed=reply.files_removed,
            ipc_removed=reply.ipc_removed,
            restored=tuple(reply.restored),
        )

    @staticmethod
    def _host_problems(container: ContainerHandle) -> list[str]:
        """What the host sees against reusing ``container``: more processes in its cgroup than
        its runner (and Docker's init), an out-of-memory kill in its life."""
        problems = []
        expected = 2 if container.spec.docker_init else 1
        processes = container.processes()
        if processes is not None and processes != expected:
            problems.append(f"pids: {processes} tasks in its cgroup, {expected} expected")
        if (container.oom_kills() or 0) > 0:
            problems.append("oom: an out-of-memory kill happened in it")
        return problems

    def alive(self, handle: SandboxHandle) -> bool:
        """Whether an idle container's runner is still connected."""
        return _container(handle).conn.is_alive()

    def abort_creations(self) -> None:
        self.creator.abort()

    def kill(self, handle: SandboxHandle) -> None:
        """Kill a container now (cancellation, backstop timeout); removal happens in destroy."""
        container = _container(handle)
        container.spoil("killed")
        container.conn.abort()
        with contextlib.suppress(docker.errors.DockerException):
            self.client.api.kill(container.id)

    def destroy(self, handle: SandboxHandle) -> None:
        """Remove a container and its host directories."""
        container = _container(handle)
        container.state = SlotState.DRAINING
        container.conn.close()
        self.engine.remove(container.id)
        self.state.remove(container.dir)
        container.state = SlotState.DEAD
        with self._live_lock:
            self._live.pop(container.name, None)

    def live_count(self) -> int:
        with self._live_lock:
            return len(self._live)

    def _live_names(self) -> tuple[set[str], set[str]]:
        with self._live_lock:
            return set(self._live), {h.dir.name for h in self._live.values()}

    # -- reaping and closing -----------------------------------------------------------------

    def reap(self, *, startup: bool = False) -> ReapReport:
        """See :meth:`Reaper.reap`."""
        return self.reaper.reap(startup=startup)

    def close(self) -> None:
        """Remove every container this runtime still knows, then sweep by label (a create that
        a killed predecessor left in flight can land after our startup reap), and release the
        state dir."""
        self.creator.abort()
        with self._live_lock:
            handles = list(self._live.values())
        if handles:
            with ThreadPoolExecutor(max_workers=min(8, len(handles)), thread_name_prefix="close") as ex:
                list(ex.map(self.destroy, handles))
        report = self.reap(startup=True)
        if report.containers:
            log.info("reaper.swept_at_close", containers=len(report.containers))
        self.state.close()
        self.engine.close()


def _container(handle: SandboxHandle) -> ContainerHandle:
    """``handle`` as the container it is (a handle of another runtime is a programming error)."""
    if not isinstance(handle, ContainerHandle):
        raise TypeError(f"{handle.name!r} is not a container of a Docker runtime")
    return handle
