"""The gRPC contract: auth, validation, capacity, cancellation, health, reflection, codegen."""

from __future__ import annotations

import dataclasses
import threading

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sandbox.api import codegen, convert
from sandbox.api.v1 import sandbox_pb2_grpc as pb_grpc
from skillopt.errors import Cancelled, HostFull, InvalidRequest, SkillOptError
from skillopt.types import File, Limits, ModelSpec, TestCase, WorkOutcome
from tests.sandbox.conftest import fenced, request_for, solution_code, start_service


def test_generated_code_is_current():
    assert codegen.stale_files() == [], "run: python -m sandbox.api.codegen"


def _raw_run(service, request_pb, *, token: str | None):
    channel = grpc.insecure_channel(service.running.address)
    try:
        stub = pb_grpc.SandboxStub(channel)
        metadata = (("authorization", f"Bearer {token}"),) if token is not None else ()
        return list(stub.Run(request_pb, timeout=30, metadata=metadata))
    finally:
        channel.close()


@pytest.mark.parametrize("token", [None, "wrong-token"])
def test_missing_or_wrong_token_is_unauthenticated(service, sample, token):
    with pytest.raises(grpc.RpcError) as info:
        _raw_run(service, convert.request_to_proto(request_for(sample, "32255")), token=token)
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "token" in info.value.details() or "credentials" in info.value.details()


def _bad(req, **changes):
    return dataclasses.replace(req, **changes)


def _with_input(req, name: str, content: bytes):
    case = TestCase(name=req.task.cases[0].name, files=(File(name=name, content=content),))
    return dataclasses.replace(req, task=dataclasses.replace(req.task, cases=(case, *req.task.cases[1:])))


def test_bad_input_is_invalid_argument_with_a_useful_message(service, sample):
    good = request_for(sample, "32255")
    xlsx = good.task.cases[0].files[0].content
    cases = {
        "unknown env": (_bad(good, env="nope"), "unknown env 'nope'"),
        "unknown agent": (_bad(good, agent="nope"), "no agent 'nope'"),
        "path traversal": (_with_input(good, "../../etc/passwd", xlsx), "path traversal"),
        "absolute name": (_with_input(good, "/etc/passwd", xlsx), "must be relative"),
        "non-xlsx bytes": (
            _with_input(good, "input.xlsx", b"this is not a workbook"),
            "not an xlsx workbook",
        ),
        "oversize": (_with_input(good, "input.xlsx", b"PK\x03\x04" + b"x" * (5 * 2**20)), "limit is"),
        "unknown provider": (
            _bad(good, model=ModelSpec(provider="nope", model="m")),
            "unknown model provider",
        ),
        "bad rollout id": (_bad(good, rollout_id="has spaces and $"), "rollout_id"),
    }
    for label, (req, expected) in cases.items():
        with pytest.raises(InvalidRequest) as info:
            service.client.run(req, timeout_s=30)
        assert expected in info.value.message, (label, info.value.message)
    # A skill whose checksum does not match its content.
    msg = convert.request_to_proto(good)
    msg.skill.content, msg.skill.sha256 = "# A skill\n", "0" * 64
    with pytest.raises(grpc.RpcError) as info:
        _raw_run(service, msg, token=service.token)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "sha256" in info.value.details()
    # Nothing crashed and nothing leaked: no rollout is running and the host still works.
    assert service.client.describe().running == 0


def test_a_rollout_id_reused_for_another_request_is_refused(service, scripts, sample):
    scripts.scripts[sample.task("42354").instruction[:120]] = [fenced(solution_code("42354"))]
    first = request_for(sample, "42354", rollout_id="test/reuse/1")
    assert service.client.run(first, timeout_s=120).hard == 1.0
    other = request_for(sample, "32902", rollout_id="test/reuse/1")
    with pytest.raises(InvalidRequest, match="already used"):
        service.client.run(other, timeout_s=30)


