"""One answer to "will this failure be retried?" (issue 32, item 3): every failure says what
happened to the work, and the fleet's policy decides from that and the tries used alone.

A table of failures (each error the client raises, each row a host sends) → the outcome it
carries → the decision; the counting over a rollout's tries; the row that stands when it gives
up; and the classification at the edges it relies on: the proto's status table (both ways,
also with a host that predates outcomes), the result's infra error on the wire and in the run
directory, and the exceptions a host turns into rows.
"""

from __future__ import annotations

import grpc
import pytest

from controller.client.sandbox_client import ChannelConfig, SandboxClient
from controller.fleet.policy import Decision, RetryPolicy, Tries, error_row
from sandbox.api import convert
from sandbox.api.status import error_for, status_for
from sandbox.api.v1 import sandbox_pb2 as pb
from skillopt.errors import (
    BlobsMissing,
    BudgetExceeded,
    Cancelled,
    ContainerStartFailed,
    DeadlineExceeded,
    Draining,
    GatewayError,
    GraderFailed,
    HostFull,
    ImageMissing,
    InvalidRequest,
    ModelAuthError,
    ModelBadRequest,
    ModelTimeout,
    ModelUnavailable,
    OOMKilled,
    OutputLimitExceeded,
    RateLimited,
    ReplayMiss,
    RolloutTimeout,
    SandboxUnavailable,
    SessionLimit,
    SkillOptError,
    Unauthenticated,
    UnknownRollout,
    failure_of,
)
from skillopt.trainer.rundir import ResultRow
from skillopt.types import Grading as GradingSpec
from skillopt.types import (
    InfraErrorKind,
    InfraFailure,
    ModelSpec,
    RolloutRequest,
    RolloutResult,
    SkillVersion,
    Task,
    WorkOutcome,
)

N, L, F = WorkOutcome.NOT_STARTED, WorkOutcome.LOST, WorkOutcome.FINAL
REQ = RolloutRequest(
    rollout_id="run/7",
    env="spreadsheetbench",
    agent="codegen_single",
    task=Task(id="t7", instruction="x"),
    grading=GradingSpec(),
    skill=SkillVersion(),
    model=ModelSpec(provider="p", model="m"),
)


def _stream_lost() -> SandboxUnavailable:
    return SandboxUnavailable("h:1: the stream ended without a result", phase="stream")


def _never_reached() -> SandboxUnavailable:
    err = SandboxUnavailable("h:1: connection refused", phase="connect")
    err.outcome = WorkOutcome.NOT_STARTED  # what the client says when nothing came back
    return err


def _cancelled_by_host() -> Cancelled:
    err = Cancelled("h:1: rollout run/7 was cancelled")
    err.outcome = WorkOutcome.LOST  # what the client says when its caller did not cancel
    return err


