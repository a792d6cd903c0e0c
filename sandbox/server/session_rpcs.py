"""The session RPCs of the gRPC servicer: translate, delegate, stream (the domain logic is in
:mod:`sandbox.service.sessions`). Every call is made on behalf of the tenant whose token it
carries; every failure leaves through the proto's status table like the rollout RPCs'."""

from __future__ import annotations

import functools
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import structlog

from sandbox.api import convert
from sandbox.api.v1 import sandbox_pb2 as pb
from sandbox.service.blobs import BlobStore
from sandbox.service.rollout import RolloutService
from sandbox.service.session_policy import SESSION_USER, SessionRequest
from sandbox.service.sessions import Session, SessionManager
from sandbox.service.tenants import LOCAL_TENANT, Tenant, TenantTokens
from skillopt.agents.sandbox import ExecOutcome
from skillopt.errors import Cancelled, InvalidRequest, SandboxFileTooLarge, Unauthenticated
from skillopt.types import Limits, SkillVersion

__all__ = ["SessionRpcs"]

log = structlog.get_logger("skillopt.sandbox.sessions")

#: Bytes per message of a file or output stream (well under every message limit).
CHUNK_BYTES = 1024 * 1024
_DONE = object()


def _aborts_on_error(method: Callable[..., Any]) -> Callable[..., Any]:
    """A unary-response handler whose failures end the call through the status table."""

    @functools.wraps(method)
    def handler(self: SessionRpcs, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return method(self, request, context)
        except Exception as exc:
            self._abort(context, exc)
            raise  # pragma: no cover - abort raises

    return handler


class SessionRpcs:
    """Mixin of :class:`~sandbox.server.servicer.SandboxServicer`: the session RPCs.

    Needs ``self.sessions`` (a :class:`SessionManager`), ``self.tenants`` (``None``: the host
    runs without tokens, every caller is :data:`LOCAL_TENANT`), ``self.service`` (whose rules a
    session's skill package meets), ``self.blobs`` (content-addressed skill files) and
    ``self._abort``."""

    sessions: SessionManager | None
    tenants: TenantTokens | None
    service: RolloutService
    blobs: BlobStore

    def _abort(self, context: grpc.ServicerContext, exc: BaseException) -> None:  # pragma: no cover
        raise NotImplementedError

    def _tenant(self, context: grpc.ServicerContext) -> Tenant:
        if not self.tenants:
            return LOCAL_TENANT
        for key, value in context.invocation_metadata() or ():
            if key == "authorization":
                text = value.decode("latin-1") if isinstance(value, bytes) else value
                tenant = self.tenants.identify(text.partition(" ")[2])
                if tenant is not None:
                    return tenant
        raise Unauthenticated("invalid token")  # the interceptor checked it already

    def _manager(self) -> SessionManager:
        if self.sessions is None:
            raise InvalidRequest("this host does not offer sessions")
        return self.sessions

    # -- lifecycle ---------------------------------------------------------------------------

    @_aborts_on_error
    def CreateSession(
        self, request: pb.CreateSessionRequest, context: grpc.ServicerContext
    ) -> pb.SessionInfo:
        tenant = self._tenant(context)
        skill = None
        if request.HasField("skill"):
            # The skill as a rollout's: resolved from the token's kept files, checked the same.
            resolver = self.blobs.resolver(tenant.id)
            skill = convert.skill_from_proto(request.skill, resolver)
            resolver.check()
            self.service.check_skill(skill, skill_tree=request.skill.tree_sha256.lower())
        session = self._manager().create(tenant, _session_request(request, skill))
        return self._info(session)

    @_aborts_on_error
    def ListSessions(
        self, request: pb.ListSessionsRequest, context: grpc.ServicerContext
    ) -> pb.ListSessionsResponse:
        sessions = self._manager().list(self._tenant(context))
        return pb.ListSessionsResponse(sessions=[self._info(s) for s in sessions])

    @_aborts_on_error
    def DestroySession(
        self, request: pb.DestroySessionRequest, context: grpc.ServicerContext
    ) -> pb.DestroySessionResponse:
        destroyed = self._manager().destroy(self._tenant(context), request.session_id)
        return pb.DestroySessionResponse(destroyed=destroyed)

    @_aborts_on_error
    def ExtendSession(
        self, request: pb.ExtendSessionRequest, context: grpc.ServicerContext
    ) -> pb.SessionInfo:
        session = self._manager().extend(self._tenant(context), request.session_id, request.idle_ttl_s)
        return self._info(session)

    # -- files -------------------------------------------------------------------------------

    @_aborts_on_error
    def WriteFile(
        self, request_iterator: Iterator[pb.WriteFileInput], context: grpc.ServicerContext
    ) -> pb.WriteFileResponse:
        tenant = self._tenant(context)
        manager = self._manager()
        start = _first_start(request_iterator, "WriteFile", "WriteFileStart")
        manager.policy.check_file_size(start.size)
        with manager.buffering(start.size), manager.using(tenant, start.session_id) as session:
            data = bytearray()
            for message in request_iterator:
                if message.WhichOneof("kind") != "data":
                    raise InvalidRequest("WriteFile takes one WriteFileStart, then data chunks")
                data += message.data
                if len(data) > start.size:
                    raise SandboxFileTooLarge(
                        f"{start.path}: more data than the announced {start.size} bytes"
                    )
            if len(data) != start.size:
                raise InvalidRequest(f"{start.path}: {len(data)} bytes received, {start.size} announced")
            session.box.write_path(start.path, bytes(data))
        return pb.WriteFileResponse(size=len(data))

    def ReadFile(self, request: pb.ReadFileRequest, context: grpc.ServicerContext):
        try:
            tenant = self._tenant(context)
            manager = self._manager()
            limit = manager.config.max_file_bytes
            max_bytes = min(request.max_bytes, limit) if request.max_bytes > 0 else limit
            with manager.buffering(max_bytes), manager.using(tenant, request.session_id) as session:
                data = session.box.read_path(request.path, max_bytes=max_bytes)
        except Exception as exc:
            self._abort(context, exc)
            raise  # pragma: no cover
        view = memoryview(data)
        yield pb.FileChunk(data=bytes(view[:CHUNK_BYTES]), size=len(data))
        for offset in range(CHUNK_BYTES, len(data), CHUNK_BYTES):
            yield pb.FileChunk(data=bytes(view[offset : offset + CHUNK_BYTES]))

    # -- exec --------------------------------------------------------------------------------

    def Exec(self, request_iterator: Iterator[pb.ExecInput], context: grpc.ServicerContext):
        try:
            tenant = self._tenant(context)
            manager = self._manager()
            start = _first_start(request_iterator, "Exec", "ExecStart")
            stdin, reserved = _receive_stdin(manager, request_iterator)
            # Held busy by the command's thread, which releases it (and the stdin's share of the
            # host's transfer budget) when the command ends: the stream may be abandoned by a
            # vanished client and never resumed.
            try:
                session = manager.hold(tenant, start.session_id)
            except BaseException:
                manager.release_buffer(reserved)
                raise
        except Exception as exc:
            self._abort(context, exc)
            raise  # pragma: no cover
        outputs: queue.SimpleQueue = queue.SimpleQueue()
        done, abandoned = threading.Event(), threading.Event()

        def on_rpc_end() -> None:
            if not done.is_set():  # the client went away or cancelled: kill the command
                abandoned.set()  # (or never start it, if it has not started yet)
                log.info("session.exec_cancelled", session=session.id)
                session.box.cancel_command()

        context.add_callback(on_rpc_end)
        worker = threading.Thread(
            target=_run_command,
            args=(manager, session, start, stdin, reserved, outputs, done, abandoned),
            name=f"exec-{session.id[:10]}",
            daemon=True,
        )
        worker.start()
        try:
            while True:
                item = outputs.get()
                if item is _DONE:
                    break
                if isinstance(item, BaseException):
                    self._abort(context, item)
                if isinstance(item, ExecOutcome):
                    yield pb.ExecOutput(exit=_exit_to_proto(item))
                else:
                    fd, data = item
                    yield pb.ExecOutput(stderr=data) if fd == 2 else pb.ExecOutput(stdout=data)
        finally:
            if not done.is_set():  # the stream was closed under us: stop the command first
                session.box.cancel_command()
            worker.join()

    # -- conversion --------------------------------------------------------------------------

    def _info(self, session: Session) -> pb.SessionInfo:
        limits = session.limits
        return pb.SessionInfo(
            session_id=session.id,
            host=self._manager().host_id,
            image=session.spec.image,
            image_digest=session.box.handle.image_digest,
            network=session.network,
            labels=session.labels,
            created_ns=session.created_ns,
            idle_expires_ns=session.wall_ns(min(session.idle_expires_at(), session.max_expires_at)),
            max_expires_ns=session.wall_ns(session.max_expires_at),
            idle_ttl_s=session.idle_ttl_s,
            user=SESSION_USER,
            workdir=session.box.workdir,
            container_runtime=self._manager().runtime.runtime_name(session.spec),
            limits=pb.Limits(
                memory_bytes=int(limits.memory_bytes or 0),
                cpus=float(limits.cpus or 0.0),
                output_bytes=int(limits.output_bytes or 0),
            ),
        )


def _run_command(
    manager: SessionManager,
    session: Session,
    start: pb.ExecStart,
    stdin: bytes,
    reserved: int,
    outputs: queue.SimpleQueue,
    done: threading.Event,
    abandoned: threading.Event,
) -> None:
    try:
        if abandoned.is_set():
            raise Cancelled("the client went away before the command started")
        result = manager.exec(
            session,
            list(start.argv),
            on_output=lambda fd, data: outputs.put((fd, data)),
            cwd=start.cwd,
            env=dict(start.env),
            timeout_s=start.timeout_s,
            stdin=stdin,
            output_limit_bytes=start.output_limit_bytes,
            user=start.user,
            cancelled=abandoned,  # the client may vanish between the check above and the start
        )
        outputs.put(result)
    except BaseException as exc:  # reported as the call's status
        outputs.put(exc)
    finally:
        manager.release(session)
        manager.release_buffer(reserved)
        done.set()
        outputs.put(_DONE)


def _first_start(requests: Iterator[Any], rpc: str, kind: str) -> Any:
    """The ``start`` of a client stream's first message (WriteFile, Exec).

    Raises:
        InvalidRequest: the stream is empty or begins with something else.
    """
    first = next(requests, None)
    if first is None or first.WhichOneof("kind") != "start":
        raise InvalidRequest(f"the first {rpc} message must be a {kind}")
    return first.start


def _receive_stdin(manager: SessionManager, requests: Iterator[pb.ExecInput]) -> tuple[bytes, int]:
    """The stdin chunks up to the client's half-close, each counted against the host's transfer
    budget as it arrives; returns the bytes and the budget taken (the caller gives it back)."""
    stdin = bytearray()
    reserved = 0
    try:
        for message in requests:
            if message.WhichOneof("kind") != "stdin":
                raise InvalidRequest("Exec takes one ExecStart, then stdin chunks")
            if len(stdin) + len(message.stdin) > manager.config.max_stdin_bytes:
                raise InvalidRequest(f"stdin exceeds this host's {manager.config.max_stdin_bytes} bytes")
            reserved += manager.reserve_buffer(len(message.stdin))
            stdin += message.stdin
    except BaseException:
        manager.release_buffer(reserved)
        raise
    return bytes(stdin), reserved


def _exit_to_proto(result: ExecOutcome) -> pb.ExecExit:
    return pb.ExecExit(
        exit_code=result.exit_code,
        signal=result.signal or 0,
        timed_out=result.timed_out,
        oom_killed=result.oom_killed,
        output_limit_exceeded=result.output_limit_exceeded,
        duration_s=result.duration_s,
        stdout_bytes=result.stdout_bytes,
        stderr_bytes=result.stderr_bytes,
        spawn_error=result.spawn_error,
        message=result.spawn_message,
    )


def _session_request(request: pb.CreateSessionRequest, skill: SkillVersion | None) -> SessionRequest:
    lim = request.limits
    return SessionRequest(
        image=request.image,
        limits=Limits(
            memory_bytes=lim.memory_bytes or None,
            cpus=lim.cpus or None,
            output_bytes=lim.output_bytes or None,
        ),
        idle_ttl_s=request.idle_ttl_s,
        max_lifetime_s=request.max_lifetime_s,
        labels=dict(request.labels),
        network=request.network or "none",
        skill=skill,
        files=tuple((f.name, f.content) for f in request.files),
        isolation=request.isolation,
    )
