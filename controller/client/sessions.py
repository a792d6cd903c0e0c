"""Sandbox sessions from Python: a hardened remote container you drive command by command.

::

    from controller.client.sessions import SandboxSession

    with SandboxSession.create(endpoints=["host:50051"], token_file="token") as box:
        box.write_file("main.py", b"print(6 * 7)")
        result = box.exec(["python3", "main.py"], timeout=30)
        print(result.stdout)          # "42\\n"

Placement works like the fleet executor's: ``endpoints`` is a list of ``host:port`` and
``dns:///NAME:PORT`` names; the session goes to the host with the most free session slots that
accepts it (a full or draining host is skipped). A session lives on one host; its
``SessionInfo`` says which. :class:`AsyncSandboxSession` is the same API for asyncio.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import grpc

from controller.client.isolation import isolation_refusal
from controller.client.sandbox_client import ChannelConfig, SandboxClient, map_rpc_error
from sandbox.api import convert
from sandbox.api.v1 import sandbox_pb2 as pb
from skillopt.errors import (
    ConfigError,
    Draining,
    HostFull,
    IsolationUnavailable,
    SandboxUnavailable,
    SkillOptError,
    SkillPackageUnsupported,
)
from skillopt.types import SkillVersion

if TYPE_CHECKING:
    from controller.fleet.access import FleetAccess

__all__ = [
    "AsyncSandboxSession",
    "ExecResult",
    "SandboxSession",
    "SessionEndpoints",
    "client_sessions",
    "list_sessions",
    "session_request",
]

CHUNK_BYTES = 1024 * 1024
#: Time the RPC deadline allows beyond the command's own timeout (the host enforces that one).
_DEADLINE_SLACK_S = 60.0
#: A host's refusals after which :meth:`SandboxSession.create` asks the next host: it is full,
#: drains, is gone, predates skill packages, or cannot give the required isolation.
_TRY_THE_NEXT_HOST = (HostFull, Draining, SandboxUnavailable, SkillPackageUnsupported, IsolationUnavailable)


@dataclass(frozen=True, slots=True)
class ExecResult:
    """How one command ended, with everything it wrote."""

    exit_code: int | None
    stdout: bytes
    stderr: bytes
    signal: int = 0
    timed_out: bool = False
    oom_killed: bool = False
    output_limit_exceeded: bool = False
    duration_s: float = 0.0
    #: Why the program did not start: "" (it did), "not_found", "permission", "cwd".
    spawn_error: str = ""
    message: str = ""

    @property
    def returncode(self) -> int:
        """The shell's convention: the exit code, or 128 + the signal that ended it."""
        if self.exit_code is not None:
            return self.exit_code
        return 128 + self.signal if self.signal else -1

    @property
    def success(self) -> bool:
        return self.exit_code == 0


@dataclass(frozen=True, kw_only=True)
class SessionEndpoints:
    """Where sessions are created and with which credentials.

    ``endpoints``: ``host:port`` and ``dns:///NAME:PORT`` entries. ``token``: the bearer token.
    TLS files as for the fleet. :meth:`resolve` fills them from arguments and the environment.
    """

    endpoints: tuple[str, ...]
    token: str | None = None
    tls_ca_file: str = ""
    tls_cert_file: str = ""
    tls_key_file: str = ""

    @classmethod
    def resolve(
        cls,
        endpoints: Sequence[str] | str | None = None,
        *,
        token: str | None = None,
        token_file: str | None = None,
        tls_ca_file: str = "",
        tls_cert_file: str = "",
        tls_key_file: str = "",
    ) -> SessionEndpoints:
        """From arguments, each falling back to its environment variable like every command's
        flag (:mod:`controller.fleet.access`): ``$SKILLOPT_ENDPOINTS`` (comma-separated),
        ``$SKILLOPT_TOKEN_FILE`` then ``$SKILLOPT_SANDBOX_TOKEN``, ``$SKILLOPT_TLS_CA``,
        ``$SKILLOPT_TLS_CERT`` and ``$SKILLOPT_TLS_KEY``. ``endpoints`` entries may be comma lists.

        Raises:
            ConfigError: no endpoint, a malformed one, or an unreadable token or TLS file.
        """
        from controller.fleet.access import resolve_access

        given = {
            "endpoints": endpoints,
            "token_file": token_file,
            "tls_ca_file": tls_ca_file,
            "tls_cert_file": tls_cert_file,
            "tls_key_file": tls_key_file,
        }
        labels = {k: f"{k}=" for k in given}
        return cls.from_access(resolve_access(given, token=token, labels=labels))

    @classmethod
    def from_access(cls, access: FleetAccess) -> SessionEndpoints:
        """The fleet settings every command resolves (:mod:`controller.fleet.access`)."""
        return cls(
            endpoints=access.endpoints,
            token=access.token,
            tls_ca_file=access.tls_ca_file,
            tls_cert_file=access.tls_cert_file,
            tls_key_file=access.tls_key_file,
        )

    def channels(self) -> list[ChannelConfig]:
        from controller.fleet.discovery import expand

        out: list[ChannelConfig] = []
        for endpoint in self.endpoints:
            channel = ChannelConfig(
                address=endpoint,
                token=self.token,
                tls_ca_file=self.tls_ca_file,
                tls_cert_file=self.tls_cert_file,
                tls_key_file=self.tls_key_file,
            )
            out += expand(channel)
        return out


