"""The gRPC servicer: translate, delegate, stream. No domain logic lives here.

Run: proto → domain (``convert``) → validate → admit (idempotency, capacity) → the rollout
runs on a worker thread owned by the registry entry → events and the result are streamed to
every subscriber of that id. A subscriber that disconnects before the end cancels the rollout
when it was the last one.
"""

from __future__ import annotations

import hashlib
import threading
from concurrent.futures import ThreadPoolExecutor

import grpc
import structlog

from sandbox.api import convert
from sandbox.api.v1 import sandbox_pb2 as pb
from sandbox.api.v1 import sandbox_pb2_grpc as pb_grpc
from sandbox.service.registry import RolloutHandle, RolloutRegistry
from sandbox.service.rollout import RolloutService
from skillopt import __version__
from skillopt.envs.registry import available_envs, get_env
from skillopt.errors import Draining, HostFull, ImageMissing, InvalidRequest
from skillopt.types import InfraErrorKind, RolloutRequest, RolloutResult

__all__ = ["SandboxServicer"]

log = structlog.get_logger("skillopt.sandbox.server")


class SandboxServicer(pb_grpc.SandboxServicer):
    def __init__(self, service: RolloutService, registry: RolloutRegistry) -> None:
        self.service = service
        self.registry = registry
        self._workers = ThreadPoolExecutor(
            max_workers=max(1, registry.capacity), thread_name_prefix="rollout"
        )

    # -- Run ---------------------------------------------------------------------------------

    def Run(self, request: pb.RunRequest, context: grpc.ServicerContext):
        try:
            domain = convert.request_from_proto(request)
            self.service.validate(domain)
        except InvalidRequest as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, exc.message)
        fingerprint = hashlib.sha256(request.SerializeToString(deterministic=True)).hexdigest()
        try:
            handle, is_new = self.registry.admit(domain.rollout_id, fingerprint)
        except InvalidRequest as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, exc.message)
        except HostFull as exc:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, exc.message)
        except Draining as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, exc.message)
        if is_new:
            self._workers.submit(self._execute, handle, domain, context.time_remaining())
        stop = threading.Event()
        context.add_callback(lambda: self._on_rpc_end(handle, stop))
        log.info("run.stream", rollout_id=domain.rollout_id, new=is_new)
        for item in handle.follow(stop):
            if isinstance(item, RolloutResult):
                if item.infra_error is not None and item.infra_error.kind == InfraErrorKind.CANCELLED:
                    context.abort(grpc.StatusCode.CANCELLED, f"rollout {domain.rollout_id} was cancelled")
                if item.infra_error is not None and item.infra_error.kind == InfraErrorKind.IMAGE_MISSING:
                    context.abort(grpc.StatusCode.FAILED_PRECONDITION, item.infra_error.message)
                yield pb.RunEvent(result=convert.result_to_proto(item))
            else:
                time_ns, event = item
                yield convert.event_to_proto(time_ns, event)

    def _execute(self, handle: RolloutHandle, request: RolloutRequest, deadline_s: float | None) -> None:
        def set_killer(kill) -> None:
            handle.on_cancel = kill
            if handle.cancel.is_set():
                kill()

        try:
            result = self.service.run(
                request, emit=handle.emit, cancel=handle.cancel, deadline_s=deadline_s, set_killer=set_killer
            )
            handle.finish(result)
        except BaseException as exc:  # service.run converts everything; this is a last resort
            log.exception("run.crashed", rollout_id=request.rollout_id)
            handle.finish(None, exc)
        finally:
            self.registry.complete(handle)

    def _on_rpc_end(self, handle: RolloutHandle, stop: threading.Event) -> None:
        stop.set()
        remaining = self.registry.leave(handle)
        if not handle.done and remaining <= 0 and handle.request_cancel("client went away"):
            log.info("run.cancelled_by_disconnect", rollout_id=handle.rollout_id)

    # -- Describe / Cancel -------------------------------------------------------------------

    def Describe(self, request: pb.DescribeRequest, context: grpc.ServicerContext) -> pb.DescribeResponse:
        running = self.registry.running_count
        spec = self.service.config.base_spec
        digests = {}
        try:
            digests[spec.image] = self.service.runtime.image_digest(spec.image)
        except ImageMissing:
            digests[spec.image] = ""
        agents = [
            f"{name}/{agent}"
            for name in available_envs()
            for agent in get_env(name).agents
            if get_env(name).container(agent) != "gateway" or self.service.gateway_url is not None
        ]
        return pb.DescribeResponse(
            host=self.service.config.host_id,
            version=__version__,
            capacity=self.registry.capacity,
            free_slots=0 if self.registry.draining else max(0, self.registry.capacity - running),
            running=running,
            draining=self.registry.draining,
            agents=agents,
            image_digests=digests,
            pool_idle={f"{s.image}@{s.spec_key}": s.idle for s in self.service.pools.stats()},
            container_runtime=spec.runtime or "runc",
            providers=sorted(self.service.providers),
            runner_sha256=self.service.runtime.runner_sha256,
        )

    def Cancel(self, request: pb.CancelRequest, context: grpc.ServicerContext) -> pb.CancelResponse:
        handle = self.registry.get(request.rollout_id)
        if handle is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no rollout {request.rollout_id!r} on this host")
        return pb.CancelResponse(cancelled=handle.request_cancel("Cancel RPC"))

    def shutdown(self, *, wait: bool) -> None:
        self._workers.shutdown(wait=wait, cancel_futures=False)
