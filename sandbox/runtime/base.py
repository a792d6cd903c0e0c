"""The sandbox runtime contract: what any provider of rollout sandboxes implements.

Modelled on Inspect AI's ``SandboxEnvironment`` (one ABC, a short list of abstract methods,
a Raises section per method that *is* the contract, and a conformance suite that every provider
must pass: ``sandbox/runtime/conformance/``). Docker (runc, or gVisor's runsc) is the one
implementation today (``sandbox.runtime.docker``); a remote VM or a Kubernetes pod
runtime would implement the same classes and pass the same suite.

Three levels:

* :class:`SandboxRuntime` — the lifecycle on one host: ``create`` a sandbox for a
  :class:`~sandbox.runtime.spec.ContainerSpec` (a :class:`SandboxHandle`), ``lease`` it to one
  rollout or session, ``reset`` it to a verified clean slate for its tenant's next execution,
  ``kill`` / ``destroy`` it, ``reap`` what a crashed predecessor left, ``close``. The warm pool
  (``pool.PoolManager``), the rollout service and the session manager only use this interface.
* :class:`RolloutSandbox` — one leased sandbox as the trusted side drives it for a rollout:
  execute, read, write, list in the workspace, with typed errors. A failing program is data
  (``ExecOutcome``); a dead sandbox, a timeout or a cancellation is an exception. An env's
  agent gets it as ``sandbox.runtime.lease.LeasedSandbox`` (the same methods, after the skill
  package is placed, executions traced).
* :class:`SessionSandbox` — the same sandbox driven by its owner command by command (the
  sandbox API's sessions): streaming execution with cancel, files at any path the sandbox's
  user may use, and background processes that outlive a command (:class:`Sweep`, defined
  with the runner's protocol, which reads it).

Errors (all in :mod:`skillopt.errors`): ``SandboxFileMissing`` (no such file),
``SandboxFileRefused`` (a link, directory or special file: never followed or read),
``OutputLimitExceeded`` (larger than asked for), ``InvalidRequest`` (a path outside the
workspace), ``SandboxPermissionDenied``, ``SandboxIsADirectory``, ``SandboxFileTooLarge``
(sessions' file errors), ``SandboxUnavailable`` (the sandbox died), ``RolloutTimeout`` (the rollout's wall
time ran out), ``Cancelled``, ``OOMKilled``, ``ImageMissing``, ``ContainerStartFailed``,
``SandboxResetFailed`` (a used sandbox could not be proven clean).
"""

from __future__ import annotations

import abc
import enum
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from sandbox.runtime.runner.protocol import Sweep
from sandbox.runtime.spec import ContainerSpec, RuntimeConfig
from skillopt.agents.sandbox import ExecOutcome, FileEntry
from skillopt.types import SkillVersion

__all__ = [
    "ReapReport",
    "ResetReport",
    "RolloutSandbox",
    "SandboxHandle",
    "SandboxRuntime",
    "SessionSandbox",
    "SlotState",
    "Sweep",
]


class SlotState(enum.Enum):
    """Lifecycle of a created sandbox (the warm pool's slots)."""

    CREATING = "creating"  # being created, not taking work yet
    IDLE = "idle"  # taking work; nobody holds it
    LEASED = "leased"  # held by exactly one rollout or session
    DRAINING = "draining"  # being removed
    DEAD = "dead"  # removed (or found dead)


@dataclass(eq=False, kw_only=True)
class SandboxHandle:
    """One created sandbox as the pool and the service hold it: what every runtime fills in.
    A runtime subclasses it with what it needs itself (Docker: the container id, its runner
    connection, its host directories)."""

    #: Unique on the host (the container's name for Docker).
    name: str
    spec: ContainerSpec
    #: The content digest of the image it runs (reported in results).
    image_digest: str
    #: Unix time of its creation.
    created_at: float
    state: SlotState = SlotState.IDLE
    #: Seconds its creation took.
    start_s: float = 0.0
    #: The tenant it serves (bound at its first lease: a sandbox never serves another); "" =
    #: none yet, or a holder without a tenant (then it is never reused).
    tenant: str = ""
    #: Executions (leases: a rollout, a session, a code run) it has served.
    executions: int = 0
    #: Why it must not be reused ("" = nothing against it so far): see :meth:`spoil`.
    taint: str = ""
    #: ``time.monotonic()`` when it last became idle in its pool (the pool's; the least
    #: recently used idle containers go first when there are too many).
    idle_since: float = 0.0

    def spoil(self, reason: str) -> None:
        """Mark it never to be reused (a kill, a timeout, an out-of-memory kill, an output cap,
        a runner or engine error): the first reason is kept. Set by the runtime and its leased
        sandboxes; read by the pool when the sandbox comes back."""
        if not self.taint:
            self.taint = reason