class SandboxSession:
    """One session on one host. Thread-safe for calls that do not overlap on the same session
    (the host runs one call of a session at a time; others wait). Use as a context manager, or
    call :meth:`destroy`: a forgotten session ends at its idle TTL."""

    def __init__(self, client: SandboxClient, info: pb.SessionInfo, *, owns_client: bool = True) -> None:
        self.client = client
        self.info = info
        self._owns_client = owns_client
        self.destroyed = False

    @property
    def id(self) -> str:
        return self.info.session_id

    # -- creation ----------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        endpoints: Sequence[str] | str | SessionEndpoints | None = None,
        *,
        token: str | None = None,
        token_file: str | None = None,
        image: str = "",
        memory_bytes: int = 0,
        cpus: float = 0.0,
        output_bytes: int = 0,
        idle_ttl_s: float = 0.0,
        max_lifetime_s: float = 0.0,
        labels: Mapping[str, str] | None = None,
        network: str = "none",
        skill: SkillVersion | None = None,
        files: Mapping[str, bytes] | None = None,
        timeout_s: float = 180.0,
        isolation: str = "",
    ) -> SandboxSession:
        """Create a session on the best host of ``endpoints``.

        ``isolation``: ``gvisor`` = only a container running under gVisor will do (sent with
        the request: a host that cannot give it refuses before any container is taken, and the
        next host is tried; its ``container_runtime`` is checked too, before any command: a
        host that gives another is left and the session there ended); ``""`` = any.

        ``skill``: a package (:func:`skillopt.skill.package.load_skill`) or a lone SKILL.md
        (``SkillVersion(content=text)``), mounted read-only at ``/skill`` and, on the gateway
        network, where agent CLIs discover skills (``/workspace/.claude/skills/<name>/``,
        ``.agents/skills/<name>/``). A package goes only to a host that mounts packages.

        Raises:
            ConfigError: no endpoint; no host gives the required ``isolation`` (each one's
                runtime named).
            SessionLimit / HostFull / Draining / SandboxUnavailable / SkillPackageUnsupported:
                no host took it (the last host's refusal).
            SkillPackageRefused: the package breaks a rule (each file and rule in ``problems``).
            InvalidRequest, ImageMissing: the request itself is refused.
        """
        where = (
            endpoints
            if isinstance(endpoints, SessionEndpoints)
            else SessionEndpoints.resolve(endpoints, token=token, token_file=token_file)
        )
        request = session_request(
            image=image,
            memory_bytes=memory_bytes,
            cpus=cpus,
            output_bytes=output_bytes,
            idle_ttl_s=idle_ttl_s,
            max_lifetime_s=max_lifetime_s,
            labels=labels,
            network=network,
            skill=skill,
            files=files,
            isolation=isolation,
        )
        isolation_refusal(isolation, "")  # an unknown level is refused before any host is asked
        return cls._create_on_best(where, request, isolation=isolation, timeout_s=timeout_s)

    @classmethod
    def _create_on_best(
        cls, where: SessionEndpoints, request: pb.CreateSessionRequest, *, isolation: str, timeout_s: float
    ) -> SandboxSession:
        """Ask the hosts of ``where`` in turn, the most free slots first, until one gives a
        session with the required ``isolation``; the clients of the hosts not kept are closed."""
        refusals: list[SkillOptError] = []  # why each host asked gave no session, in order
        clients = _ranked_clients(where)
        for position, client in enumerate(clients):
            try:
                session = cls.create_on(client, request, timeout_s=timeout_s)
            except _TRY_THE_NEXT_HOST as refused:
                client.close()
                refusals.append(_refusal(refused, isolation, client.config.address))
                continue
            except SkillOptError:
                for other in clients[position:]:
                    other.close()
                raise
            # A host that predates the request's isolation field ignores it: checked here too.
            refusal = isolation_refusal(isolation, session.info.container_runtime)
            if refusal:
                session.destroy()  # closes its client; nothing ran in it
                refusals.append(
                    ConfigError(f"session isolation={isolation}: host {client.config.address} {refusal}")
                )
                continue
            for other in clients[position + 1 :]:
                other.close()
            return session
        raise _no_session(where, refusals)

    @classmethod
    def create_on(
        cls,
        client: SandboxClient,
        request: pb.CreateSessionRequest,
        *,
        timeout_s: float = 180.0,
        owns_client: bool = True,
    ) -> SandboxSession:
        """Create a session from ``request`` (:func:`session_request`) on ``client``'s host
        alone (:meth:`create` tries hosts in turn with it). ``owns_client``: whether the
        session closes ``client`` when destroyed (not for a client the caller keeps, e.g. a
        fleet's). ``client`` is never closed here, whatever happens.

        Raises:
            SkillPackageUnsupported: the request mounts a package and the host predates them.
            SessionLimit (a HostFull), Draining, SandboxUnavailable: the host is full, drains
                or is gone.
            SkillPackageRefused, InvalidRequest, ImageMissing, SkillOptError: the host refused
                the request itself (mapped from the gRPC status).
        """
        if request.skill.files or request.skill.tree_sha256:
            client.require_packages()
        try:
            info = client.call("CreateSession", request, timeout_s=timeout_s)
        except grpc.RpcError as exc:
            raise map_rpc_error(exc, address=client.config.address) from exc
        return cls(client, info, owns_client=owns_client)

    @classmethod
    def attach(
        cls, session_id: str, endpoint: str, *, token: str | None = None, token_file: str | None = None
    ) -> SandboxSession:
        """A handle on an existing session of this token at ``endpoint`` (a ``host:port``).

        Raises:
            UnknownSession: no such session of this token there.
        """
        where = SessionEndpoints.resolve([endpoint], token=token, token_file=token_file)
        client = SandboxClient(where.channels()[0])
        for info in client_sessions(client):
            if info.session_id == session_id:
                return cls(client, info)
        client.close()
        from skillopt.errors import UnknownSession

        raise UnknownSession(f"no session {session_id!r} of this token at {endpoint}")

    # -- commands and files ------------------------------------------------------------------

    def exec(
        self,
        argv: Sequence[str],
        *,
        input: bytes | str | None = None,
        cwd: str = "",
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        output_limit_bytes: int = 0,
        user: str = "",
        on_output: Callable[[int, bytes], None] | None = None,
    ) -> ExecResult:
        """Run ``argv`` in the session and wait for it. ``on_output(fd, bytes)`` sees the output
        as it comes (fd 1 stdout, 2 stderr).

        Raises:
            UserUnsupported: ``user`` is not the session's user.
            UnknownSession: the session is gone (destroyed or expired).
            OOMKilled / SandboxUnavailable: the container died.
        """
        data = input.encode("utf-8") if isinstance(input, str) else (input or b"")
        start = pb.ExecStart(
            session_id=self.id,
            argv=list(argv),
            cwd=cwd,
            env=dict(env or {}),
            timeout_s=float(timeout or 0.0),
            output_limit_bytes=output_limit_bytes,
            user=user,
        )
        deadline = (timeout or 6 * 3600.0) + _DEADLINE_SLACK_S
        out, err = bytearray(), bytearray()
        try:
            for message in self.client.call("Exec", _exec_inputs(start, data), timeout_s=deadline):
                kind = message.WhichOneof("kind")
                if kind == "exit":
                    e = message.exit
                    return ExecResult(
                        exit_code=e.exit_code if e.HasField("exit_code") else None,
                        stdout=bytes(out),
                        stderr=bytes(err),
                        signal=e.signal,
                        timed_out=e.timed_out,
                        oom_killed=e.oom_killed,
                        output_limit_exceeded=e.output_limit_exceeded,
                        duration_s=e.duration_s,
                        spawn_error=e.spawn_error,
                        message=e.message,
                    )
                chunk = message.stdout if kind == "stdout" else message.stderr
                (out if kind == "stdout" else err).extend(chunk)
                if on_output is not None:
                    on_output(1 if kind == "stdout" else 2, chunk)
        except grpc.RpcError as exc:
            raise self._error(exc) from exc
        raise SandboxUnavailable(f"{self.client.config.address}: the exec stream ended without an exit")

    def write_file(self, path: str, data: bytes | str) -> None:
        """Create or replace ``path`` (absolute, or relative to the session's workdir).

        Raises:
            SandboxIsADirectory, SandboxPermissionDenied, SandboxFileTooLarge, UnknownSession.
        """
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)

        def inputs() -> Iterator[pb.WriteFileInput]:
            yield pb.WriteFileInput(start=pb.WriteFileStart(session_id=self.id, path=path, size=len(raw)))
            view = memoryview(raw)
            for offset in range(0, len(raw), CHUNK_BYTES):
                yield pb.WriteFileInput(data=bytes(view[offset : offset + CHUNK_BYTES]))

        try:
            self.client.call("WriteFile", inputs(), timeout_s=300.0)
        except grpc.RpcError as exc:
            raise self._error(exc) from exc

    def read_file(self, path: str, *, max_bytes: int = 0) -> bytes:
        """The bytes of ``path`` (``max_bytes`` 0: the host's file limit).

        Raises:
            SandboxFileMissing, SandboxPermissionDenied, SandboxIsADirectory,
            SandboxFileTooLarge (bigger than ``max_bytes``), UnknownSession.
        """
        request = pb.ReadFileRequest(session_id=self.id, path=path, max_bytes=max_bytes)
        parts: list[bytes] = []
        try:
            for chunk in self.client.call("ReadFile", request, timeout_s=300.0):
                parts.append(chunk.data)
        except grpc.RpcError as exc:
            raise self._error(exc) from exc
        return b"".join(parts)

    def extend(self, idle_ttl_s: float = 0.0) -> pb.SessionInfo:
        """Touch the session (and give it a new idle TTL from now when ``idle_ttl_s`` > 0)."""
        try:
            self.info = self.client.call(
                "ExtendSession",
                pb.ExtendSessionRequest(session_id=self.id, idle_ttl_s=idle_ttl_s),
                timeout_s=30.0,
            )
        except grpc.RpcError as exc:
            raise self._error(exc) from exc
        return self.info

    def destroy(self) -> bool:
        """Destroy the session (idempotent); ``False`` when it was already gone."""
        if self.destroyed:
            return False
        try:
            reply = self.client.call(
                "DestroySession", pb.DestroySessionRequest(session_id=self.id), timeout_s=60.0
            )
        except grpc.RpcError as exc:
            raise self._error(exc) from exc
        finally:
            self.destroyed = True
            if self._owns_client:
                self.client.close()
        return reply.destroyed

    def _error(self, exc: grpc.RpcError) -> SkillOptError:
        return map_rpc_error(exc, address=self.client.config.address)

    def __enter__(self) -> SandboxSession:
        return self

    def __exit__(self, *exc: object) -> None:
        # A host that is gone took its session with it (or the session ends at its TTL).
        with contextlib.suppress(SkillOptError):
            self.destroy()