# failure → (outcome it carries, the fleet's decision on a first try)
ERRORS: list[tuple[str, SkillOptError, WorkOutcome, Decision]] = [
    ("host full (another client)", HostFull("full"), N, Decision.FAILOVER),
    ("host draining", Draining("draining"), N, Decision.FAILOVER),
    ("host never reached", _never_reached(), N, Decision.FAILOVER),
    ("stream broke after the host took it", _stream_lost(), L, Decision.RETRY),
    ("host cancelled it (drain grace over)", _cancelled_by_host(), L, Decision.RETRY),
    ("the caller cancelled it", Cancelled("cancelled"), F, Decision.GIVE_UP),
    ("deadline expired on the wire", RolloutTimeout("deadline"), F, Decision.GIVE_UP),
    ("deadline too short at the door", DeadlineExceeded("too short"), F, Decision.GIVE_UP),
    ("image not built on the host", ImageMissing("no image"), F, Decision.GIVE_UP),
    ("request refused as invalid", InvalidRequest("bad name"), F, Decision.GIVE_UP),
    ("token refused", Unauthenticated("bad token"), F, Decision.GIVE_UP),
    ("unknown rollout", UnknownRollout("no such id"), F, Decision.GIVE_UP),
]
# a host's row with this infrastructure failure → (outcome, decision on a first try)
ROW_ERRORS: list[tuple[str, SkillOptError, WorkOutcome, Decision]] = [
    ("container did not start", ContainerStartFailed("no start"), L, Decision.RETRY),
    ("engine unreachable mid-rollout", SandboxUnavailable("engine gone"), L, Decision.RETRY),
    ("gateway failed", GatewayError("gateway"), L, Decision.RETRY),
    ("grader worker died", GraderFailed("grader died"), L, Decision.RETRY),
    ("provider 5xx", ModelUnavailable("500"), L, Decision.RETRY),
    ("provider timeout", ModelTimeout("slow"), L, Decision.RETRY),
    ("provider 429", RateLimited("429"), L, Decision.RETRY),
    ("provider refused the key", ModelAuthError("401"), F, Decision.GIVE_UP),
    ("provider refused the request", ModelBadRequest("400"), F, Decision.GIVE_UP),
    ("replay miss", ReplayMiss("miss"), F, Decision.GIVE_UP),
    ("OOM kill", OOMKilled("oom"), F, Decision.GIVE_UP),
    ("wall time used up", RolloutTimeout("timeout"), F, Decision.GIVE_UP),
    ("output over its cap", OutputLimitExceeded("big"), F, Decision.GIVE_UP),
    ("pool closing under it", Draining("shutting down"), N, Decision.FAILOVER),
]


@pytest.mark.parametrize(("what", "exc", "outcome", "decision"), ERRORS, ids=[e[0] for e in ERRORS])
def test_a_failed_call_is_decided_by_what_it_did_to_the_work(what, exc, outcome, decision):
    row = error_row(REQ, exc, "h:1", wall_s=60)
    assert row.infra_error is not None and row.infra_error.outcome is outcome, what
    assert exc.retryable is (outcome is not F)
    assert Tries(RetryPolicy()).after(row, "h:1") is decision


@pytest.mark.parametrize(("what", "exc", "outcome", "decision"), ROW_ERRORS, ids=[e[0] for e in ROW_ERRORS])
def test_a_hosts_infra_row_is_decided_by_what_it_did_to_the_work(what, exc, outcome, decision):
    row = RolloutResult.of_infra(REQ, failure_of(exc))
    assert row.infra_error is not None and row.infra_error.outcome is outcome, what
    assert row.infra_error.is_retryable is (outcome is not F)
    assert Tries(RetryPolicy()).after(row, "h:1") is decision


@pytest.mark.parametrize(
    ("outcome", "attempts", "bounces", "decision"),
    [
        (N, 0, 1, Decision.FAILOVER),
        (N, 2, 49, Decision.FAILOVER),
        (N, 0, 50, Decision.GIVE_UP),
        (L, 1, 0, Decision.RETRY),
        (L, 2, 30, Decision.RETRY),
        (L, 3, 0, Decision.GIVE_UP),
        (F, 1, 0, Decision.GIVE_UP),
        (F, 0, 0, Decision.GIVE_UP),
    ],
)
def test_the_policy_counts_attempts_for_lost_work_and_bounces_for_unstarted_work(
    outcome, attempts, bounces, decision
):
    assert (
        RetryPolicy(max_attempts=3, max_bounces=50).decide(outcome, attempts=attempts, bounces=bounces)
        is decision
    )