@dataclass(frozen=True)
class ReapReport:
    """What one :meth:`SandboxRuntime.reap` removed."""

    #: Names of the sandboxes removed.
    containers: tuple[str, ...]
    #: Host directories removed (of sandboxes gone before).
    directories: tuple[str, ...]


@dataclass(frozen=True)
class ResetReport:
    """What one :meth:`SandboxRuntime.reset` did."""

    #: Seconds the reset took, as the host saw it (request to verified).
    duration_s: float
    #: Files and folders removed from the places the sandbox's user may write.
    files_removed: int = 0
    #: System V IPC objects removed.
    ipc_removed: int = 0
    #: Items of the runner's own state a program had changed and the reset put back.
    restored: tuple[str, ...] = ()


class RolloutSandbox(abc.ABC):
    """One sandbox leased to one rollout (never shared between rollouts or threads).

    Paths are relative POSIX paths below the sandbox's workspace.
    """

    @abc.abstractmethod
    def run_command(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        output_limit_bytes: int | None = None,
    ) -> ExecOutcome:
        """Run a program (``argv[0]`` on the sandbox's PATH) with cwd = workspace. A timeout
        kills the program's whole process tree and is reported as ``timed_out``; the kept
        stdout/stderr is the tail, at most ``output_limit_bytes`` (the lease's cap if unset).

        Raises:
            InvalidRequest: empty ``argv``.
            RolloutTimeout: the rollout's wall time ran out (before or during the run).
            OOMKilled: the sandbox itself died of memory exhaustion.
            SandboxUnavailable: the sandbox died or cannot be trusted any more.
            Cancelled: the rollout was cancelled.
        """

    @abc.abstractmethod
    def run_python(
        self,
        path: str,
        *,
        args: Sequence[str] = (),
        timeout_s: float,
        env: Mapping[str, str] | None = None,
    ) -> ExecOutcome:
        """Run a Python file of the workspace in a fresh process; as :meth:`run_command`."""

    @abc.abstractmethod
    def read_file(self, path: str, *, max_bytes: int) -> bytes:
        """The content of a regular file of the workspace. Links are never followed. (An
        output that may be missing: :func:`skillopt.agents.sandbox.read_output`; a session's
        file at any path: :meth:`SessionSandbox.read_path`.)

        Raises:
            SandboxFileMissing: nothing exists at ``path``.
            SandboxFileRefused: ``path`` (or a directory on the way) is a link, a directory or
                a special file.
            OutputLimitExceeded: the file is larger than ``max_bytes``.
            InvalidRequest: ``path`` is absolute or escapes the workspace.
            SandboxUnavailable, RolloutTimeout, Cancelled: as for :meth:`run_command`.
        """

    @abc.abstractmethod
    def write_file(self, path: str, data: bytes) -> None:
        """Create or replace a regular file (parent directories are created).

        Raises:
            InvalidRequest: ``path`` is absolute, escapes the workspace or runs through a link.
            SandboxUnavailable, RolloutTimeout, Cancelled: as for :meth:`run_command`.
        """

    @abc.abstractmethod
    def list_files(self, *, max_files: int = 1000) -> list[FileEntry]:
        """Regular files under the workspace, recursively, without following links."""

    @abc.abstractmethod
    def write_skill(self, skill: SkillVersion, *, version: str = "") -> None:
        """Place the skill package where the sandbox's read-only skill mounts show it (host
        side, replacing what an earlier call placed): SKILL.md and every file at
        ``<mount>/<path>`` for each of the spec's ``skill_mounts``, and the same at
        ``<root>/<name>/<path>`` for each of its ``skills_roots``. Executables are mode 755,
        other files 644. The sandbox's user reads and runs the package and can change nothing
        in it (no file, no mode).

        ``version`` names exactly these files, paths and modes (the service uses the package's
        tree hash with SKILL.md's as mounted): a runtime may keep what it placed for a version
        and place it again by reference (Docker: hard links) instead of by its bytes. Empty:
        placed from the bytes.

        Raises:
            InvalidRequest: a file path or the name is not a safe relative path (the service
                refuses such packages first; this is the runtime's own guard).
            SandboxUnavailable: the host could not place it (its disk).
        """

    @abc.abstractmethod
    def kill(self) -> None:
        """Kill the sandbox now; a call blocked in another thread fails with ``Cancelled``
        (when the rollout was cancelled) or ``SandboxUnavailable``."""

    @abc.abstractmethod
    def remaining_s(self) -> float | None:
        """Seconds left of the rollout's wall time (``None``: unbounded)."""