class AsyncSandboxSession:
    """:class:`SandboxSession` for asyncio: every call runs in a worker thread (the sync gRPC
    client releases the GIL while it waits), so many sessions proceed concurrently."""

    def __init__(self, session: SandboxSession) -> None:
        self.session = session

    @property
    def id(self) -> str:
        return self.session.id

    @property
    def info(self) -> pb.SessionInfo:
        return self.session.info

    @classmethod
    async def create(cls, *args: Any, **kwargs: Any) -> AsyncSandboxSession:
        return cls(await asyncio.to_thread(SandboxSession.create, *args, **kwargs))

    async def exec(self, argv: Sequence[str], **kwargs: Any) -> ExecResult:
        return await asyncio.to_thread(self.session.exec, argv, **kwargs)

    async def write_file(self, path: str, data: bytes | str) -> None:
        await asyncio.to_thread(self.session.write_file, path, data)

    async def read_file(self, path: str, *, max_bytes: int = 0) -> bytes:
        return await asyncio.to_thread(self.session.read_file, path, max_bytes=max_bytes)

    async def extend(self, idle_ttl_s: float = 0.0) -> pb.SessionInfo:
        return await asyncio.to_thread(self.session.extend, idle_ttl_s)

    async def destroy(self) -> bool:
        return await asyncio.to_thread(self.session.destroy)

    async def __aenter__(self) -> AsyncSandboxSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        # Shielded: a cancelled task still destroys its session.
        with contextlib.suppress(SkillOptError):
            await asyncio.shield(self.destroy())