def test_out_of_attempts_the_last_lost_row_stands_and_only_lost_tries_avoid_their_host():
    tries = Tries(RetryPolicy(max_attempts=2, max_bounces=5))
    full = error_row(REQ, HostFull("full"), "a:1", wall_s=60)
    lost_a = error_row(REQ, _stream_lost(), "a:1", wall_s=60)
    lost_b = RolloutResult.of_infra(REQ, failure_of(ContainerStartFailed("no start on b")))
    assert tries.after(full, "a:1") is Decision.FAILOVER and tries.tried == set()
    assert tries.after(lost_a, "a:1") is Decision.RETRY and tries.tried == {"a:1"}
    assert tries.after(lost_b, "b:1") is Decision.GIVE_UP
    assert (tries.attempts, tries.bounces, tries.tried) == (2, 1, {"a:1", "b:1"})
    assert tries.standing(REQ, lost_b, "a:1,b:1") is lost_b


def test_refused_everywhere_it_gives_up_with_a_row_saying_no_host_took_it():
    tries = Tries(RetryPolicy(max_bounces=3))
    rows = [error_row(REQ, Draining("draining"), "a:1", wall_s=60) for _ in range(3)]
    assert [tries.after(r, "a:1") for r in rows] == [Decision.FAILOVER, Decision.FAILOVER, Decision.GIVE_UP]
    row = tries.standing(REQ, rows[-1], "a:1,b:1")
    assert row.infra_error is not None and row.infra_error.kind is InfraErrorKind.SANDBOX_UNAVAILABLE
    assert row.infra_error.outcome is N and row.host == "a:1,b:1"
    assert row.fail_reason == "infra-sandbox_unavailable: no host took the rollout after 3 tries"
    # A lost attempt earlier is the better answer: its row stands instead.
    tries = Tries(RetryPolicy(max_bounces=1))
    lost = error_row(REQ, _stream_lost(), "a:1", wall_s=60)
    assert tries.after(lost, "a:1") is Decision.RETRY
    assert tries.after(rows[0], "b:1") is Decision.GIVE_UP
    assert tries.standing(REQ, rows[0], "a:1,b:1") is lost


def test_a_final_row_stands_as_it_is():
    tries = Tries(RetryPolicy())
    oom = RolloutResult.of_infra(REQ, failure_of(OOMKilled("oom")))
    assert tries.after(oom, "a:1") is Decision.GIVE_UP and tries.standing(REQ, oom, "a:1") is oom


def test_the_rows_failed_calls_stand_for():
    timeout = error_row(REQ, RolloutTimeout("gone"), "a:1", wall_s=90)
    assert (timeout.phase, timeout.fail_reason) == ("timeout", "task-timeout-90s")
    assert timeout.infra_error == InfraFailure(kind=InfraErrorKind.TIMEOUT, message="no result within 90s")
    refused = error_row(REQ, InvalidRequest("no agent 'x'"), "a:1", wall_s=90)
    assert refused.fail_reason == "infra-internal: host refused the request: no agent 'x'"
    auth = error_row(REQ, Unauthenticated("a:1: bad token"), "a:1", wall_s=90)
    assert auth.infra_error == InfraFailure(kind=InfraErrorKind.INTERNAL, message="a:1: bad token", outcome=F)
    image = error_row(REQ, ImageMissing("no image"), "a:1", wall_s=90)
    assert image.infra_error is not None and image.infra_error.kind is InfraErrorKind.IMAGE_MISSING


def test_what_a_host_turns_an_exception_into():
    assert failure_of(InvalidRequest("bad cell")) == InfraFailure(
        kind=InfraErrorKind.INTERNAL, message="invalid input: bad cell", outcome=F
    )
    assert failure_of(KeyError("k")) == InfraFailure(
        kind=InfraErrorKind.INTERNAL, message="internal error: KeyError: 'k'", outcome=L
    )
    assert failure_of(RateLimited("429")).kind is InfraErrorKind.MODEL_RATE_LIMITED
    budget = failure_of(BudgetExceeded("used up"))
    assert budget.outcome is F and not budget.is_retryable


STATUS_ERRORS = [
    HostFull("full"),
    SessionLimit("no room", retry_after_s=3.0),
    Draining("draining"),
    SandboxUnavailable("engine down"),
    ImageMissing("no image"),
    Cancelled("cancelled"),
    DeadlineExceeded("too short"),
    InvalidRequest("bad"),
    Unauthenticated("token"),
    BlobsMissing("send again", missing=("ab" * 32,)),
]


