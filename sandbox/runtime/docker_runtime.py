"""Hardened rollout containers on a local Docker engine (docker SDK).

A container here is single-use: created with every hardening default of :class:`ContainerSpec`,
started with the runner (``runner/runner.py``) as its main process under Docker's init, used by
one rollout, then removed. The service talks to the runner over one unix-socket connection that
the runner opens to a socket the service created in the container's control directory.

Host layout under ``state_dir``::

    runner/runner.py                 the runner script, mounted read-only at /opt/skillopt
    c/<short-id>/control/            runner.sock (mounted read-only at /control)
    c/<short-id>/skill/              SKILL.md (mounted read-only at /skill)
    c/<short-id>/lease.json          which rollout holds the container (labels are immutable)
    lock                             flock: one service per state dir
"""

from __future__ import annotations

import contextlib
import enum
import fcntl
import hashlib
import itertools
import json
import os
import shutil
import socket
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import docker
import docker.errors
import structlog
from docker.models.containers import _create_container_args  # the SDK's run() kwargs -> API
from docker.types import LogConfig, Mount, Ulimit

from sandbox.runtime.base import RolloutSandbox, SandboxRuntime
from sandbox.runtime.labels import (
    LABEL_EXPIRES,
    LABEL_HOST,
    LABEL_INSTANCE,
    LABEL_MANAGED,
    LABEL_OWNER,
    LABEL_SPEC,
)
from sandbox.runtime.owner import Owner, current_owner, owner_gone
from sandbox.runtime.runner.protocol import (
    CANCEL,
    OUTPUT_CHUNK_BYTES,
    PROTOCOL_VERSION,
    Hello,
    Message,
    ProtocolError,
    check_reply,
    encode_request,
    is_output,
    recv_message,
    send_message,
)
from sandbox.runtime.spec import ContainerSpec, RuntimeConfig
from skillopt.errors import (
    ConfigError,
    ContainerStartFailed,
    ImageMissing,
    SandboxUnavailable,
)

__all__ = [
    "LABEL_HOST",
    "LABEL_MANAGED",
    "LABEL_OWNER",
    "ContainerHandle",
    "ContainerSummary",
    "DockerRuntime",
    "ReapReport",
    "RunnerConnection",
    "SlotState",
    "list_containers",
]

log = structlog.get_logger("skillopt.sandbox.runtime")


#: The runner package, mounted read-only into every container (see ``runner/runner.py``).
RUNNER_PACKAGE = Path(__file__).parent / "runner"
#: Largest reply payload from a runner unless the request allows more (only reads carry one).
_MAX_REPLY_BYTES = 1024 * 1024
R = TypeVar("R", bound=Message)


class SlotState(enum.Enum):
    """Lifecycle of a pooled container."""

    CREATING = "creating"  # docker create/start issued, runner not connected yet
    IDLE = "idle"  # runner connected and waiting; nobody holds it
    LEASED = "leased"  # held by exactly one rollout
    DRAINING = "draining"  # being removed
    DEAD = "dead"  # removed (or found dead)