def session_request(
    *,
    image: str = "",
    memory_bytes: int = 0,
    cpus: float = 0.0,
    output_bytes: int = 0,
    idle_ttl_s: float = 0.0,
    max_lifetime_s: float = 0.0,
    labels: Mapping[str, str] | None = None,
    network: str = "none",
    skill: SkillVersion | None = None,
    files: Mapping[str, bytes] | None = None,
    isolation: str = "",
) -> pb.CreateSessionRequest:
    """The ``CreateSession`` message for these options (their meaning: :meth:`SandboxSession.create`)."""
    request = pb.CreateSessionRequest(
        image=image,
        isolation=isolation,
        limits=pb.Limits(memory_bytes=memory_bytes, cpus=cpus, output_bytes=output_bytes),
        idle_ttl_s=idle_ttl_s,
        max_lifetime_s=max_lifetime_s,
        labels=dict(labels or {}),
        network=network,
        files=[pb.File(name=name, content=data) for name, data in (files or {}).items()],
    )
    if skill is not None:
        request.skill.CopyFrom(convert.skill_to_proto(skill))
    return request


def _refusal(refused: SkillOptError, isolation: str, address: str) -> SkillOptError:
    """What a host's refusal to create a session says: as it is, or, when the host cannot give
    the required ``isolation`` (it refused before taking a container), a :class:`ConfigError`
    naming the level and the host."""
    if not isinstance(refused, IsolationUnavailable):
        return refused
    said = refused.message.removeprefix(f"{address}: ")
    return ConfigError(f"session isolation={isolation}: host {address} refused: {said}")