@pytest.mark.parametrize("exc", STATUS_ERRORS, ids=lambda e: type(e).__name__)
def test_the_status_table_carries_the_outcome_both_ways(exc):
    code, message, trailers = status_for(exc, host="h")
    detail = pb.ErrorDetail.FromString(trailers[0][1])
    assert detail.retryable is exc.retryable and detail.outcome == convert.outcome_to_proto(exc.outcome)
    back = error_for(code, message, detail, host="h")
    assert type(back) is type(exc) and back.outcome is exc.outcome


def test_a_bug_at_the_door_is_internal_and_lost():
    code, _, trailers = status_for(KeyError("k"))
    detail = pb.ErrorDetail.FromString(trailers[0][1])
    assert code is grpc.StatusCode.INTERNAL and detail.outcome == pb.WORK_OUTCOME_LOST and detail.retryable


@pytest.mark.parametrize(
    ("reason", "retryable", "outcome"),
    [
        (pb.ErrorDetail.HOST_FULL, True, N),
        (pb.ErrorDetail.DRAINING, True, N),
        (pb.ErrorDetail.UNAVAILABLE, True, L),
        (pb.ErrorDetail.UNAVAILABLE, False, F),
        (pb.ErrorDetail.CANCELLED, False, F),
        (pb.ErrorDetail.IMAGE_MISSING, False, F),
    ],
)
def test_a_host_that_predates_outcomes_is_read_by_its_retryable_flag(reason, retryable, outcome):
    detail = pb.ErrorDetail(reason=reason, retryable=retryable)  # no outcome: UNSPECIFIED
    assert error_for(grpc.StatusCode.UNAVAILABLE, "m", detail).outcome is outcome


@pytest.mark.parametrize("outcome", list(WorkOutcome))
def test_a_rows_outcome_travels_on_the_wire_and_in_the_run_directory(outcome):
    row = RolloutResult.of_infra(
        REQ, InfraFailure(kind=InfraErrorKind.SANDBOX_UNAVAILABLE, message="m", outcome=outcome)
    )
    msg = convert.result_to_proto(row)
    assert msg.infra_error.retryable is (outcome is not F)
    assert convert.result_from_proto(msg).infra_error == row.infra_error
    stored = ResultRow.of(row).to_json()
    assert stored["infra_error"]["outcome"] == outcome.value
    assert ResultRow.from_json(stored).result().infra_error == row.infra_error


@pytest.mark.parametrize(("retryable", "outcome"), [(True, L), (False, F)])
def test_rows_from_peers_and_files_that_predate_outcomes(retryable, outcome):
    msg = pb.RunResult(id="t7", rollout_id="run/7")
    msg.infra_error.CopyFrom(
        pb.InfraError(kind=pb.InfraError.GATEWAY_ERROR, message="m", retryable=retryable)
    )
    assert convert.result_from_proto(msg).infra_error.outcome is outcome
    row = RolloutResult.of_infra(REQ, InfraFailure(kind=InfraErrorKind.TIMEOUT, message="m"))
    stored = ResultRow.of(row).to_json()
    del stored["infra_error"]["outcome"], stored["schema_version"]  # a row version 0
    stored["infra_error"]["retryable"] = retryable
    assert ResultRow.from_json(stored).result().infra_error.outcome is outcome


def test_a_host_that_never_answers_did_not_start_the_work():
    # A real channel to a port nothing listens on: the client says nothing ran there.
    channel = ChannelConfig(address="127.0.0.1:9", connect_timeout_s=1.0)
    with SandboxClient(channel) as client, pytest.raises(SandboxUnavailable) as info:
        client.run(REQ, timeout_s=10)
    assert info.value.phase == "connect" and info.value.outcome is N