class RunnerConnection:
    """The service's end of the runner protocol (framing shared with the runner itself)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._next_id = 0
        self.closed = False

    def call(
        self,
        request: Message,
        payload: bytes = b"",
        *,
        reply: type[R],
        timeout_s: float,
        max_reply_bytes: int = _MAX_REPLY_BYTES,
        on_output: Callable[[int, bytes], None] | None = None,
        cancelled: threading.Event | None = None,
    ) -> tuple[R, bytes]:
        """Send one request and wait for its reply (of type ``reply``).

        Args:
            max_reply_bytes: largest reply payload accepted (a read's ``max_bytes``); the
                runner shares its uid with the code it runs, so its replies are bounded
                before they are read, never trusted to be.
            on_output: for a streaming execution, called with ``(fd, bytes)`` for every
                output message the runner sends before its reply (each at most 64 KiB).
            cancelled: for a streaming execution, its cancel flag. Checked once the request is
                out: a :meth:`cancel_execution` sent before the request reached the runner was
                ignored there (nothing ran yet), so a flag already set sends one after it.

        Raises:
            RunnerError: the runner refused the request.
            TimeoutError: no reply within ``timeout_s``.
            EOFError: the runner went away (container killed or crashed), or broke the protocol
                (a reply larger than allowed, or malformed: the connection is closed).
        """
        with self._lock:
            self._next_id += 1
            deadline = time.monotonic() + timeout_s
            try:
                with self._send_lock:
                    self._sock.settimeout(timeout_s)
                    send_message(self._sock, encode_request(request, self._next_id), payload)
                    if cancelled is not None and cancelled.is_set():
                        send_message(self._sock, CANCEL)
                while True:
                    self._sock.settimeout(max(deadline - time.monotonic(), 0.001))
                    header, data = recv_message(self._sock, max_size=max_reply_bytes)
                    if not is_output(header):
                        check_reply(header)
                        return reply.decode(header), data
                    if on_output is None or len(data) > OUTPUT_CHUNK_BYTES:
                        raise ProtocolError("unexpected output message")
                    on_output(2 if header.get("fd") == 2 else 1, data)
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise EOFError(str(exc)) from exc
            except ProtocolError as exc:  # oversize or garbled: out of sync
                self.closed = True
                raise EOFError(f"runner broke the protocol: {exc}") from exc
            except TimeoutError:
                self.closed = True  # the stream is out of sync now; never reuse it
                raise

    def cancel_execution(self) -> None:
        """Ask the runner to kill the streaming execution in flight (from another thread than
        the one in :meth:`call`); the call then returns the execution's reply. Never raises."""
        with self._send_lock, contextlib.suppress(OSError):
            send_message(self._sock, CANCEL)

    def is_alive(self) -> bool:
        """False when the runner closed the connection (an idle runner never sends)."""
        if self.closed:
            return False
        try:
            self._sock.settimeout(0)
            return self._sock.recv(1, socket.MSG_PEEK) != b""
        except BlockingIOError:
            return True
        except OSError:
            return False

    def abort(self) -> None:
        """Wake any thread blocked on this connection (it sees EOF) without releasing the fd.

        Closing from another thread would free the fd number while that thread still polls it;
        a socket opened meanwhile (the pool refilling) would get the number and the blocked
        thread would then read someone else's connection.
        """
        self.closed = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        """Release the connection; only when no other thread uses it any more."""
        self.abort()
        with contextlib.suppress(OSError):
            self._sock.close()


@dataclass(eq=False)
class ContainerHandle:
    """One created container and everything the service holds for it."""

    name: str
    id: str
    spec: ContainerSpec
    dir: Path
    conn: RunnerConnection
    image_digest: str
    created_at: float
    hello: Hello
    memory_cgroup: Path | None
    state: SlotState = SlotState.IDLE
    start_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def skill_dir(self) -> Path:
        return self.dir / "skill"


@dataclass(frozen=True)
class ReapReport:
    containers: tuple[str, ...]
    directories: tuple[str, ...]


class DockerRuntime(SandboxRuntime):
    """Creates, watches and removes hardened rollout containers on one Docker engine: the
    Docker implementation of :class:`sandbox.runtime.base.SandboxRuntime` (OCI runtime runc by
    default, or e.g. gVisor's runsc per :attr:`ContainerSpec.runtime`)."""

    name = "docker"

    def __init__(self, config: RuntimeConfig, client: docker.DockerClient | None = None) -> None:
        self.config = config
        self.instance = uuid.uuid4().hex[:12]
        self.state_dir = Path(config.state_dir).resolve()
        (self.state_dir / "c").mkdir(parents=True, exist_ok=True)
        if len(str(self.state_dir / "c" / ("x" * 12) / "control" / "runner.sock")) > 107:
            raise ConfigError(
                f"state dir {self.state_dir} is too deep for unix sockets (108-byte limit); use a shorter path"
            )
        self._lock_fd = self._take_state_lock()
        try:
            self.client = client or (
                docker.DockerClient(base_url=config.docker_base_url, max_pool_size=64)
                if config.docker_base_url
                else docker.from_env(max_pool_size=64)
            )
            if self.client.api.base_url.startswith("http+docker://"):
                # A unix socket takes no proxy: skip requests' per-call walk of the environment
                # for proxy settings (~0.12 ms of the service's CPU per engine call, measured).
                self.client.api.trust_env = False
            self.client.ping()
        except docker.errors.DockerException as exc:
            raise SandboxUnavailable(
                f"cannot reach the Docker engine ({exc}); start it (scripts/setup.sh does) or set DOCKER_HOST"
            ) from exc
        self.runner_sha256, self._runner_dir = self._install_runner()
        self._images: dict[str, tuple[str, dict[str, str]]] = {}  # tag -> (ID, labels)
        self._live: dict[str, ContainerHandle] = {}
        self._live_lock = threading.Lock()
        self._aborting = threading.Event()
        self._starting: set[socket.socket] = set()  # runner sockets waiting for their hello
        self._engine_version = self.client.version().get("Version", "")
        info = self.client.info()
        #: The engine's default OCI runtime (what a spec with ``runtime=""`` runs under).
        self.default_runtime: str = info.get("DefaultRuntime") or "runc"
        self._runtimes: dict[str, Any] = info.get("Runtimes") or {}
        #: This process as the owner of what it creates (the label other hosts sweep by).
        try:
            self.owner: Owner = current_owner(self._running_since)
        except docker.errors.DockerException:
            self.owner = current_owner()

    # -- OCI runtimes ------------------------------------------------------------------------

    def available_runtimes(self) -> tuple[str, ...]:
        return tuple(sorted(self._runtimes))

    @property
    def engine_version(self) -> str:
        return f"Docker {self._engine_version}" if self._engine_version else ""

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

    # -- setup -------------------------------------------------------------------------------

    def _take_state_lock(self) -> int:
        fd = os.open(self.state_dir / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            os.close(fd)
            raise ConfigError(
                f"another sandbox service is using {self.state_dir}; give each service its own --state-dir"
            ) from exc
        return fd

    def _install_runner(self) -> tuple[str, Path]:
        """Copy the runner package next to the container dirs (bind mounts need a host path),
        in a directory named by its digest (:func:`runner_digest`)."""
        sources = runner_sources()
        digest = runner_digest(sources)
        target_dir = self.state_dir / "runner" / digest[:16]
        for name, source in sources.items():
            target = target_dir / name
            if not target.exists() or target.read_bytes() != source:
                target_dir.mkdir(parents=True, exist_ok=True)
                tmp = target.with_suffix(".tmp")
                tmp.write_bytes(source)
                tmp.chmod(0o644)
                tmp.replace(target)
        target_dir.chmod(0o755)
        return digest, target_dir

    def image_digest(self, image: str) -> str:
        """Image ID (``sha256:…``) of a locally built image, resolved once: this runtime then
        creates every container of ``image`` from that ID, so the digest it reports is the one
        its containers run even when the tag is rebuilt meanwhile (a restart picks the new one).

        Raises:
            ImageMissing: the image is not on this host.
            SandboxUnavailable: the engine did not answer.
        """
        return self._image(image)[0]

    def image_labels(self, image: str) -> dict[str, str]:
        """The image's ``org.skillopt.*`` labels (build provenance); ``{}`` when unknown."""
        try:
            labels = self._image(image)[1]
        except (ImageMissing, SandboxUnavailable):
            return {}
        return {k: v for k, v in labels.items() if k.startswith("org.skillopt.")}

    def _image(self, image: str) -> tuple[str, dict[str, str]]:
        # One inspect per image for the runtime's life: Describe (polled by every controller's
        # health watch) used to inspect the image on each call.
        known = self._images.get(image)
        if known is None:
            try:
                found = self.client.images.get(image)
            except docker.errors.ImageNotFound as exc:
                raise ImageMissing(
                    f"runtime image {image!r} is not built on this host; run: bash docker/build.sh"
                ) from exc
            except docker.errors.DockerException as exc:
                raise SandboxUnavailable(f"Docker engine error looking up {image!r}: {exc}") from exc
            known = self._images[image] = (found.id, dict(found.labels or {}))
        return known

    # -- containers --------------------------------------------------------------------------

    def create(self, spec: ContainerSpec) -> ContainerHandle:
        """Create and start one container and wait for its runner to connect.

        Raises:
            ImageMissing: the spec's image is not built.
            ContainerStartFailed: Docker refused, or the runner did not come up in time.
        """
        if self._aborting.is_set():
            raise ContainerStartFailed("runtime closing: no new containers")
        digest = self.image_digest(spec.image)
        short = uuid.uuid4().hex[:12]
        name = f"skillopt-{self.config.host_id}-{short}"
        # Short directory names: a unix socket path must fit in 108 bytes.
        cdir = self.state_dir / "c" / short
        control, skill = cdir / "control", cdir / "skill"
        for d in (control, skill):
            d.mkdir(parents=True)
            d.chmod(0o755)
        sock_path = control / "runner.sock"
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
            state = self.client.api.inspect_container(container_id).get("State") or {}
            handle = ContainerHandle(
                name=name,
                id=container_id,
                spec=spec,
                dir=cdir,
                conn=conn,
                image_digest=digest,
                created_at=time.time(),
                hello=hello,
                memory_cgroup=_memory_cgroup(state.get("Pid", 0)),
                start_s=time.monotonic() - t0,
            )
        except BaseException as exc:
            if conn is not None:
                conn.close()
            self._force_remove(name)
            shutil.rmtree(cdir, ignore_errors=True)
            if isinstance(exc, ContainerStartFailed | ImageMissing):
                raise
            if isinstance(exc, docker.errors.ImageNotFound):
                self._images.pop(spec.image, None)  # the resolved ID is gone: look the tag up again
                raise ImageMissing(
                    f"runtime image {spec.image!r} is not built; run: bash docker/build.sh"
                ) from exc
            if isinstance(exc, docker.errors.DockerException | OSError | EOFError | ValueError):
                raise ContainerStartFailed(f"could not start a rollout container: {exc}") from exc
            raise
        finally:
            listener.close()
            with contextlib.suppress(FileNotFoundError):
                sock_path.unlink()
        with self._live_lock:
            self._live[name] = handle
        log.debug("container.created", container=name, start_s=round(handle.start_s, 3))
        return handle

    def _hello(self, sock: socket.socket, name: str) -> Hello:
        """The runner's first message, within the start timeout; :meth:`abort_creations` cuts
        the wait short (it shuts the socket down)."""
        with self._live_lock:
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
            with self._live_lock:
                self._starting.discard(sock)

    def _create_and_start(self, spec: ContainerSpec, name: str, cdir: Path, *, image_id: str) -> str:
        """Create and start the container; its id. The SDK's ``containers.run`` inspects right
        after the create (to build a model object) and the PID needed another inspect after the
        runner's hello: the low-level API makes it create + start + that one inspect, a quarter
        fewer engine round trips per container on the pool's hot path."""
        kwargs = {
            **self._run_kwargs(spec, name, cdir),
            "image": image_id,
            "version": self.client.api._version,
        }
        container_id = self.client.api.create_container(**_create_container_args(kwargs))["Id"]
        if self._aborting.is_set():
            # The runtime began closing while the engine created it: close's sweep may have
            # run already, so nobody else would remove it (the caller's cleanup does now).
            raise ContainerStartFailed(f"runtime closing: creation of {name} aborted")
        self.client.api.start(container_id)
        return container_id

    def _accept(
        self, listener: socket.socket, container_id: str, name: str, spec: ContainerSpec
    ) -> socket.socket:
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
            state = self.client.api.inspect_container(container_id).get("State") or {}
            if state.get("Status") in ("exited", "dead"):
                logs = self.client.api.logs(container_id, tail=20).decode("utf-8", "replace").strip()
                raise ContainerStartFailed(
                    f"container {name} exited before its runner connected "
                    f"(exit {state.get('ExitCode')}): {logs[-1500:]}"
                )
            if time.monotonic() > deadline:
                raise ContainerStartFailed(
                    f"runner of {name} did not connect within {self.config.start_timeout_s:.0f}s "
                    f"(image {spec.image})"
                )

    def _run_kwargs(self, spec: ContainerSpec, name: str, cdir: Path) -> dict[str, Any]:
        uid, _, gid = spec.user.partition(":")
        gid = gid or uid
        env = {
            "HOME": "/workspace",
            "TMPDIR": "/tmp",
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
            "MPLCONFIGDIR": "/tmp",
            **spec.env,
        }
        kwargs: dict[str, Any] = {
            "image": spec.image,
            "name": name,
            "command": [
                "python3",
                "-I",
                "/opt/skillopt/runner.py",
                "--connect",
                "/control/runner.sock",
                "--preimport",
                ",".join(spec.preimport),
                "--import-on-demand",
                ",".join(spec.import_on_demand),
            ],
            "user": spec.user,
            "working_dir": "/workspace",
            "hostname": "sandbox",
            "environment": env,
            "network_mode": spec.network_mode,
            "read_only": spec.read_only_root,
            "tmpfs": {
                "/tmp": f"rw,nosuid,nodev,size={spec.tmp_size_bytes},nr_inodes={spec.tmp_inodes},mode=1777",
                "/workspace": (
                    f"rw,nosuid,nodev,size={spec.workspace_size_bytes},nr_inodes={spec.workspace_inodes},"
                    f"uid={uid},gid={gid},mode=0700"
                ),
            },
            "mounts": [
                Mount("/opt/skillopt", str(self._runner_dir), type="bind", read_only=True),
                Mount("/control", str(cdir / "control"), type="bind", read_only=True),
                *(
                    Mount(path, str(cdir / "skill"), type="bind", read_only=True)
                    for path in spec.skill_mounts
                ),
            ],
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
            "labels": {
                LABEL_MANAGED: "1",
                LABEL_HOST: self.config.host_id,
                LABEL_INSTANCE: self.instance,
                LABEL_OWNER: self.owner.label(),
                LABEL_SPEC: spec.key,
                LABEL_EXPIRES: str(int(time.time() + self.config.max_container_lifetime_s)),
            },
            "log_config": LogConfig(type="json-file", config={"max-size": "1m", "max-file": "1"}),
            "auto_remove": False,
        }
        if spec.runtime:
            kwargs["runtime"] = spec.runtime
        if spec.docker_init:
            # The runner is then not PID 1 and the program could signal it; see ContainerSpec.
            kwargs["command"].remove("-I")
        return kwargs

    def lease(
        self,
        handle: ContainerHandle,
        rollout_id: str,
        *,
        output_limit_bytes: int = 64 * 1024,
        deadline: float | None = None,
        cancel: threading.Event | None = None,
    ) -> RolloutSandbox:
        """Hand a created container to one rollout (recorded in its lease file)."""
        from sandbox.runtime.lease import DockerSandbox

        handle.state = SlotState.LEASED
        if rollout_id:
            self.write_lease(handle, rollout_id)
        return DockerSandbox(
            self, handle, output_limit_bytes=output_limit_bytes, deadline=deadline, cancel=cancel
        )

    def alive(self, handle: ContainerHandle) -> bool:
        """Whether an idle container's runner is still connected."""
        return handle.conn.is_alive()

    def abort_creations(self) -> None:
        """Make creations in flight give up (within half a second) and refuse new ones: the
        service is closing, and a creation slowed down by a loaded machine must not hold the
        shutdown for the runner's whole start timeout."""
        self._aborting.set()
        with self._live_lock:
            starting = list(self._starting)
        for sock in starting:  # a creation waiting for its runner's hello sees EOF now
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def kill(self, handle: ContainerHandle) -> None:
        """Kill a container now (cancellation, backstop timeout); removal happens in destroy."""
        handle.conn.abort()
        with contextlib.suppress(docker.errors.DockerException):
            self.client.api.kill(handle.id)

    def destroy(self, handle: ContainerHandle) -> None:
        """Remove a container and its host directories."""
        handle.state = SlotState.DRAINING
        handle.conn.close()
        self._force_remove(handle.id)
        shutil.rmtree(handle.dir, ignore_errors=True)
        handle.state = SlotState.DEAD
        with self._live_lock:
            self._live.pop(handle.name, None)

    def _remove_all(self, refs: list[str]) -> None:
        """Remove containers in parallel (a loaded engine takes seconds per removal)."""
        if len(refs) <= 1:
            for ref in refs:
                self._force_remove(ref)
            return
        with ThreadPoolExecutor(max_workers=min(8, len(refs)), thread_name_prefix="remove") as ex:
            list(ex.map(self._force_remove, refs))

    def _force_remove(self, ref: str) -> None:
        try:
            self.client.api.remove_container(ref, force=True, v=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            # "removal already in progress" is fine; anything else the reaper retries later.
            if "already in progress" not in str(exc):
                log.warning("container.remove_failed", container=ref, error=str(exc))

    def oom_kills(self, handle: ContainerHandle) -> int | None:
        """The container's OOM-kill counter, read from its memory cgroup on the host."""
        if handle.memory_cgroup is None:
            return None
        return _read_oom_kill(handle.memory_cgroup)

    def write_lease(self, handle: ContainerHandle, rollout_id: str) -> None:
        """Record which rollout holds the container (labels cannot change after creation).

        Raises:
            SandboxUnavailable: the state dir cannot be written (a full disk).
        """
        try:
            (handle.dir / "lease.json").write_text(
                json.dumps({"rollout_id": rollout_id, "leased_at": time.time()})
            )
        except OSError as exc:
            raise SandboxUnavailable(
                f"host state dir: cannot record the lease: {exc.strerror or exc}"
            ) from exc

    def live_count(self) -> int:
        with self._live_lock:
            return len(self._live)

    # -- reaping -----------------------------------------------------------------------------

    def reap(self, *, startup: bool = False) -> ReapReport:
        """Remove containers and directories this host no longer owns.

        On startup (and again at close, once our own containers are gone) every container
        labelled with this host id belongs to a previous instance (crash, ``kill -9``) and is
        removed. Periodically: containers of other instances of this host, containers of ours
        the runtime does not know, and expired containers of any skillopt host. At any time:
        containers and exec-agent networks of any host id whose owning process is provably gone
        (a SIGKILLed host, a killed CLI; see :mod:`sandbox.runtime.owner`). Directories without
        a live container go too.
        """
        removed: list[str] = []
        now = time.time()
        try:
            containers = list_containers(self.client, f"{LABEL_MANAGED}=1")
        except docker.errors.DockerException as exc:
            log.warning("reaper.list_failed", error=str(exc))
            return ReapReport((), ())
        with self._live_lock:
            live = set(self._live)
        doomed: list[str] = []
        gone = self._owner_check()
        for c in containers:
            labels = c.labels
            ours = labels.get(LABEL_HOST) == self.config.host_id
            expired = _as_float(labels.get(LABEL_EXPIRES)) < now
            if ours and (startup or labels.get(LABEL_INSTANCE) != self.instance):
                reason = "previous-instance"
            elif ours and c.name not in live and now - c.created > 120.0:
                reason = "unknown-to-runtime"
            elif expired:
                reason = "expired"
            elif not ours and gone(labels.get(LABEL_OWNER)):
                reason = "owner-gone"
            else:
                continue
            doomed.append(c.id)
            removed.append(c.name)
            log.info("reaper.removed", container=c.name, reason=reason)
        self._remove_all(doomed)
        dead = set(doomed)
        self._reap_networks(gone, busy={c.labels.get(LABEL_HOST) for c in containers if c.id not in dead})
        dirs: list[str] = []
        with self._live_lock:
            live_dirs = {h.dir.name for h in self._live.values()}
        root = self.state_dir / "c"
        for d in root.iterdir() if root.exists() else ():
            if d.name not in live_dirs and (startup or _mtime_age(d) > 120.0):
                shutil.rmtree(d, ignore_errors=True)
                dirs.append(d.name)
        return ReapReport(tuple(removed), tuple(dirs))

    def _running_since(self, container_id: str) -> str | None:
        """``State.StartedAt`` of a running container; None when it is gone or stopped.

        Raises:
            docker.errors.DockerException: the engine did not answer.
        """
        try:
            state = self.client.api.inspect_container(container_id).get("State") or {}
        except docker.errors.NotFound:
            return None
        return str(state.get("StartedAt", "")) if state.get("Running") else None

    def _owner_check(self) -> Callable[[str | None], bool]:
        """``gone(label)`` for one reap: each owner decided once (an engine lookup for owners
        that run in a container; an engine error decides "alive")."""
        decided: dict[str, bool] = {self.owner.label(): False}

        def gone(label: str | None) -> bool:
            if not label:
                return False
            if label not in decided:
                try:
                    decided[label] = owner_gone(label, self.owner, self._running_since)
                except docker.errors.DockerException:
                    decided[label] = False
            return decided[label]

        return gone

    def _reap_networks(self, gone: Callable[[str | None], bool], busy: set[str | None]) -> None:
        """Remove exec-agent networks (and their firewall rules) whose owner is gone, unless a
        container of their host id remains (``busy``)."""
        from sandbox.gateway.network import remove_host_network  # the gateway imports us

        try:
            networks = self.client.api.networks(filters={"label": f"{LABEL_MANAGED}=1"})
        except docker.errors.DockerException as exc:
            log.warning("reaper.list_failed", error=str(exc))
            return
        for net in networks:
            labels = net.get("Labels") or {}
            host = labels.get(LABEL_HOST, "")
            mine_or_busy = not host or host in busy or host == self.config.host_id
            if not mine_or_busy and gone(labels.get(LABEL_OWNER)) and remove_host_network(self.client, host):
                log.info("reaper.removed_network", network=net.get("Name"), reason="owner-gone")

    def close(self) -> None:
        """Remove every container this runtime still knows, then sweep by label (a create that
        a killed predecessor left in flight can land after our startup reap), and release the
        state dir."""
        self._aborting.set()
        with self._live_lock:
            handles = list(self._live.values())
        if handles:
            with ThreadPoolExecutor(max_workers=min(8, len(handles)), thread_name_prefix="close") as ex:
                list(ex.map(self.destroy, handles))
        report = self.reap(startup=True)
        if report.containers:
            log.info("reaper.swept_at_close", containers=len(report.containers))
        with contextlib.suppress(OSError):
            os.close(self._lock_fd)
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


def runner_sources() -> dict[str, bytes]:
    """The runner package's files (name -> content): its Python modules, nothing generated."""
    return {p.name: p.read_bytes() for p in sorted(RUNNER_PACKAGE.glob("*.py"))}


def runner_digest(sources: dict[str, bytes]) -> str:
    """SHA-256 over the runner package's files in name order (each name, its length and its
    content): what Describe reports as ``runner_sha256``."""
    h = hashlib.sha256()
    for name in sorted(sources):
        h.update(f"{name}\0{len(sources[name])}\0".encode())
        h.update(sources[name])
    return h.hexdigest()


def _as_float(value: str | None) -> float:
    try:
        return float(value) if value is not None else float("inf")
    except ValueError:
        return float("inf")


def _mtime_age(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return 0.0


def _memory_cgroup(pid: int) -> Path | None:
    """Host path of a process's memory cgroup (v1 ``memory`` controller or the v2 unified
    hierarchy). ``None`` when the host's /proc or /sys/fs/cgroup is not visible (the service
    runs in a container without them): the runner's own reading is used then."""
    if pid <= 0:
        return None
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            candidate = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
            if (candidate / "memory.oom_control").exists():
                return candidate
        if controllers == "":
            candidate = Path("/sys/fs/cgroup") / path.lstrip("/")
            if (candidate / "memory.events").exists():
                return candidate
    return None


def _read_oom_kill(cgroup: Path) -> int | None:
    for name in ("memory.events", "memory.oom_control"):
        try:
            text = (cgroup / name).read_text()
        except OSError:
            continue
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    return None