def _no_session(where: SessionEndpoints, refusals: list[SkillOptError]) -> SkillOptError:
    """The error when no host gave a session: the last host's refusal, saying every host's
    reason when several were asked."""
    if not refusals:  # only dns:/// names, resolving to nothing
        return SandboxUnavailable(f"no sandbox host behind {', '.join(where.endpoints)} (no address)")
    last = refusals[-1]
    if len(refusals) > 1:  # say every host's reason, not just the last one's
        last.message = f"no sandbox host gave a session: {'; '.join(r.message for r in refusals)}"
    return last


def list_sessions(where: SessionEndpoints) -> list[pb.SessionInfo]:
    """This token's sessions on every host of ``where`` (unreachable hosts are skipped)."""
    found: list[pb.SessionInfo] = []
    for channel in where.channels():
        with SandboxClient(channel) as client:
            try:
                found += client_sessions(client)
            except SandboxUnavailable:
                continue
    return found


def client_sessions(client: SandboxClient) -> list[pb.SessionInfo]:
    """This token's sessions on ``client``'s host."""
    try:
        return list(client.call("ListSessions", pb.ListSessionsRequest(), timeout_s=30.0).sessions)
    except grpc.RpcError as exc:
        raise map_rpc_error(exc, address=client.config.address) from exc


def _ranked_clients(where: SessionEndpoints) -> list[SandboxClient]:
    """Clients of every host, the most free session slots first (draining and unreachable
    hosts last: they are still tried, a host may have recovered)."""
    channels = where.channels()
    if len(channels) == 1:  # nothing to choose: skip the Describe round trip
        return [SandboxClient(channels[0])]
    scored: list[tuple[int, int, SandboxClient]] = []
    for index, channel in enumerate(channels):
        client = SandboxClient(channel)
        try:
            d = client.describe(timeout_s=5.0)
            free = (d.max_sessions - d.sessions) if not d.draining else -1
        except SkillOptError:
            free = -2
        scored.append((-free, index, client))
    scored.sort(key=lambda t: (t[0], t[1]))
    return [client for _, _, client in scored]


def _exec_inputs(start: pb.ExecStart, data: bytes) -> Iterator[pb.ExecInput]:
    yield pb.ExecInput(start=start)
    view = memoryview(data)
    for offset in range(0, len(data), CHUNK_BYTES):
        yield pb.ExecInput(stdin=bytes(view[offset : offset + CHUNK_BYTES]))
