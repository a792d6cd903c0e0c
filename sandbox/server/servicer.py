"""The gRPC servicer: translate, delegate, stream. No domain logic lives here.

Run: proto → domain (``convert``) → validate → admit (idempotency, capacity) → the rollout
runs on a worker thread owned by the admission entry → events and the result are streamed to
every subscriber of that id. A subscriber that disconnects before the end cancels the rollout
when it was the last one. Every failure leaves through the proto's status table
(``sandbox.api.status``): a status code, a bounded message and a typed detail.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import NoReturn

import grpc
import structlog

from sandbox.api import convert
from sandbox.api.status import status_for
from sandbox.api.v1 import sandbox_pb2 as pb
from sandbox.api.v1 import sandbox_pb2_grpc as pb_grpc
from sandbox.observability.metrics import NO_METRICS, Metrics
from sandbox.server.session_rpcs import SessionRpcs
from sandbox.service.admission import RolloutAdmission, RolloutHandle
from sandbox.service.blobs import BlobStore
from sandbox.service.describe import describe_host
from sandbox.service.rollout import RolloutService
from sandbox.service.sessions import SessionManager
from sandbox.service.tenants import TenantTokens
from sandbox.service.validation import request_fingerprint
from skillopt.errors import Cancelled, Draining, ImageMissing, SkillOptError, UnknownRollout
from skillopt.observability import tracing
from skillopt.types import InfraErrorKind, RolloutRequest, RolloutResult

__all__ = ["SandboxServicer"]

log = structlog.get_logger("skillopt.sandbox.server")


class SandboxServicer(SessionRpcs, pb_grpc.SandboxServicer):
    def __init__(
        self,
        service: RolloutService,
        admission: RolloutAdmission,
        *,
        host_check: Callable[[], str] | None = None,
        sessions: SessionManager | None = None,
        tenants: TenantTokens | None = None,
    ) -> None:
        self.service = service
        self.admission = admission
        #: Sessions (the general sandbox API; ``None``: not offered) and the host's tokens.
        self.sessions = sessions
        self.tenants = tenants
        #: Content-addressed request files (corpora, workbooks, skills) kept per token.
        self.blobs = BlobStore(service.config.blob_cache_bytes)
        #: Why the host cannot take a rollout right now ("" when it can): checked at the door,
        #: so a rollout is refused as "not here, not now" (UNAVAILABLE, costs the caller no
        #: attempt) instead of being accepted and failing on a dead engine or a full disk.
        self.host_check = host_check
        #: The SandboxFusion-compatible HTTP API's languages and port (``()``, 0: not served).
        self.languages: tuple[str, ...] = ()
        self.http_port = 0
        #: The host's metrics recorder (none unless ``--metrics-listen``).
        self.metrics: Metrics = NO_METRICS
        self._workers = ThreadPoolExecutor(
            max_workers=max(1, admission.capacity), thread_name_prefix="rollout"
        )

    def _abort(self, context: grpc.ServicerContext, exc: BaseException) -> NoReturn:
        code, message, trailers = status_for(exc, host=self.service.config.host_id)
        if code == grpc.StatusCode.INTERNAL:
            log.error("rpc.internal_error", error=message[:500])
        context.set_trailing_metadata(trailers)
        context.abort(code, message)

    # -- Run ---------------------------------------------------------------------------------

    def Run(self, request: pb.RunRequest, context: grpc.ServicerContext):
        try:
            with tracing.span("sandbox.admission") as span:
                tenant = self._tenant(context).id
                domain = convert.request_from_proto(request, self.blobs.resolver(tenant))
                span.set_attributes(tracing.rollout_attributes(domain))
                skill_tree = request.skill.tree_sha256.lower()  # checked against the files by convert
                self.service.validate(domain, skill_tree=skill_tree)
                self.service.check_deadline(context.time_remaining())
                problem = self.host_check() if self.host_check is not None else ""
                if problem:
                    raise Draining(f"host {self.service.config.host_id} cannot take rollouts now: {problem}")
                handle, is_new = self.admission.admit(
                    domain.rollout_id, request_fingerprint(domain, skill_tree=skill_tree)
                )
                span.set_attribute("skillopt.admission.new", is_new)
        except Exception as exc:
            self.metrics.rollout_refused(exc)
            self._abort(context, exc)
        if is_new:  # the worker's spans nest under this call's (a no-op while tracing is off)
            execute = tracing.in_context(self._execute)
            self._workers.submit(execute, handle, domain, context.time_remaining(), skill_tree, tenant)
        stop = threading.Event()
        context.add_callback(lambda: self._on_rpc_end(handle, stop))
        log.info("run.stream", rollout_id=domain.rollout_id, new=is_new)
        # The skill's hash, for a trace that carries SKILL.md as a marker: as sent, or for a
        # package named by its tree alone, SKILL.md's own (which the client computes alike).
        skill_sha256 = request.skill.sha256.lower() or (
            domain.skill.sha256 if request.skill.tree_sha256 else ""
        )
        error: BaseException | None = None
        try:
            for item in handle.follow(stop):
                if isinstance(item, RolloutResult):
                    error = _status_error(item)
                    if error is not None:
                        break
                    result = convert.result_to_proto(
                        item, skill=domain.skill.content, skill_sha256=skill_sha256
                    )
                    yield pb.RunEvent(result=result)
                else:
                    time_ns, event = item
                    yield convert.event_to_proto(time_ns, event)
        except Exception as exc:  # the rollout failed outside the result path
            error = exc
        if error is not None:
            self._abort(context, error)

    def _execute(
        self,
        handle: RolloutHandle,
        request: RolloutRequest,
        deadline_s: float | None,
        skill_tree: str = "",
        tenant: str = "",
    ) -> None:
        def set_killer(kill) -> None:
            handle.on_cancel = kill
            if handle.cancel.is_set():
                kill()

        wait_s = time.monotonic() - handle.started_at  # admitted → taken by a worker
        with tracing.span("sandbox.rollout", tracing.rollout_attributes(request)) as span:
            try:
                result = self.service.run(
                    request,
                    emit=handle.emit,
                    cancel=handle.cancel,
                    deadline_s=deadline_s,
                    set_killer=set_killer,
                    skill_tree=skill_tree,
                    tenant=tenant,
                )
                span.set_attributes(tracing.result_attributes(result))
                handle.finish(result)
            except BaseException as exc:  # DeadlineExceeded, or a bug: the stream ends with its status
                span.set_attribute("skillopt.outcome", f"error:{type(exc).__name__}")
                if not isinstance(exc, SkillOptError):
                    log.exception("run.crashed", rollout_id=request.rollout_id)
                handle.finish(None, exc)
            finally:
                self.admission.complete(handle)
        self.metrics.rollout_finished(handle, request, handle.result, wait_s=wait_s, error=handle.error)

    def _on_rpc_end(self, handle: RolloutHandle, stop: threading.Event) -> None:
        stop.set()
        remaining = self.admission.leave(handle)
        if not handle.done and remaining <= 0 and handle.request_cancel("client went away"):
            log.info("run.cancelled_by_disconnect", rollout_id=handle.rollout_id)

    # -- Describe / Cancel -------------------------------------------------------------------

    def Describe(self, request: pb.DescribeRequest, context: grpc.ServicerContext) -> pb.DescribeResponse:
        description = describe_host(self.service, self.admission)
        if self.sessions is not None:
            description = replace(
                description, sessions=self.sessions.count(), max_sessions=self.sessions.config.max_sessions
            )
        description = replace(description, languages=self.languages, http_port=self.http_port)
        return convert.description_to_proto(description)

    def Cancel(self, request: pb.CancelRequest, context: grpc.ServicerContext) -> pb.CancelResponse:
        handle = self.admission.get(request.rollout_id)
        if handle is None:
            self._abort(context, UnknownRollout(f"no rollout {request.rollout_id[:200]!r} on this host"))
        return pb.CancelResponse(cancelled=handle.request_cancel("Cancel RPC"))

    def shutdown(self, *, wait: bool) -> None:
        self._workers.shutdown(wait=wait, cancel_futures=False)


def _status_error(result: RolloutResult) -> Exception | None:
    """Results that end the stream with a status instead of a row (the proto's table)."""
    info = result.infra_error
    if info is None:
        return None
    if info.kind == InfraErrorKind.CANCELLED:
        return Cancelled(f"rollout {result.rollout_id} was cancelled")
    if info.kind == InfraErrorKind.IMAGE_MISSING:
        return ImageMissing(info.message)
    return None
