"""The one exception tree of skillopt.

Every error says what happened to the work it ended (``outcome``, a
:class:`~skillopt.types.WorkOutcome`; ``retryable`` is "anything but final"): **N** never
started (take it elsewhere or later, at no cost), **L** started and lost without a verdict
(another attempt with the same ``rollout_id`` may succeed), **F** final. The fleet decides
retries from that alone (``controller.fleet.policy``). Unmarked errors are final.

::

    SkillOptError                   F
    ├── ConfigError                 bad or unknown configuration; says which key and what to set
    ├── InvalidRequest              a rollout request the service refuses (maps to INVALID_ARGUMENT)
    │   └── SkillPackageRefused     a skill package breaks a rule; ``problems`` names each file
    │                               and rule (INVALID_ARGUMENT, reason SKILL_PACKAGE_INVALID)
    ├── SkillPackageUnsupported     a host predates skill packages (its Describe says so);
    │                               N when one host says it (another may take the package)
    ├── BlobsMissing             N  the host keeps none of the files the request named by hash
    ├── SkillError
    │   ├── SkillParseError
    │   ├── EditError
    │   └── SkillInstallRefused     a different skill is installed under that name (``force``
    │                               replaces it); ``there`` is that skill, if a valid package
    ├── SleepError                  a sleep proposal cannot be staged, adopted or reverted as
    │   │                           asked; the message says what to do next
    │   ├── ProposalRejected        the gate did not accept the proposal: nothing is staged
    │   ├── LiveSkillChanged        the installed skill is not the one the proposal (or the
    │   │                           adoption) was made against: nothing is changed
    │   └── AdoptFailed             installing (or restoring) failed part way; the backup was
    │                               put back (``restored`` says whether that worked)
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
    ├── ModelError               L  a model call failed (after the SDK's own retries); ``kind``
    │   │                           is the typed row kind
    │   ├── ModelAuthError       F  the provider rejected the credential (401/403)
    │   ├── ModelBadRequest      F  the provider refused the request (400, 404, 422 ...)
    │   ├── ModelUnavailable     L  5xx or unreachable
    │   ├── RateLimited          L  429
    │   ├── ModelTimeout         L  no answer in time
    │   ├── BudgetExceeded       F  (scored: the agent used up its budget)
    │   └── ReplayMiss           F
    ├── InfraError               L  the environment failed, not the skill
    │   ├── SandboxUnavailable   L  (N when the host never answered: the client says so)
    │   ├── HostFull             N
    │   │   └── SessionLimit     N  no room for another session (host-wide or this token's cap)
    │   ├── Draining             N
    │   ├── ImageMissing         F  (the run's image must be on every host it uses)
    │   ├── ContainerStartFailed L
    │   ├── OOMKilled            F
    │   ├── RolloutTimeout       F
    │   │   └── DeadlineExceeded F  the caller's deadline expired before the rollout could run
    │   ├── Cancelled            F  (L when the host cancelled it, not the caller: the client
    │   │                           says so)
    │   ├── GatewayError         L
    │   ├── GraderFailed         L  the trusted grader's worker died or overran its time
    │   ├── OutputLimitExceeded  F
    │   └── SandboxResetFailed   F  a used sandbox could not be proven clean: it is destroyed,
    │                               never reused (the pool's; never ends a rollout)
    └── SystemicFailure          F  every row failed before any model reply: stop the run

Errors carry ``rollout_id``, ``host`` and ``phase`` where known. Errors of dependencies
(docker, grpc, openai, anthropic) are mapped to these at the edges with ``raise ... from exc``;
:func:`failure_of` is the typed row failure of any exception that ends a rollout.
"""

from __future__ import annotations

from skillopt.types import InfraErrorKind, InfraFailure, SkillVersion, WorkOutcome

__all__ = [
    "AdoptFailed",
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
    "IsolationUnavailable",
    "LiveSkillChanged",
    "ModelAuthError",
    "ModelBadRequest",
    "ModelError",
    "ModelTimeout",
    "ModelUnavailable",
    "OOMKilled",
    "OutputLimitExceeded",
    "ProposalRejected",
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
    "SkillInstallRefused",
    "SkillOptError",
    "SkillPackageRefused",
    "SkillPackageUnsupported",
    "SkillParseError",
    "SleepError",
    "SystemicFailure",
    "Unauthenticated",
    "UnknownRollout",
    "UnknownSession",
    "UserUnsupported",
    "failure_of",
]