def test_describe_health_and_reflection(service):
    d = service.client.describe()
    assert d.host == service.host_id and d.capacity == 4 and not d.draining
    assert "spreadsheetbench/codegen_multi" in d.agents
    assert d.image_digests["skillopt-runtime:latest"].startswith("sha256:")
    # Agents with their own image report it too (TextWorld's game engine), pinned by runs.
    assert d.agent_image_digests["skillopt-textworld:latest"].startswith("sha256:")
    assert "skillopt-runtime:latest" not in d.agent_image_digests
    assert d.providers == ("scripted", "scripted-anthropic") and len(d.runner_sha256) == 64
    assert "spreadsheetbench/codex_exec" in d.agents  # the gateway network is up on this host
    channel = grpc.insecure_channel(service.running.address)
    try:
        # Health needs no token (load balancers probe it).
        reply = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=""), timeout=5
        )
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
            ProtoReflectionDescriptorDatabase,
        )

        # Reflection sits behind the token like everything but health.
        with pytest.raises(grpc.RpcError):
            ProtoReflectionDescriptorDatabase(channel).get_services()
        authed = grpc.intercept_channel(channel, _BearerInterceptor(service.token))
        services = ProtoReflectionDescriptorDatabase(authed).get_services()
        assert "skillopt.sandbox.v1.Sandbox" in services and "grpc.health.v1.Health" in services
    finally:
        channel.close()


class _BearerInterceptor(grpc.StreamStreamClientInterceptor, grpc.UnaryUnaryClientInterceptor):
    def __init__(self, token: str) -> None:
        self.metadata = (("authorization", f"Bearer {token}"),)

    def _details(self, details):
        return details._replace(metadata=tuple(details.metadata or ()) + self.metadata)

    def intercept_stream_stream(self, continuation, details, request_iterator):
        return continuation(self._details(details), request_iterator)

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._details(details), request)


def _looping_request(sample, scripts, task_id: str, marker_code: str = "while True:\n    pass\n"):
    scripts.scripts[sample.task(task_id).instruction[:120]] = [fenced(marker_code)]
    return request_for(sample, task_id, limits=Limits(wall_time_s=300, exec_timeout_s=300))


def _run_in_thread(client, req):
    """Run ``req`` on a thread; the returned event is set when the stream reports that the
    rollout's code is executing (the progress stream is the synchronisation)."""
    box: dict = {}
    executing = threading.Event()

    def on_event(event) -> None:
        if event.phase == "exec":
            executing.set()

    def target():
        try:
            box["result"] = client.run(req, timeout_s=300, on_event=on_event)
        except SkillOptError as exc:
            box["error"] = exc
        finally:
            executing.set()

    t = threading.Thread(target=target)
    t.start()
    return t, box, executing


def test_cancel_kills_the_running_rollout(service, scripts, sample, docker_client):
    req = _looping_request(sample, scripts, "263-1")
    thread, box, executing = _run_in_thread(service.client, req)
    assert executing.wait(120) and "error" not in box
    assert service.client.cancel(req.rollout_id) is True
    thread.join(60)
    assert not thread.is_alive()
    assert isinstance(box.get("error"), Cancelled), box
    # Another party cancelled it, not this caller: to this caller the work was lost (retried).
    assert box["error"].outcome is WorkOutcome.LOST
    assert service.client.describe().running == 0
    with pytest.raises(SkillOptError):
        service.client.cancel("never-seen")


def test_a_full_host_says_resource_exhausted(docker_client, scripted, scripts, sample):
    for svc in start_service(scripted, capacity=1, pool_size=1):
        req = _looping_request(sample, scripts, "40892")
        thread, box, executing = _run_in_thread(svc.client, req)
        assert executing.wait(120) and "error" not in box
        scripts.scripts[sample.task("32255").instruction[:120]] = [fenced(solution_code("32255"))]
        with pytest.raises(HostFull, match="full") as info:
            svc.client.run(request_for(sample, "32255"), timeout_s=30)
        assert info.value.outcome is WorkOutcome.NOT_STARTED
        svc.client.cancel(req.rollout_id)
        thread.join(60)
        assert isinstance(box.get("error"), Cancelled)


def test_the_callers_deadline_bounds_the_rollout(service, scripts, sample):
    req = _looping_request(sample, scripts, "493-18")
    # The host stops the rollout just before the client's deadline and still answers.
    row = service.client.run(req, timeout_s=8)
    assert row.infra_error is not None and row.infra_error.kind.value == "timeout"
    assert row.timings_s["total"] < 8


def test_a_client_that_goes_away_cancels_the_rollout(service, scripts, sample):
    req = _looping_request(sample, scripts, "59595")
    stop = threading.Event()

    def on_event(event) -> None:
        if event.phase == "exec":
            stop.set()  # the client gives up as soon as the code runs

    with pytest.raises(Cancelled) as info:
        service.client.run(req, timeout_s=120, on_event=on_event, cancel=stop)
    assert info.value.outcome is WorkOutcome.FINAL  # this caller's own cancellation
    handle = service.running.admission.get(req.rollout_id)
    assert handle is not None
    assert handle.wait_done(60) and handle.cancel.is_set()
    assert handle.result is not None and handle.result.infra_error.kind.value == "cancelled"
