"""The proto's status table, in one place: skillopt errors ↔ gRPC status codes + typed details.

The service ends a call with :func:`status_for` (code, bounded message, :class:`ErrorDetail`
in the trailing metadata key ``skillopt-error-bin``); the client turns a status back into the
most specific skillopt error with :func:`error_for`, by the detail's ``reason`` (never by the
message text), with the work's ``outcome`` the host sent. Statuses gRPC produces itself
(oversize message, transport failure, a deadline that expired on the wire) come without a
detail and are classified by code alone (each error class has its own outcome).
"""

from __future__ import annotations

from collections.abc import Iterable

import grpc

from sandbox.api.convert import outcome_from_proto, outcome_to_proto
from sandbox.api.v1 import sandbox_pb2 as pb
from skillopt.errors import (
    BlobsMissing,
    Cancelled,
    DeadlineExceeded,
    Draining,
    HostFull,
    ImageMissing,
    InvalidRequest,
    IsolationUnavailable,
    RolloutTimeout,
    SandboxFileMissing,
    SandboxFileTooLarge,
    SandboxIsADirectory,
    SandboxPermissionDenied,
    SandboxUnavailable,
    SessionLimit,
    SkillOptError,
    SkillPackageRefused,
    Unauthenticated,
    UnknownRollout,
    UnknownSession,
    UserUnsupported,
)
from skillopt.types import WorkOutcome

__all__ = [
    "DETAIL_KEY",
    "MAX_MESSAGE_CHARS",
    "bounded",
    "detail_from_metadata",
    "error_for",
    "status_for",
]

#: Trailing metadata key of the serialized ErrorDetail (``-bin``: binary metadata).
DETAIL_KEY = "skillopt-error-bin"
#: Longest status message sent (gRPC's metadata limit is 8 KiB by default; a message must never
#: grow with its input).
MAX_MESSAGE_CHARS = 1024
#: Skill-package problems sent in a detail: the longest path and message of one, and the most
#: bytes of them all (the detail travels base64-encoded in trailing metadata, which gRPC caps
#: at 8 KiB with the status message; the message lists the first few problems too).
_MAX_PROBLEM_PATH = 120
_MAX_PROBLEM_CHARS = 160
_MAX_PROBLEMS_BYTES = 3000

R = pb.ErrorDetail.Reason
C = grpc.StatusCode

# (error class, status code, reason). Order matters: subclasses before their bases.
_TABLE: tuple[tuple[type[SkillOptError], grpc.StatusCode, pb.ErrorDetail.Reason], ...] = (
    (SkillPackageRefused, C.INVALID_ARGUMENT, R.SKILL_PACKAGE_INVALID),
    (InvalidRequest, C.INVALID_ARGUMENT, R.INVALID_REQUEST),
    (Unauthenticated, C.UNAUTHENTICATED, R.UNAUTHENTICATED),
    (SessionLimit, C.RESOURCE_EXHAUSTED, R.SESSION_LIMIT),
    (HostFull, C.RESOURCE_EXHAUSTED, R.HOST_FULL),
    (UnknownSession, C.NOT_FOUND, R.SESSION_NOT_FOUND),
    (UserUnsupported, C.PERMISSION_DENIED, R.USER_UNSUPPORTED),
    (SandboxFileMissing, C.NOT_FOUND, R.FILE_NOT_FOUND),
    (SandboxPermissionDenied, C.PERMISSION_DENIED, R.PERMISSION_DENIED),
    (SandboxIsADirectory, C.FAILED_PRECONDITION, R.IS_A_DIRECTORY),
    (SandboxFileTooLarge, C.OUT_OF_RANGE, R.FILE_TOO_LARGE),
    (Draining, C.UNAVAILABLE, R.DRAINING),
    (BlobsMissing, C.FAILED_PRECONDITION, R.BLOBS_MISSING),
    (IsolationUnavailable, C.FAILED_PRECONDITION, R.ISOLATION_UNAVAILABLE),
    (ImageMissing, C.FAILED_PRECONDITION, R.IMAGE_MISSING),
    (UnknownRollout, C.NOT_FOUND, R.NOT_FOUND),
    (Cancelled, C.CANCELLED, R.CANCELLED),
    (DeadlineExceeded, C.DEADLINE_EXCEEDED, R.DEADLINE_EXCEEDED),
    (SandboxUnavailable, C.UNAVAILABLE, R.UNAVAILABLE),
)
_BY_REASON: dict[pb.ErrorDetail.Reason, type[SkillOptError]] = {reason: cls for cls, _, reason in _TABLE}
# Statuses without our detail (made by gRPC itself, or by an older host).
_BY_CODE: dict[grpc.StatusCode, type[SkillOptError]] = {
    C.INVALID_ARGUMENT: InvalidRequest,
    C.UNAUTHENTICATED: Unauthenticated,
    # gRPC's own RESOURCE_EXHAUSTED means a message over the size limit: the request's fault.
    C.RESOURCE_EXHAUSTED: InvalidRequest,
    C.FAILED_PRECONDITION: ImageMissing,
    C.NOT_FOUND: UnknownRollout,
    C.PERMISSION_DENIED: SandboxPermissionDenied,
    C.OUT_OF_RANGE: SandboxFileTooLarge,
    C.CANCELLED: Cancelled,
    C.DEADLINE_EXCEEDED: RolloutTimeout,
    C.UNAVAILABLE: SandboxUnavailable,
}


