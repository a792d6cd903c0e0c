"""gRPC client of one sandbox host: rollouts in, results out, RpcError → typed errors."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import grpc
import structlog
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sandbox.api import convert
from sandbox.api.blobs import ClientBlobs
from sandbox.api.status import detail_from_metadata, error_for
from sandbox.api.tracing import traced_channel
from sandbox.api.v1 import sandbox_pb2 as pb
from sandbox.api.v1 import sandbox_pb2_grpc as pb_grpc
from skillopt.envs.base import ProgressEvent
from skillopt.errors import (
    BlobsMissing,
    Cancelled,
    SandboxUnavailable,
    SkillOptError,
    SkillPackageUnsupported,
    Unauthenticated,
)
from skillopt.types import HostDescription, RolloutRequest, RolloutResult, WorkOutcome
from skillopt.units import MiB

log = structlog.get_logger(__name__)
#: Runs of one rollout whose named files went missing before the client gives up.
_BLOB_ATTEMPTS = 3

__all__ = ["ChannelConfig", "HealthWatch", "SandboxClient", "connect_hint", "map_rpc_error"]


@dataclass(frozen=True, kw_only=True)
class ChannelConfig:
    """How to reach one sandbox host."""

    address: str
    token: str | None = None
    #: PEM CA to verify the server; empty = plaintext (loopback or trusted network only)
    #: unless a client certificate is set (then the system's roots verify the server).
    tls_ca_file: str = ""
    #: Client certificate and key for mTLS.
    tls_cert_file: str = ""
    tls_key_file: str = ""
    #: Name the server's certificate must carry when ``address`` is an IP (an address found by
    #: resolving a ``dns:///`` endpoint); "" = the host part of ``address``.
    tls_server_name: str = ""
    max_message_bytes: int = 80 * MiB
    #: Longest wait for a TCP/TLS connection to the host (an unreachable host fails this fast,
    #: not after the rollout's whole deadline).
    connect_timeout_s: float = 5.0
    #: Keepalive ping interval on an idle stream; the service accepts one per 10 s at most
    #: (``grpc.http2.min_ping_interval_without_data_ms``), so keep this above that.
    keepalive_s: float = 30.0


def map_rpc_error(exc: grpc.RpcError, *, address: str, rollout_id: str = "") -> SkillOptError:
    """The most specific skillopt error for a gRPC failure: by the service's typed detail
    (``ErrorDetail.reason`` in the trailing metadata) where it sent one, else by the status
    code alone (the proto's table, ``sandbox.api.status``)."""
    code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
    detail_text = (exc.details() if hasattr(exc, "details") else str(exc)) or ""
    trailers = exc.trailing_metadata() if hasattr(exc, "trailing_metadata") else None
    detail = detail_from_metadata(trailers)  # type: ignore[arg-type]  # the stubs' _Metadatum: (key, value) tuples at run time
    hint = connect_hint(detail_text) if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNKNOWN) else ""
    message = f"{address}: {hint} [{detail_text}]" if hint else f"{address}: {detail_text}"
    err = error_for(code, message, detail, rollout_id=rollout_id, host=address)
    if isinstance(err, Unauthenticated):
        err.message = (
            f"{err.message} (the host refused the token: give the one its `skillopt serve --token-file` "
            "holds, with --token-file, $SKILLOPT_TOKEN_FILE or $SKILLOPT_SANDBOX_TOKEN)"
        )
    return err


#: (text in gRPC's connection error, what it means for the user): first match wins.
_CONNECT_HINTS = (
    (
        "Connection refused",
        "connection refused: nothing listens there (is `skillopt serve` running on that port?)",
    ),
    (
        "WRONG_VERSION_NUMBER",
        "TLS handshake failed: the host speaks plaintext (drop --tls-ca/--tls-cert, or start the "
        "host with --tls-cert and --tls-key)",
    ),
    (
        "CERTIFICATE_VERIFY_FAILED",
        "TLS handshake failed: the host's certificate is not signed by the CA given (--tls-ca) or does "
        "not name the host",
    ),
    ("Tls handshake failed", "TLS handshake failed"),
    (
        "Socket closed",
        "the host closed the connection during set-up: it serves TLS (give --tls-ca) and may require "
        "a client certificate (give --tls-cert and --tls-key)",
    ),
    ("Domain name not found", "the host name does not resolve"),
    ("lookup error", "the host name does not resolve"),
)


