"""Creating one hardened container and waiting for its runner to connect.

A container is created with every hardening default of :class:`ContainerSpec` and started with
the runner package (``sandbox/runtime/runner/``, mounted read-only at ``/opt/skillopt``) as its
main process; the runner connects to a socket the service listens on in the container's control
directory and says hello, and that connection is the container's :class:`RunnerConnection`.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from pathlib import Path
from typing import Any

import docker.errors
import structlog
from docker.models.containers import _create_container_args  # type: ignore[attr-defined]  # the SDK's private run() kwargs -> API translation
from docker.types import LogConfig, Mount, Ulimit

from sandbox.runtime.docker.connection import RunnerConnection
from sandbox.runtime.docker.engine import Engine
from sandbox.runtime.docker.handle import ContainerHandle, memory_cgroup, pids_cgroup
from sandbox.runtime.docker.images import ImageCache
from sandbox.runtime.docker.statedir import StateDir
from sandbox.runtime.labels import (
    LABEL_EXPIRES,
    LABEL_HOST,
    LABEL_INSTANCE,
    LABEL_MANAGED,
    LABEL_OWNER,
    LABEL_SPEC,
)
from sandbox.runtime.runner.protocol import PROTOCOL_VERSION, WORKSPACE, Hello, ProtocolError, recv_message
from sandbox.runtime.spec import ContainerSpec, RuntimeConfig
from skillopt.errors import ContainerStartFailed, ImageMissing

__all__ = ["SANDBOX_ENV", "ContainerCreator"]

log = structlog.get_logger("skillopt.sandbox.runtime")

#: The environment of every process in a container (the spec's ``env`` adds to it).
SANDBOX_ENV: dict[str, str] = {
    "HOME": WORKSPACE,
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MPLCONFIGDIR": "/tmp",
}
#: Where the runner package is mounted, and how the image's Python starts it.
_RUNNER_MOUNT = "/opt/skillopt"
_CONTROL_MOUNT = "/control"


class ContainerCreator:
    """Creates containers for one runtime instance; :meth:`abort` makes creations in flight
    fail soon and refuses new ones (the runtime is closing). Thread-safe.

    Args:
        owner_label: the owning process's label (:mod:`sandbox.runtime.owner`).
        instance: this runtime instance's id (a restart is another instance).
        runner_dir: the installed runner package (:meth:`StateDir.install_runner`).
    """

    def __init__(
        self,
        config: RuntimeConfig,
        engine: Engine,
        images: ImageCache,
        state: StateDir,
        *,
        owner_label: str,
        instance: str,
        runner_dir: Path,
    ) -> None:
        self.config, self.engine, self.images, self.state = config, engine, images, state
        self.owner_label, self.instance, self.runner_dir = owner_label, instance, runner_dir
        self._aborting = threading.Event()
        self._starting: set[socket.socket] = set()  # runner sockets waiting for their hello
        self._lock = threading.Lock()

    @property
    def aborting(self) -> bool:
        return self._aborting.is_set()

    def abort(self) -> None:
        """Make creations in flight give up (within half a second) and refuse new ones: the
        service is closing, and a creation slowed down by a loaded machine must not hold the
        shutdown for the runner's whole start timeout."""
        self._aborting.set()
        with self._lock:
            starting = list(self._starting)
        for sock in starting:  # a creation waiting for its runner's hello sees EOF now
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def create(self, spec: ContainerSpec) -> ContainerHandle:
        """Create and start one container and wait for its runner to connect.

        Raises:
            ImageMissing: the spec's image is not built.
            ContainerStartFailed: Docker refused, the runner did not come up in time, or the
                runtime is closing.
        """
        if self._aborting.is_set():
            raise ContainerStartFailed("runtime closing: no new containers")
        digest = self.images.digest(spec.image)
        short, cdir = self.state.new_container_dir()
        name = f"skillopt-{self.config.host_id}-{short}"
        sock_path = cdir / "control" / "runner.sock"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        t0 = time.monotonic()
        conn: RunnerConnection | None = None
        try:
            listener.bind(str(sock_path))
            # The runner runs as an unprivileged uid: it needs write permission to connect.
            sock_path.chmod(0o666)
            listener.listen(1)
            container_id = self._create_and_start(spec, name, cdir, image_id=digest)
            conn_sock = self._accept(listener, container_id, name, spec)
            conn = RunnerConnection(conn_sock)
            hello = self._hello(conn_sock, name)
            # The one inspect of a creation: the container's host PID, for its memory cgroup.
            state = self.engine.client.api.inspect_container(container_id).get("State") or {}
            pid = state.get("Pid", 0)
            return ContainerHandle(
                name=name,
                id=container_id,
                spec=spec,
                dir=cdir,
                conn=conn,
                image_digest=digest,
                created_at=time.time(),
                hello=hello,
                memory_cgroup=memory_cgroup(pid),
                # Under gVisor the cgroup holds the sandbox kernel, not the container's programs.
                pids_cgroup=None if self.engine.runtime_name(spec).startswith("runsc") else pids_cgroup(pid),
                start_s=time.monotonic() - t0,
            )
        except BaseException as exc:
            if conn is not None:
                conn.close()
            self.engine.remove(name)
            self.state.remove(cdir)
            failure = self._failure(exc, spec)
            if failure is exc:
                raise
            raise failure from exc
        finally:
            listener.close()
            with contextlib.suppress(FileNotFoundError):
                sock_path.unlink()

    def _failure(self, exc: BaseException, spec: ContainerSpec) -> BaseException:
        """What a failed creation raises: ours as they are, the engine's and the connection's
        as :class:`ContainerStartFailed` (or :class:`ImageMissing`)."""
        if isinstance(exc, ContainerStartFailed | ImageMissing):
            return exc
        if isinstance(exc, docker.errors.ImageNotFound):
            self.images.forget(spec.image)  # the resolved ID is gone: look the tag up again
            return ImageMissing(f"runtime image {spec.image!r} is not built; run: bash docker/build.sh")
        if isinstance(exc, docker.errors.DockerException | OSError | EOFError | ValueError):
            return ContainerStartFailed(f"could not start a rollout container: {exc}")
        return exc

    def _create_and_start(self, spec: ContainerSpec, name: str, cdir: Path, *, image_id: str) -> str:
        """Create and start the container; its id. The SDK's ``containers.run`` inspects right
        after the create (to build a model object) and the PID needed another inspect after the
        runner's hello: the low-level API makes it create + start + that one inspect, a quarter
        fewer engine round trips per container on the pool's hot path."""
        api = self.engine.client.api
        version = api._version  # type: ignore[attr-defined]  # what create_container() passes itself
        kwargs = {**self.run_kwargs(spec, name, cdir), "image": image_id, "version": version}
        container_id = api.create_container(**_create_container_args(kwargs))["Id"]
        if self._aborting.is_set():
            # The runtime began closing while the engine created it: close's sweep may have
            # run already, so nobody else would remove it (the caller's cleanup does now).
            raise ContainerStartFailed(f"runtime closing: creation of {name} aborted")
        api.start(container_id)
        return container_id

    def _accept(
        self, listener: socket.socket, container_id: str, name: str, spec: ContainerSpec
    ) -> socket.socket:
        api = self.engine.client.api
        deadline = time.monotonic() + self.config.start_timeout_s
        # Wake up now and then to notice a container that died before connecting.
        listener.settimeout(0.5)
        while True:
            try:
                conn, _ = listener.accept()
                return conn
            except TimeoutError:
                pass
            if self._aborting.is_set():
                raise ContainerStartFailed(f"runtime closing: creation of {name} aborted")
            state = api.inspect_container(container_id).get("State") or {}
            if state.get("Status") in ("exited", "dead"):
                logs = api.logs(container_id, tail=20).decode("utf-8", "replace").strip()
                raise ContainerStartFailed(
                    f"container {name} exited before its runner connected "
                    f"(exit {state.get('ExitCode')}): {logs[-1500:]}"
                )
            if time.monotonic() > deadline:
                raise ContainerStartFailed(
                    f"runner of {name} did not connect within {self.config.start_timeout_s:.0f}s "
                    f"(image {spec.image})"
                )

    def _hello(self, sock: socket.socket, name: str) -> Hello:
        """The runner's first message, within the start timeout; :meth:`abort` cuts the wait
        short (it shuts the socket down)."""
        with self._lock:
            self._starting.add(sock)
        try:
            if self._aborting.is_set():
                raise ContainerStartFailed(f"runtime closing: creation of {name} aborted")
            sock.settimeout(self.config.start_timeout_s)
            try:
                header, _ = recv_message(sock, max_size=0)
                hello = Hello.decode(header)
            except ProtocolError as exc:
                raise ContainerStartFailed(f"runner of {name} spoke an unexpected protocol: {exc}") from None
            except TimeoutError:
                raise ContainerStartFailed(
                    f"runner of {name} connected but sent nothing within {self.config.start_timeout_s:.0f}s"
                ) from None
            except (EOFError, OSError) as exc:
                if self._aborting.is_set():
                    raise ContainerStartFailed(f"runtime closing: creation of {name} aborted") from exc
                raise
            if hello.type != "hello" or hello.protocol != PROTOCOL_VERSION:
                raise ContainerStartFailed(f"runner of {name} spoke an unexpected protocol: {header}")
            sock.settimeout(None)
            return hello
        finally:
            with self._lock:
                self._starting.discard(sock)

    def run_kwargs(self, spec: ContainerSpec, name: str, cdir: Path) -> dict[str, Any]:
        """The container's settings (as the SDK's ``containers.run`` takes them)."""
        uid, _, gid = spec.user.partition(":")
        gid = gid or uid
        kwargs: dict[str, Any] = {
            "image": spec.image,
            "name": name,
            "command": _runner_command(spec),
            "user": spec.user,
            "working_dir": WORKSPACE,
            "hostname": "sandbox",
            "environment": {**SANDBOX_ENV, **spec.env},
            "network_mode": spec.network_mode,
            "read_only": spec.read_only_root,
            "tmpfs": {
                "/tmp": f"rw,nosuid,nodev,size={spec.tmp_size_bytes},nr_inodes={spec.tmp_inodes},mode=1777",
                WORKSPACE: (
                    f"rw,{'exec,' if spec.workspace_exec else ''}nosuid,nodev,size={spec.workspace_size_bytes},nr_inodes={spec.workspace_inodes},"
                    f"uid={uid},gid={gid},mode=0700"
                ),
            },
            "mounts": [
                Mount(_RUNNER_MOUNT, str(self.runner_dir), type="bind", read_only=True),
                Mount(_CONTROL_MOUNT, str(cdir / "control"), type="bind", read_only=True),
                *(
                    Mount(path, str(cdir / "skill"), type="bind", read_only=True)
                    for path in spec.skill_mounts
                ),
                *(
                    Mount(path, str(cdir / "skills"), type="bind", read_only=True)
                    for path in spec.skills_roots
                ),
            ],
            **_hardening(spec),
            "labels": {
                LABEL_MANAGED: "1",
                LABEL_HOST: self.config.host_id,
                LABEL_INSTANCE: self.instance,
                LABEL_OWNER: self.owner_label,
                LABEL_SPEC: spec.key,
                LABEL_EXPIRES: str(int(time.time() + self.config.max_container_lifetime_s)),
            },
            "log_config": LogConfig(type="json-file", config={"max-size": "1m", "max-file": "1"}),
            "auto_remove": False,
        }
        if spec.runtime:
            kwargs["runtime"] = spec.runtime
        return kwargs