def bounded(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``message`` cut to ``limit`` characters (saying how much was cut)."""
    if len(message) <= limit:
        return message
    return message[: limit - 40] + f" ... [{len(message) - limit + 40} characters cut]"


def status_for(exc: BaseException, *, host: str = "") -> tuple[grpc.StatusCode, str, tuple]:
    """The status code, bounded message and trailing metadata that end a call failing with
    ``exc``. Anything not in the table is INTERNAL (a bug; its message still says what)."""
    row = next((row for row in _TABLE if isinstance(exc, row[0])), None)
    if row is not None and isinstance(exc, SkillOptError):
        _, code, reason = row
        outcome = exc.outcome
        message = exc.message
    else:  # a bug of ours: another attempt may not meet it
        code, reason, outcome = C.INTERNAL, R.INTERNAL, WorkOutcome.LOST
        message = f"internal error: {type(exc).__name__}: {exc}"
    detail = pb.ErrorDetail(
        reason=reason,
        retryable=outcome is not WorkOutcome.FINAL,
        outcome=outcome_to_proto(outcome),
        host=host,
        retry_after_s=float(getattr(exc, "retry_after_s", 0.0)),
        missing_sha256=list(getattr(exc, "missing", ()) if isinstance(exc, BlobsMissing) else ()),
        skill_problems=_problems(exc.problems) if isinstance(exc, SkillPackageRefused) else [],
    )
    return code, bounded(message), ((DETAIL_KEY, detail.SerializeToString()),)


def _problems(problems: Iterable[tuple[str, str, str]]) -> list[pb.SkillProblem]:
    """The first problems, each shortened, within :data:`_MAX_PROBLEMS_BYTES` together."""
    out: list[pb.SkillProblem] = []
    size = 0
    for path, rule, text in problems:
        item = pb.SkillProblem(
            path=path[:_MAX_PROBLEM_PATH], rule=rule[:64], message=bounded(text, _MAX_PROBLEM_CHARS)
        )
        size += item.ByteSize()
        if size > _MAX_PROBLEMS_BYTES:
            break
        out.append(item)
    return out


def detail_from_metadata(metadata: Iterable[tuple[str, str | bytes]] | None) -> pb.ErrorDetail | None:
    """The ErrorDetail in a call's trailing metadata, if the service sent one."""
    for key, value in metadata or ():
        if key == DETAIL_KEY and isinstance(value, bytes):
            detail = pb.ErrorDetail()
            try:
                detail.ParseFromString(value)
            except Exception:  # a garbled detail: classify by code
                return None
            return detail
    return None


def error_for(
    code: grpc.StatusCode, message: str, detail: pb.ErrorDetail | None, **context: str
) -> SkillOptError:
    """The most specific skillopt error for a status (``context``: ``rollout_id``, ``host``)."""
    cls = _BY_REASON.get(detail.reason) if detail is not None else None
    if cls is None:
        cls = _BY_CODE.get(code)
    if cls is None:
        return SandboxUnavailable(f"{message} ({code.name})", **context)
    err = cls(message, **context)
    if detail is not None:
        err.outcome = outcome_from_proto(detail.outcome, retryable=detail.retryable, default=err.outcome)
    if detail is not None and isinstance(err, SessionLimit):
        err.retry_after_s = detail.retry_after_s
    if detail is not None and isinstance(err, BlobsMissing):
        err.missing = tuple(detail.missing_sha256)
    if detail is not None and isinstance(err, SkillPackageRefused):
        err.problems = tuple((p.path, p.rule, p.message) for p in detail.skill_problems)
    return err