def connect_hint(detail_text: str) -> str:
    """Why a connection failed, in the user's terms ("" when the text is not gRPC's report of a
    failed connection, or not a known one)."""
    text = detail_text.lower()
    if "failed to connect" not in text and "errors resolving" not in text:
        return ""
    for needle, hint in _CONNECT_HINTS:
        if needle.lower() in text:
            return hint
    return ""


class _Stream(Protocol):
    """A server-streaming call as gRPC returns it: its replies, and a way to end it."""

    def __iter__(self) -> Iterator[Any]: ...
    def cancel(self) -> bool: ...


class HealthWatch:
    """A host's health as it changes: iterating yields ``True`` (serving) or ``False`` (not
    serving, e.g. draining) at every change; :meth:`cancel` ends it from another thread.

    Raises (while iterating):
        SkillOptError: the stream broke (the host went away; mapped from the gRPC status), or
            :class:`~skillopt.errors.Cancelled` after :meth:`cancel`.
    """

    def __init__(self, call: _Stream, address: str) -> None:
        self._call, self._address = call, address

    def __iter__(self) -> Iterator[bool]:
        try:
            for reply in self._call:
                yield reply.status == health_pb2.HealthCheckResponse.SERVING
        except grpc.RpcError as exc:
            raise map_rpc_error(exc, address=self._address) from exc

    def cancel(self) -> None:
        self._call.cancel()