class SessionSandbox(RolloutSandbox):
    """One leased sandbox driven as a session, by its owner: any command, any path the
    sandbox's user may use. Calls are serialized; only :meth:`cancel_command` may be called
    from another thread while a command runs.

    Unlike the workspace operations of :class:`RolloutSandbox` (which the trusted side grades,
    so they never follow links), session paths may be absolute, links are followed as any
    program would, and a refusal carries the errno's own kind.
    """

    #: The sandbox it drives.
    handle: SandboxHandle
    #: The default working directory (relative paths and ``cwd`` are below it).
    workdir: str

    @abc.abstractmethod
    def exec_streaming(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        on_output: Callable[[int, bytes], None],
        output_limit_bytes: int,
        cwd: str = "",
        env: Mapping[str, str] | None = None,
        stdin: bytes = b"",
        sweep: Sweep = Sweep.ON_KILL,
        cancelled: threading.Event | None = None,
        python: str = "",
    ) -> ExecOutcome:
        """Run ``argv`` and stream its output to ``on_output(fd, bytes)`` as it comes (at most
        ``output_limit_bytes`` in all: beyond it the command is killed, ``output_limit_exceeded``).
        The outcome's tails are empty (the output was streamed). ``cancelled``: the caller's
        cancel flag, set before it calls :meth:`cancel_command`; a command whose flag is set by
        the time it reaches the sandbox is cancelled at once. ``python``: instead of ``argv``,
        run that Python file (relative to ``cwd``) as ``__main__`` in a process forked from the
        sandbox's own warm interpreter, as :meth:`run_python` does (no interpreter start:
        milliseconds instead of tens).

        Raises:
            InvalidRequest: empty ``argv`` (and no ``python``).
            OOMKilled, SandboxUnavailable: the sandbox itself died.
        """

    @abc.abstractmethod
    def cancel_command(self) -> None:
        """Kill the command running now (its call returns with ``cancelled``). Never raises."""

    @abc.abstractmethod
    def write_path(self, path: str, data: bytes) -> None:
        """Create or replace the file at ``path`` (absolute or below :attr:`workdir`).

        Raises:
            SandboxIsADirectory, SandboxPermissionDenied, SandboxFileTooLarge (no space left),
            SandboxFileMissing (a parent is a file), InvalidRequest.
        """

    @abc.abstractmethod
    def read_path(self, path: str, *, max_bytes: int) -> bytes:
        """The content of the file at ``path`` (absolute or below :attr:`workdir`), read as any
        program of the session would read it. Not :meth:`read_file`, which reads only a regular
        file of the workspace and refuses a link (the trusted side grades what it reads): here
        a link is followed, any path the sandbox's user may read is readable, and a refusal
        says the errno's kind.

        Raises:
            SandboxFileMissing, SandboxPermissionDenied, SandboxIsADirectory,
            SandboxFileTooLarge (larger than ``max_bytes``), InvalidRequest.
        """


