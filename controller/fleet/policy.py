"""The fleet's one answer to "will this failure be retried?".

Every failure of a rollout, whether the call raised (a typed error mapped from the gRPC status
at the client) or the host answered with an infrastructure row, says what happened to the work
(:class:`~skillopt.types.WorkOutcome`). :class:`RetryPolicy` turns that, with what the rollout
has used so far, into one decision:

==============  ===========================================================  =============
outcome         decision                                                     costs
==============  ===========================================================  =============
NOT_STARTED     ``FAILOVER``: place it again (another host, or this one       a bounce
                once it has room)
LOST            ``RETRY``: run it again with the same ``rollout_id``,         an attempt
                preferably on a host not tried yet
FINAL           ``GIVE_UP``: its row stands                                   nothing
==============  ===========================================================  =============

Out of attempts or bounces, the rollout gives up too, and the last row of a lost attempt stands
(or, when nothing ever started, a ``sandbox_unavailable`` row saying so).

Why a retry is safe: the ``rollout_id`` is the idempotency key. A host still running the id
attaches the new stream to that run, and one that finished it replays its result (a retryable
failure is not kept, so that one runs again), so a lost stream never makes a rollout run twice.
Deadlines: each attempt runs under its own client deadline (the rollout's wall time plus slack)
and the host bounds the wall time; a deadline that expired is a final outcome
(``RolloutTimeout``, ``DeadlineExceeded``), never retried. A run that is stopping retries
nothing: its caller asks before it decides.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from skillopt.errors import InfraError, InvalidRequest, RolloutTimeout, SkillOptError
from skillopt.types import InfraErrorKind, InfraFailure, RolloutRequest, RolloutResult, WorkOutcome

__all__ = ["Decision", "RetryPolicy", "Tries", "error_row", "infra_row"]


class Decision(enum.StrEnum):
    """What the fleet does with a failed rollout."""

    RETRY = "retry"  # it started and was lost: run it again (an attempt), same rollout_id
    FAILOVER = "failover"  # nothing ran: place it again, elsewhere or later (no attempt)
    GIVE_UP = "give_up"  # final, or out of attempts or bounces: the row stands


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """How often a rollout is run again.

    Args:
        max_attempts: runs of a rollout that may start (the first included); a lost one past
            this gives up.
        max_bounces: placements that found the host unusable (full, draining, unreachable)
            before the rollout gives up; a full host is backed off, so this bounds the wait.

    Raises:
        ValueError: a bound below 1.
    """

    max_attempts: int = 3
    max_bounces: int = 50

    def __post_init__(self) -> None:
        if self.max_attempts < 1 or self.max_bounces < 1:
            raise ValueError(
                f"max_attempts and max_bounces must be >= 1, got {self.max_attempts}, {self.max_bounces}"
            )

    def decide(self, outcome: WorkOutcome, *, attempts: int, bounces: int) -> Decision:
        """The decision for a failure with ``outcome``.

        Args:
            outcome: what the failure did to the work.
            attempts: runs that started so far, this one included when it started.
            bounces: placements refused so far, this one included when it was refused.
        """
        if outcome is WorkOutcome.NOT_STARTED:
            return Decision.FAILOVER if bounces < self.max_bounces else Decision.GIVE_UP
        if outcome is WorkOutcome.LOST:
            return Decision.RETRY if attempts < self.max_attempts else Decision.GIVE_UP
        return Decision.GIVE_UP


@dataclass
class Tries:
    """One rollout's tries so far under ``policy``: what to do after each failed one, and which
    row stands when it gives up."""

    policy: RetryPolicy
    attempts: int = 0
    bounces: int = 0
    #: Hosts where an attempt started and was lost (placement prefers the others).
    tried: set[str] = field(default_factory=set)
    #: The row of the last lost attempt.
    last: RolloutResult | None = None

    def after(self, row: RolloutResult, host: str) -> Decision:
        """Count the failed try whose row (``infra_error`` set) came from ``host``; decide."""
        assert row.infra_error is not None
        outcome = row.infra_error.outcome
        if outcome is WorkOutcome.NOT_STARTED:
            self.bounces += 1
        elif outcome is WorkOutcome.LOST:
            self.attempts += 1
            self.tried.add(host)
            self.last = row
        return self.policy.decide(outcome, attempts=self.attempts, bounces=self.bounces)

    def standing(self, req: RolloutRequest, row: RolloutResult, hosts: str) -> RolloutResult:
        """The row that stands when ``req`` gives up after ``row``: a final one itself, else
        the last lost attempt's, else one saying that no host of ``hosts`` took it."""
        assert row.infra_error is not None
        if row.infra_error.outcome is WorkOutcome.FINAL:
            return row
        if self.last is not None:
            return self.last
        info = InfraFailure(
            kind=InfraErrorKind.SANDBOX_UNAVAILABLE,
            message=f"no host took the rollout after {self.bounces} tries",
            outcome=WorkOutcome.NOT_STARTED,
        )
        return infra_row(req, info, hosts)


def infra_row(req: RolloutRequest, info: InfraFailure, host: str) -> RolloutResult:
    """The row of ``req`` when it ended on ``info`` at ``host`` (never scored)."""
    return replace(RolloutResult.of_infra(req, info), host=host)


def error_row(req: RolloutRequest, exc: SkillOptError, host: str, *, wall_s: float) -> RolloutResult:
    """The row a failed call to ``host`` stands for, with the error's outcome.

    A deadline that expired is the reference's timeout row (``task-timeout-<N>s``): the host was
    asked to stop at the wall time and the client deadline expired too; the host killed the
    container.
    """
    if isinstance(exc, RolloutTimeout):
        return RolloutResult(
            id=req.task.id,
            rollout_id=req.rollout_id,
            phase="timeout",
            fail_reason=f"task-timeout-{int(wall_s)}s",
            host=host,
            infra_error=InfraFailure(kind=InfraErrorKind.TIMEOUT, message=f"no result within {wall_s:.0f}s"),
        )
    if isinstance(exc, InfraError):
        return infra_row(req, exc.info(), host)
    message = f"host refused the request: {exc.message}" if isinstance(exc, InvalidRequest) else exc.message
    # Not the environment: the request or our configuration (e.g. UNAUTHENTICATED).
    info = InfraFailure(kind=InfraErrorKind.INTERNAL, message=message, outcome=exc.outcome)
    return infra_row(req, info, host)