class SandboxClient:
    """A channel to one sandbox host. Thread-safe; use one per host."""

    def __init__(self, config: ChannelConfig) -> None:
        self.config = config
        connect_ms = max(100, int(config.connect_timeout_s * 1000))
        options: list[tuple[str, Any]] = [
            ("grpc.max_receive_message_length", config.max_message_bytes),
            ("grpc.max_send_message_length", config.max_message_bytes),
            ("grpc.keepalive_time_ms", int(config.keepalive_s * 1000)),
            ("grpc.keepalive_timeout_ms", 10_000),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.max_pings_without_data", 0),
            # gRPC's connect deadline is max(min_reconnect_backoff, current backoff): this makes
            # an unreachable host fail in seconds, and a restarted one be found again quickly.
            ("grpc.min_reconnect_backoff_ms", connect_ms),
            ("grpc.initial_reconnect_backoff_ms", min(connect_ms, 1000)),
            ("grpc.max_reconnect_backoff_ms", max(connect_ms, 10_000)),
        ]
        if config.tls_ca_file or config.tls_cert_file:
            creds = grpc.ssl_channel_credentials(
                # No CA: the system's roots verify the host (a client certificate alone is TLS).
                root_certificates=Path(config.tls_ca_file).read_bytes() if config.tls_ca_file else None,
                private_key=Path(config.tls_key_file).read_bytes() if config.tls_key_file else None,
                certificate_chain=Path(config.tls_cert_file).read_bytes() if config.tls_cert_file else None,
            )
            if config.tls_server_name:
                options.append(("grpc.ssl_target_name_override", config.tls_server_name))
            self._channel = grpc.secure_channel(config.address, creds, options=options)
        else:
            self._channel = grpc.insecure_channel(config.address, options=options)
        self._channel = traced_channel(self._channel, config.address)  # as is while tracing is off
        self._stub = pb_grpc.SandboxStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)
        self._metadata = (("authorization", f"Bearer {config.token}"),) if config.token else ()
        #: What this host keeps of the files and skills sent to it (sent once, then named).
        self.blobs = ClientBlobs()
        #: Whether the host mounts skill packages (``None``: not asked yet; see
        #: :meth:`require_packages`).
        self._packages: bool | None = None
        self._host_version = ""

    def run(
        self,
        request: RolloutRequest,
        *,
        timeout_s: float,
        on_event: Callable[[ProgressEvent], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> RolloutResult:
        """Run one rollout and return its result.

        The call does not wait for an unreachable host (``wait_for_ready`` off): it fails within
        the connect timeout, so the caller can go elsewhere instead of hanging until the deadline.

        A request whose skill is a package (``skill.files``) goes only to a host that mounts
        packages (:meth:`require_packages`); the first rollout of a version sends its files,
        every later one its tree hash alone.

        Raises:
            SkillPackageUnsupported: the skill is a package and the host predates packages.
            SkillPackageRefused: the package breaks a rule on the host (each file and rule in
                ``problems``).
            InvalidRequest, HostFull, Draining, SandboxUnavailable, RolloutTimeout, Cancelled,
            ImageMissing: mapped from the gRPC status, each with the work's ``outcome``. A
            ``SandboxUnavailable`` has ``phase`` ``"connect"`` and outcome ``NOT_STARTED`` when
            the host never answered (the rollout did not start there), ``"stream"`` and ``LOST``
            when the stream broke after the host had accepted it. A ``Cancelled`` that ``cancel``
            did not ask for (the host cancelled it: its drain grace ran out) is ``LOST``.
        """
        deadline = time.monotonic() + timeout_s
        if request.skill.files:
            self.require_packages(rollout_id=request.rollout_id)
        for attempt in range(_BLOB_ATTEMPTS):
            msg, inlined = self._message(request)
            try:
                return self._run_once(
                    request, msg, inlined, max(0.1, deadline - time.monotonic()), on_event, cancel
                )
            except BlobsMissing as err:
                # The host evicted (or never had) files this client named by hash: send them
                # again with their content. Nothing ran: the rollout was refused at the door.
                self.blobs.forget(err.missing)
                log.info("run.blobs_missing", rollout_id=request.rollout_id, host=self.config.address,
                         missing=len(err.missing), attempt=attempt + 1)  # fmt: skip
        unsent = SandboxUnavailable(
            f"{self.config.address}: content-addressed files went missing {_BLOB_ATTEMPTS} times in a row "
            "(the host's file cache is too small for this request?)",
            rollout_id=request.rollout_id,
            host=self.config.address,
            phase="connect",
        )
        unsent.outcome = WorkOutcome.NOT_STARTED
        raise unsent

    def _message(self, request: RolloutRequest) -> tuple[pb.RunRequest, list[str]]:
        """The request's message, naming by hash what this host keeps (the files, the skill, a
        package's whole version by its tree hash), and the hashes it sends with content."""
        if request.skill.files:
            names = self.blobs.package(request.skill)
            msg = convert.request_to_proto(request, skill=convert.skill_to_proto(request.skill, names))
            return msg, [*self.blobs.elide(msg), *names.inlined]
        skill_sha256, skill_inline = self.blobs.skill(request.skill)
        msg = convert.request_to_proto(request, skill_sha256=skill_sha256, skill_inline=skill_inline)
        inlined = self.blobs.elide(msg)
        if skill_sha256 and skill_inline:
            inlined.append(skill_sha256)
        return msg, inlined

    def require_packages(self, *, rollout_id: str = "") -> None:
        """Make sure this host mounts skill packages (asked once, by ``Describe``): a host that
        predates them would drop the package's files and run SKILL.md alone.

        Raises:
            SkillPackageUnsupported: the host mounts SKILL.md alone (outcome NOT_STARTED:
                another host may take the package).
            SkillOptError: ``Describe`` failed (mapped from the gRPC status).
        """
        if self._packages is None:
            info = self.describe()
            self._packages = info.skill_package_max_files > 0
            self._host_version = info.version
        if not self._packages:
            err = SkillPackageUnsupported(
                f"sandbox host {self.config.address} (skillopt {self._host_version or 'unknown'}) "
                "predates skill packages: it would mount SKILL.md without the package's files; "
                "upgrade it or use another host",
                rollout_id=rollout_id,
                host=self.config.address,
                phase="connect",
            )
            err.outcome = WorkOutcome.NOT_STARTED
            raise err

    def _run_once(
        self,
        request: RolloutRequest,
        msg: pb.RunRequest,
        inlined: list[str],
        timeout_s: float,
        on_event: Callable[[ProgressEvent], None] | None,
        cancel: threading.Event | None,
    ) -> RolloutResult:
        call = self._stub.Run(msg, timeout=timeout_s, metadata=self._metadata, wait_for_ready=False)
        received = False
        done = threading.Event()
        if cancel is not None:

            def watch() -> None:
                # Event has no wait-for-either; a short poll bounds how long a finished call's
                # watcher lingers.
                while not done.is_set():
                    if cancel.wait(0.25):
                        call.cancel()
                        return

            threading.Thread(target=watch, daemon=True, name="run-cancel-watch").start()
        try:
            for event in call:
                if not received:
                    self.blobs.learn(inlined)  # the host accepted the request: it keeps them
                received = True
                kind = event.WhichOneof("kind")
                if kind == "result":
                    return convert.result_from_proto(
                        event.result, skill=request.skill.content, skill_sha256=msg.skill.sha256
                    )
                if kind == "progress" and on_event is not None:
                    p = event.progress
                    on_event(ProgressEvent(phase=p.phase, turn=p.turn, detail=p.detail))
        except grpc.RpcError as exc:
            err = map_rpc_error(exc, address=self.config.address, rollout_id=request.rollout_id)
            err.phase = "stream" if received else "connect"
            if isinstance(err, SandboxUnavailable) and not received and err.outcome is WorkOutcome.LOST:
                err.outcome = WorkOutcome.NOT_STARTED  # nothing came back: the host never took it
            elif isinstance(err, Cancelled) and not (cancel is not None and cancel.is_set()):
                err.outcome = WorkOutcome.LOST  # the host cancelled it (draining), not the caller
            raise err from exc
        finally:
            done.set()
        raise SandboxUnavailable(
            f"{self.config.address}: the stream ended without a result",
            rollout_id=request.rollout_id,
            host=self.config.address,
            phase="stream",
        )

    def describe(self, *, timeout_s: float = 10.0) -> HostDescription:
        """What the host reports about itself (capacity, agents, image digests, versions).

        Raises:
            SkillOptError: mapped from the gRPC status (:func:`map_rpc_error`).
        """
        try:
            reply = self._stub.Describe(pb.DescribeRequest(), timeout=timeout_s, metadata=self._metadata)
        except grpc.RpcError as exc:
            raise map_rpc_error(exc, address=self.config.address) from exc
        info = convert.description_from_proto(reply)
        self._packages, self._host_version = info.skill_package_max_files > 0, info.version
        return info

    def cancel(self, rollout_id: str, *, timeout_s: float = 10.0) -> bool:
        try:
            reply = self._stub.Cancel(
                pb.CancelRequest(rollout_id=rollout_id), timeout=timeout_s, metadata=self._metadata
            )
        except grpc.RpcError as exc:
            raise map_rpc_error(exc, address=self.config.address, rollout_id=rollout_id) from exc
        return reply.cancelled

    def healthy(self, *, timeout_s: float = 5.0) -> bool:
        try:
            reply = self._health.Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout_s)
        except grpc.RpcError:
            return False
        return reply.status == health_pb2.HealthCheckResponse.SERVING

    def watch_health(self) -> HealthWatch:
        """The host's health as it changes (the health ``Watch`` stream, no deadline)."""
        return HealthWatch(self._health.Watch(health_pb2.HealthCheckRequest(service="")), self.config.address)

    def wait_until_not_serving(self, *, timeout_s: float = 30.0) -> bool:
        """Block until the host reports it stopped serving (draining or gone).

        Uses the health ``Watch`` stream, so it wakes on the status change itself rather
        than polling. Returns False if the host still serves after ``timeout_s``.
        """
        return self._wait_health(serving=False, timeout_s=timeout_s)

    def wait_until_serving(self, *, timeout_s: float = 30.0) -> bool:
        """Block until the host reports it serves (again: after its engine came back, say).
        Returns False if it does not within ``timeout_s`` or the host goes away."""
        return self._wait_health(serving=True, timeout_s=timeout_s)

    def _wait_health(self, *, serving: bool, timeout_s: float) -> bool:
        stream = self._health.Watch(health_pb2.HealthCheckRequest(service=""), timeout=timeout_s)
        try:
            for reply in stream:
                if (reply.status == health_pb2.HealthCheckResponse.SERVING) == serving:
                    return True
        except grpc.RpcError as exc:
            # The server going away mid-watch also means it no longer serves.
            return not serving and exc.code() != grpc.StatusCode.DEADLINE_EXCEEDED
        return not serving

    def call(self, method: str, request, *, timeout_s: float | None = None, **kwargs):
        """Call the Sandbox service's ``method`` with this client's credentials (the raw stub
        call: the session client builds on it). gRPC errors are the caller's to map."""
        return getattr(self._stub, method)(request, timeout=timeout_s, metadata=self._metadata, **kwargs)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> SandboxClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