class SandboxRuntime(abc.ABC):
    """Creates, leases and removes sandboxes on one host. Thread-safe."""

    #: Provider name, e.g. ``docker``.
    name: str = ""
    #: SHA-256 of the in-sandbox runner (reported by Describe).
    runner_sha256: str = ""
    #: The host's runtime settings (pool sizes, limits, state dir).
    config: RuntimeConfig

    @abc.abstractmethod
    def create(self, spec: ContainerSpec) -> SandboxHandle:
        """Create and start one sandbox and wait until it takes work; returns its handle.

        Raises:
            ImageMissing: the spec's image is not on this host.
            ContainerStartFailed: the sandbox could not be started, or the runtime is closing.
        """

    @abc.abstractmethod
    def lease(
        self,
        handle: SandboxHandle,
        holder: str,
        *,
        output_limit_bytes: int = 64 * 1024,
        deadline: float | None = None,
        cancel: threading.Event | None = None,
    ) -> SessionSandbox:
        """Hand a created sandbox to one rollout or session, recorded for the reaper
        (``holder``: the rollout id, or ``session/<id>``; ``deadline``: ``time.monotonic()``
        after which it is out of time; ``cancel``: set by another thread to cancel).

        Raises:
            SandboxUnavailable: the lease cannot be recorded (the host's disk).
        """

    @abc.abstractmethod
    def reset(self, handle: SandboxHandle) -> ResetReport:
        """Bring a used sandbox back to a verified clean slate, for the next execution of the
        same tenant (never another's: the pool's policy). Afterwards the next execution cannot
        observe or be influenced by the ones before: no process but the sandbox's own runner
        (whatever its session, group or state), every place the sandbox's user may write
        (workspace, ``/tmp``, ``/dev/shm``, home, message queues) empty with its start's modes
        and free room, no System V IPC object, no skill package placed, the runner's own state
        (limits, priority, affinity, descriptors, dumpability) as at its start. The runtime
        checks its own result; what it cannot restore or confirm fails the reset.

        Timing within a tenant is not covered (a page cache warmed, a module imported by the
        runner on demand): a tenant may observe its own earlier executions' speed.

        Raises:
            SandboxResetFailed: the sandbox was spoiled (:meth:`SandboxHandle.spoil`), is
                unreachable, or something could not be restored or confirmed (``reason``
                says which); the caller destroys it.
        """

    @abc.abstractmethod
    def alive(self, handle: SandboxHandle) -> bool:
        """Whether an idle sandbox can still take work."""

    @abc.abstractmethod
    def kill(self, handle: SandboxHandle) -> None:
        """Kill a sandbox now (removal happens in :meth:`destroy`). Never raises."""

    @abc.abstractmethod
    def destroy(self, handle: SandboxHandle) -> None:
        """Remove a sandbox and everything the host keeps for it. Never raises."""

    @abc.abstractmethod
    def image_digest(self, image: str) -> str:
        """The content digest of an image on this host.

        Raises:
            ImageMissing: not on this host.
        """

    @abc.abstractmethod
    def runtime_name(self, spec: ContainerSpec) -> str:
        """The isolation a sandbox of ``spec`` actually runs under (``runc``, ``runsc`` ...)."""

    @abc.abstractmethod
    def check_runtime(self, name: str) -> None:
        """Refuse an isolation runtime this host does not have.

        Raises:
            ConfigError: naming the runtimes the host has.
        """

    def runtime_has_network(self, name: str) -> bool:
        """Whether sandboxes of runtime ``name`` can join a network (exec agents need one)."""
        return True

    def image_labels(self, image: str) -> dict[str, str]:
        """The ``org.skillopt.*`` labels of an image (build hash, agent CLI versions); {} when
        unknown."""
        return {}

    def available_runtimes(self) -> tuple[str, ...]:
        """The isolation runtimes this host offers (for ``Describe``)."""
        return ()

    @property
    def engine_version(self) -> str:
        """Version of the engine behind this runtime ("" when not known)."""
        return ""

    def engine_problem(self) -> str:
        """Why the engine behind this runtime does not answer ("" when it does): one round
        trip to it (the host's health check). Never raises."""
        return ""

    def storage_problem(self, min_free_bytes: int) -> str:
        """Why the host's storage for sandboxes (control dirs, skills, leases) cannot take
        more ("" when it can): unreadable, or fewer than ``min_free_bytes`` free. Never raises."""
        return ""

    @abc.abstractmethod
    def reap(self, *, startup: bool = False) -> ReapReport:
        """Remove sandboxes this host no longer owns: a crashed predecessor's, expired ones,
        those of owners provably gone; ``startup`` (and at close): every sandbox labelled with
        this host's id that this runtime did not create."""

    @abc.abstractmethod
    def abort_creations(self) -> None:
        """Make creations in flight fail soon and refuse new ones (the host is closing)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Remove every sandbox this runtime created and release the host's resources."""
