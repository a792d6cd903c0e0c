"""The one exception tree of skillopt.

::

    SkillOptError
    ├── ConfigError                 bad or unknown configuration; says which key and what to set
    ├── InvalidRequest              a rollout request the service refuses (maps to INVALID_ARGUMENT)
    ├── SkillError
    │   ├── SkillParseError
    │   └── EditError
    ├── Unauthenticated             the sandbox host refused the token (UNAUTHENTICATED)
    ├── UnknownRollout              no such rollout on the host (NOT_FOUND)
    ├── UnknownSession              no such session of this token on the host (NOT_FOUND)
    ├── UserUnsupported             exec as a user other than the session's (PERMISSION_DENIED)
    ├── SandboxFileError            a sandbox file cannot be read or written as asked
    │   ├── SandboxFileMissing      nothing there
    │   ├── SandboxFileRefused      a link, directory or special file (never followed)
    │   │   └── SandboxIsADirectory a directory where a file is needed (sessions)
    │   ├── SandboxPermissionDenied the sandbox's user may not read or write it (sessions)
    │   └── SandboxFileTooLarge     larger than the read's or the host's limit (sessions)
    ├── ModelError                  a model call failed (after the SDK's own retries); ``kind``
    │   │                           is the typed row kind, ``retryable`` if a later try may work
    │   ├── ModelAuthError          the provider rejected the credential (401/403)
    │   ├── ModelBadRequest         the provider refused the request (400, 404, 422 ...)
    │   ├── ModelUnavailable        5xx or unreachable
    │   ├── RateLimited             429
    │   ├── ModelTimeout            no answer in time
    │   ├── BudgetExceeded          (scored: the agent used up its budget)
    │   └── ReplayMiss
    ├── InfraError                  the environment failed, not the skill; ``retryable`` says if
    │   │                           another attempt (elsewhere) may succeed
    │   ├── SandboxUnavailable
    │   ├── HostFull
    │   │   └── SessionLimit        no room for another session (host-wide or this token's cap)
    │   ├── Draining
    │   ├── ImageMissing
    │   ├── ContainerStartFailed
    │   ├── OOMKilled
    │   ├── RolloutTimeout
    │   │   └── DeadlineExceeded    the caller's deadline expired before the rollout could run
    │   ├── Cancelled
    │   ├── GatewayError
    │   ├── GraderFailed            the trusted grader's worker died or overran its time
    │   └── OutputLimitExceeded
    └── SystemicFailure             every row failed before any model reply: stop the run

Errors carry ``rollout_id``, ``host`` and ``phase`` where known. Errors of dependencies
(docker, grpc, openai, anthropic) are mapped to these at the edges with ``raise ... from exc``.
"""

from __future__ import annotations

from skillopt.types import InfraErrorKind, InfraFailure

__all__ = [
    "BlobsMissing",
    "BudgetExceeded",
    "Cancelled",
    "ConfigError",
    "ContainerStartFailed",
    "DeadlineExceeded",
    "Draining",
    "EditError",
    "GatewayError",
    "GraderFailed",
    "HostFull",
    "ImageMissing",
    "InfraError",
    "InvalidRequest",
    "ModelAuthError",
    "ModelBadRequest",
    "ModelError",
    "ModelTimeout",
    "ModelUnavailable",
    "OOMKilled",
    "OutputLimitExceeded",
    "RateLimited",
    "ReplayMiss",
    "RolloutTimeout",
    "SandboxFileError",
    "SandboxFileMissing",
    "SandboxFileRefused",
    "SandboxFileTooLarge",
    "SandboxIsADirectory",
    "SandboxPermissionDenied",
    "SandboxUnavailable",
    "SessionLimit",
    "SkillError",
    "SkillOptError",
    "SkillParseError",
    "SystemicFailure",
    "Unauthenticated",
    "UnknownRollout",
    "UnknownSession",
    "UserUnsupported",
]