def _runner_command(spec: ContainerSpec) -> list[str]:
    """The container's command: the image's Python runs the runner package's entry point."""
    return [
        "python3",
        # Isolated mode, unless Docker's init runs (only to debug the runner: it is then not
        # PID 1 and the program could signal it; see ContainerSpec.docker_init).
        *([] if spec.docker_init else ["-I"]),
        f"{_RUNNER_MOUNT}/runner.py",
        "--connect",
        f"{_CONTROL_MOUNT}/runner.sock",
        "--preimport",
        ",".join(spec.preimport),
        "--import-on-demand",
        ",".join(spec.import_on_demand),
    ]


def _hardening(spec: ContainerSpec) -> dict[str, Any]:
    """No privileges, and the spec's limits."""
    return {
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges:true"],
        "privileged": False,
        "pids_limit": spec.pids_limit,
        "mem_limit": spec.memory_bytes,
        "memswap_limit": spec.memory_bytes,  # = memory: no swap
        "nano_cpus": int(spec.cpus * 1e9),
        "shm_size": spec.shm_size_bytes,
        "ulimits": [
            Ulimit(name="nofile", soft=spec.nofile, hard=spec.nofile),
            Ulimit(name="fsize", soft=spec.fsize_bytes, hard=spec.fsize_bytes),
            Ulimit(name="core", soft=0, hard=0),
        ],
        "init": spec.docker_init,
        "ipc_mode": "private",
    }