class SkillOptError(Exception):
    """Base of every error raised by skillopt.

    ``outcome`` says what happened to the work the error ended (each class has its own; the
    edge that knows better sets it on the instance, e.g. the gRPC client when a host never
    answered); ``retryable`` is derived from it.
    """

    outcome: WorkOutcome = WorkOutcome.FINAL

    def __init__(self, message: str, *, rollout_id: str = "", host: str = "", phase: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.rollout_id = rollout_id
        self.host = host
        self.phase = phase

    @property
    def retryable(self) -> bool:
        """Whether another attempt (elsewhere, later) may succeed: any outcome but final."""
        return self.outcome is not WorkOutcome.FINAL


class ConfigError(SkillOptError):
    """Configuration is invalid; the message names the key and what to set."""


class InvalidRequest(SkillOptError):
    """A request is malformed or unsafe (bad names, path traversal, non-xlsx bytes, oversize)."""


class SkillPackageRefused(InvalidRequest):
    """A sandbox host refused a skill package that breaks a rule (the standard's or the host's
    limits); nothing ran. ``problems`` holds ``(path, rule, message)`` per broken rule, ``path``
    ``""`` for the package as a whole (see :class:`skillopt.skill.package.PackageProblem`)."""

    def __init__(
        self, message: str, *, problems: tuple[tuple[str, str, str], ...] = (), **context: str
    ) -> None:
        super().__init__(message, **context)
        self.problems = tuple(problems)


class SkillPackageUnsupported(SkillOptError):
    """A skill package was to go to a sandbox host that mounts SKILL.md alone (it predates
    packages: its ``Describe`` reports no package limits). Final for a batch no host can take;
    the client that meets it on one host marks it not started (another host may take it)."""


class SkillError(SkillOptError):
    """A skill document problem."""


class SkillParseError(SkillError):
    """A skill document or an edit payload could not be parsed."""


class EditError(SkillError):
    """An edit could not be applied."""


class SkillInstallRefused(SkillError):
    """A different skill is installed where one was to go; ``force`` replaces it.

    Attributes:
        dest: the installed folder.
        there: the skill installed there, ``None`` when it is not a valid package.
    """

    def __init__(self, dest: object, there: SkillVersion | None) -> None:
        what = "a different skill" if there is not None else "a folder that is not a valid skill package"
        super().__init__(f"{dest} holds {what}; replacing it needs force")
        self.dest = dest
        self.there = there


class SleepError(SkillOptError):
    """A sleep proposal cannot be staged, adopted or reverted as asked (nothing staged, an
    unreadable manifest or receipt ...); the message says what to do next."""


class ProposalRejected(SleepError):
    """The gate did not accept the proposal, or its checks failed: it is never staged."""


class LiveSkillChanged(SleepError):
    """The installed skill is not the one a proposal was staged against (adopt), or not the
    one an adoption installed (revert): nothing was changed."""


class AdoptFailed(SleepError):
    """Installing (or restoring) failed part way. ``restored`` says whether the skill that was
    installed before was put back, byte for byte."""

    def __init__(self, message: str, *, restored: bool) -> None:
        super().__init__(message)
        self.restored = restored


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

    outcome = WorkOutcome.NOT_STARTED

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
    provider failure is never the skill's fault); ``outcome`` says whether a later attempt may
    succeed (``LOST``) or not (``FINAL``); ``status`` is the HTTP status seen (0: none). Mappers
    may set both per instance.
    """

    kind: InfraErrorKind = InfraErrorKind.MODEL_UNAVAILABLE
    outcome = WorkOutcome.LOST
    status: int = 0

    def info(self) -> InfraFailure:
        """The plain-data form carried on a result row."""
        return InfraFailure(kind=self.kind, message=self.message, outcome=self.outcome)


class ModelAuthError(ModelError):
    """The provider rejected the credential (401/403)."""

    kind = InfraErrorKind.MODEL_AUTH
    outcome = WorkOutcome.FINAL


class ModelBadRequest(ModelError):
    """The provider refused the request as malformed or unknown (400, 404, 413, 422 ...)."""

    kind = InfraErrorKind.MODEL_BAD_REQUEST
    outcome = WorkOutcome.FINAL


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

    outcome = WorkOutcome.FINAL


class ReplayMiss(ModelError):
    """Replay mode found no recorded exchange for a request."""

    kind = InfraErrorKind.REPLAY_MISS
    outcome = WorkOutcome.FINAL


class InfraError(SkillOptError):
    """The environment failed, not the skill. Never scored; ``outcome`` says whether a retry
    (possibly on another host) may succeed."""

    kind: InfraErrorKind = InfraErrorKind.INTERNAL
    outcome = WorkOutcome.LOST

    def info(self) -> InfraFailure:
        """The plain-data form carried on a result row."""
        return InfraFailure(kind=self.kind, message=self.message, outcome=self.outcome)


class SandboxUnavailable(InfraError):
    """The sandbox host or its Docker engine cannot be reached."""

    kind = InfraErrorKind.SANDBOX_UNAVAILABLE


class HostFull(InfraError):
    """The host has no free rollout slot (RESOURCE_EXHAUSTED)."""

    kind = InfraErrorKind.SANDBOX_UNAVAILABLE
    outcome = WorkOutcome.NOT_STARTED


class SessionLimit(HostFull):
    """No room for another session on this host, host-wide or under the caller's token's cap
    (RESOURCE_EXHAUSTED). ``retry_after_s`` says when one may free up (0: unknown)."""

    def __init__(self, message: str, *, retry_after_s: float = 0.0, **context: str) -> None:
        super().__init__(message, **context)
        self.retry_after_s = retry_after_s


class Draining(InfraError):
    """The host is shutting down and takes no new work (UNAVAILABLE)."""

    kind = InfraErrorKind.SANDBOX_UNAVAILABLE
    outcome = WorkOutcome.NOT_STARTED


class ImageMissing(InfraError):
    """The runtime image is not built on this host (FAILED_PRECONDITION)."""

    kind = InfraErrorKind.IMAGE_MISSING
    outcome = WorkOutcome.FINAL


class IsolationUnavailable(InfraError):
    """The request requires an isolation (``isolation="gvisor"``) this host cannot give
    (FAILED_PRECONDITION): refused before any container starts; another host may give it."""

    kind = InfraErrorKind.SANDBOX_UNAVAILABLE
    outcome = WorkOutcome.NOT_STARTED


class ContainerStartFailed(InfraError):
    """A rollout container could not be created or its runner did not come up."""

    kind = InfraErrorKind.CONTAINER_START_FAILED


class OOMKilled(InfraError):
    """The kernel killed a process of the rollout for exceeding the memory limit."""

    kind = InfraErrorKind.OOM_KILLED
    outcome = WorkOutcome.FINAL


class RolloutTimeout(InfraError):
    """The rollout exceeded its wall-clock budget or the caller's deadline."""

    kind = InfraErrorKind.TIMEOUT
    outcome = WorkOutcome.FINAL


class DeadlineExceeded(RolloutTimeout):
    """The caller's deadline left too little time, or expired before a container was ready;
    nothing of the rollout ran. At a host's door it is the DEADLINE_EXCEEDED status; once the
    rollout was admitted, its row's ``timeout`` kind (the host still answers)."""


class Cancelled(InfraError):
    """The rollout was cancelled by its caller."""

    kind = InfraErrorKind.CANCELLED
    outcome = WorkOutcome.FINAL


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
    outcome = WorkOutcome.FINAL


class SandboxResetFailed(InfraError):
    """A used sandbox could not be brought back to a verified clean slate
    (:meth:`sandbox.runtime.base.SandboxRuntime.reset`): it must be destroyed, never reused.
    ``reason`` is one short word for metrics (``processes``, ``files``, ``ipc``, ``runner``,
    ``unresettable``, ``unreachable``, ``pids``, ``oom``); the message says what was found."""

    kind = InfraErrorKind.SANDBOX_UNAVAILABLE
    outcome = WorkOutcome.FINAL

    def __init__(self, message: str, *, reason: str = "other") -> None:
        super().__init__(message)
        self.reason = reason


class SystemicFailure(SkillOptError):
    """Every row of a batch failed before any model reply; the run stops with the common reason."""


def failure_of(exc: BaseException) -> InfraFailure:
    """The typed failure a rollout's row carries when ``exc`` ended it on the trusted side (a
    sandbox host, the in-process executor): never a score.

    Infrastructure and model errors keep their kind and outcome; a request that reached the
    agent and was still refused as invalid is final; anything else is a bug of ours, reported
    as an internal failure another attempt may not meet (lost).
    """
    if isinstance(exc, InfraError | ModelError):
        return exc.info()
    if isinstance(exc, InvalidRequest):
        return InfraFailure(
            kind=InfraErrorKind.INTERNAL, message=f"invalid input: {exc.message}", outcome=WorkOutcome.FINAL
        )
    return InfraFailure(
        kind=InfraErrorKind.INTERNAL,
        message=f"internal error: {type(exc).__name__}: {exc}",
        outcome=WorkOutcome.LOST,
    )