class SkillOptError(Exception):
    """Base of every error raised by skillopt."""

    def __init__(self, message: str, *, rollout_id: str = "", host: str = "", phase: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.rollout_id = rollout_id
        self.host = host
        self.phase = phase


class ConfigError(SkillOptError):
    """Configuration is invalid; the message names the key and what to set."""


class InvalidRequest(SkillOptError):
    """A request is malformed or unsafe (bad names, path traversal, non-xlsx bytes, oversize)."""


class SkillError(SkillOptError):
    """A skill document problem."""


class SkillParseError(SkillError):
    """A skill document or an edit payload could not be parsed."""


class EditError(SkillError):
    """An edit could not be applied."""


class Unauthenticated(SkillOptError):
    """A sandbox host refused the caller's token."""


class UnknownRollout(SkillOptError):
    """No rollout with this id on the host (Cancel of an unknown id)."""


class SandboxFileError(SkillOptError):
    """A file in a sandbox's workspace cannot be read as asked."""


class SandboxFileMissing(SandboxFileError):
    """No file exists at the path."""


class SandboxFileRefused(SandboxFileError):
    """The path is a link, a directory or a special file (or runs through a link)."""


class SandboxIsADirectory(SandboxFileRefused):
    """A session path names a directory where a file is needed."""


class SandboxPermissionDenied(SandboxFileError):
    """The session's user may not read, write or run what the path names."""


class SandboxFileTooLarge(SandboxFileError):
    """A session file is larger than the read's limit or the host's file limit."""


class BlobsMissing(SkillOptError):
    """A request named content-addressed files (by SHA-256) that the host does not keep for
    this token; ``missing`` lists their hashes. The client sends them again with content."""

    def __init__(self, message: str, *, missing: tuple[str, ...] = (), **context: str) -> None:
        super().__init__(message, **context)
        self.missing = tuple(missing)


class UnknownSession(SkillOptError):
    """No session with this id belongs to the caller's token on this host (another token's
    sessions look exactly like missing ones)."""


class UserUnsupported(SkillOptError):
    """An exec asked for a user other than the session's: session containers run as one
    unprivileged user without the capability to switch users."""


class ModelError(SkillOptError):
    """A model call failed after retries.

    ``kind`` is the typed infrastructure kind a rollout row gets when this error ends it (a
    provider failure is never the skill's fault); ``retryable`` says whether a later attempt may
    succeed; ``status`` is the HTTP status seen (0: none). Mappers may set both per instance.
    """

    kind: InfraErrorKind = InfraErrorKind.MODEL_UNAVAILABLE
    retryable: bool = True
    status: int = 0

    def info(self) -> InfraFailure:
        """The plain-data form carried on a result row."""
        return InfraFailure(kind=self.kind, message=self.message, retryable=self.retryable)


class ModelAuthError(ModelError):
    """The provider rejected the credential (401/403)."""

    kind = InfraErrorKind.MODEL_AUTH
    retryable = False


class ModelBadRequest(ModelError):
    """The provider refused the request as malformed or unknown (400, 404, 413, 422 ...)."""

    kind = InfraErrorKind.MODEL_BAD_REQUEST
    retryable = False


class ModelUnavailable(ModelError):
    """The provider failed (5xx) or could not be reached."""

    kind = InfraErrorKind.MODEL_UNAVAILABLE


class RateLimited(ModelError):
    """The provider kept answering 429."""

    kind = InfraErrorKind.MODEL_RATE_LIMITED


class ModelTimeout(ModelError):
    """The provider did not answer in time."""

    kind = InfraErrorKind.MODEL_UNAVAILABLE


class BudgetExceeded(ModelError):
    """A token or cost budget was used up."""

    retryable = False


class ReplayMiss(ModelError):
    """Replay mode found no recorded exchange for a request."""

    kind = InfraErrorKind.REPLAY_MISS
    retryable = False


class InfraError(SkillOptError):
    """The environment failed, not the skill. Never scored; ``retryable`` says if a retry
    (possibly on another host) may succeed."""

    kind: InfraErrorKind = InfraErrorKind.INTERNAL
    retryable: bool = True

    def info(self) -> InfraFailure:
        """The plain-data form carried on a result row."""
        return InfraFailure(kind=self.kind, message=self.message, retryable=self.retryable)


class SandboxUnavailable(InfraError):
    """The sandbox host or its Docker engine cannot be reached."""

    kind = InfraErrorKind.SANDBOX_UNAVAILABLE


class HostFull(InfraError):
    """The host has no free rollout slot (RESOURCE_EXHAUSTED)."""

    kind = InfraErrorKind.SANDBOX_UNAVAILABLE


class SessionLimit(HostFull):
    """No room for another session on this host, host-wide or under the caller's token's cap
    (RESOURCE_EXHAUSTED). ``retry_after_s`` says when one may free up (0: unknown)."""

    def __init__(self, message: str, *, retry_after_s: float = 0.0, **context: str) -> None:
        super().__init__(message, **context)
        self.retry_after_s = retry_after_s


class Draining(InfraError):
    """The host is shutting down and takes no new work (UNAVAILABLE)."""

    kind = InfraErrorKind.SANDBOX_UNAVAILABLE


class ImageMissing(InfraError):
    """The runtime image is not built on this host (FAILED_PRECONDITION)."""

    kind = InfraErrorKind.IMAGE_MISSING
    retryable = False


class ContainerStartFailed(InfraError):
    """A rollout container could not be created or its runner did not come up."""

    kind = InfraErrorKind.CONTAINER_START_FAILED


class OOMKilled(InfraError):
    """The kernel killed a process of the rollout for exceeding the memory limit."""

    kind = InfraErrorKind.OOM_KILLED
    retryable = False


class RolloutTimeout(InfraError):
    """The rollout exceeded its wall-clock budget or the caller's deadline."""

    kind = InfraErrorKind.TIMEOUT
    retryable = False


class DeadlineExceeded(RolloutTimeout):
    """The caller's deadline left too little time, or expired before a container was ready
    (DEADLINE_EXCEEDED); nothing of the rollout ran."""


class Cancelled(InfraError):
    """The rollout was cancelled by its caller."""

    kind = InfraErrorKind.CANCELLED
    retryable = False


class GatewayError(InfraError):
    """The model gateway failed (not the model's answer)."""

    kind = InfraErrorKind.GATEWAY_ERROR


class GraderFailed(InfraError):
    """Grading did not finish: its worker process died (a crash, its memory limit) or was
    killed for overrunning its time. The host's fault or a pathological output, never a
    verdict on the skill; another attempt may succeed."""

    kind = InfraErrorKind.INTERNAL


class OutputLimitExceeded(InfraError):
    """A result or artifact exceeded its size cap."""

    kind = InfraErrorKind.INTERNAL
    retryable = False


class SystemicFailure(SkillOptError):
    """Every row of a batch failed before any model reply; the run stops with the common reason."""
