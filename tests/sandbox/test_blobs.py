"""Content-addressed request files through a real service (real gRPC, the host's cache): a
corpus, a workbook or a skill crosses the wire once per host and token; evicted files are sent
again; a hash that does not match is refused; one token never gets another's files."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator

import grpc
import pytest

from controller.client.sandbox_client import ChannelConfig, SandboxClient
from sandbox.api import convert
from sandbox.api.status import detail_from_metadata
from sandbox.api.v1 import sandbox_pb2 as pb
from sandbox.api.v1 import sandbox_pb2_grpc as pb_grpc
from skillopt.envs.base import TaskItem
from skillopt.envs.registry import load_env_data
from skillopt.types import Limits, ModelSpec, RolloutRequest, SkillVersion
from tests.sandbox.conftest import Service, start_service

OTHER_TOKEN = "other-tenant-token-0001"
#: Holds one of the 150-282 KB bulletins below but not all three.
CAPACITY = 400_000


@pytest.fixture(scope="module")
def blob_service(docker_client, scripted) -> Iterator[Service]:
    yield from start_service(scripted, blob_cache_bytes=CAPACITY, server_kw={"tenants": ((OTHER_TOKEN, 0),)})


def item(uid: str) -> TaskItem:
    data = load_env_data("officeqa")
    return next(it for s in ("train", "val", "test") for it in data.split(s) if it.id == uid)


def request(it: TaskItem, skill: str = "# Rules\n") -> RolloutRequest:
    return RolloutRequest(
        rollout_id=f"test/blobs/{uuid.uuid4().hex[:8]}",
        env="officeqa",
        agent="qa",  # no container: what is measured is the door
        task=it.task,
        grading=it.grading,
        skill=SkillVersion(content=skill),
        model=ModelSpec(provider="scripted", model="gpt-5.5"),
        limits=Limits(wall_time_s=60, max_turns=1),
    )


def client(service: Service, token: str | None = None) -> SandboxClient:
    return SandboxClient(ChannelConfig(address=service.running.address, token=token or service.token))


def run(c: SandboxClient, scripts, it: TaskItem, skill: str = "# Rules\n"):
    scripts.scripts[it.task.instruction[:80]] = [
        {"text": f"<answer>{it.grading.attributes['answer']}</answer>"}
    ]
    row = c.run(request(it, skill), timeout_s=60)
    assert row.infra_error is None and row.hard == 1.0, row.fail_reason
    return row


def corpus_bytes(it: TaskItem) -> int:
    return sum(len(f.content) for f in it.task.cases[0].files)


def test_a_second_upload_of_the_same_corpus_moves_no_file_bytes(blob_service, scripts):
    c, it = client(blob_service), item("UID0001")
    store = blob_service.running.servicer.blobs
    stored = store.stats()["stored"]
    run(c, scripts, it)
    assert c.blobs.inline_bytes == corpus_bytes(it) > 250_000 and c.blobs.named_bytes == 0
    for _ in range(3):
        run(c, scripts, it)
    assert c.blobs.inline_bytes == corpus_bytes(it)  # not one more byte of the bulletin
    assert c.blobs.named_bytes == 3 * corpus_bytes(it)
    assert store.stats()["stored"] == stored + 1 and store.stats()["hits"] >= 3


def test_an_evicted_file_is_sent_again_and_the_rollout_runs(blob_service, scripts):
    c = client(blob_service)
    first, second = item("UID0001"), item("UID0220")  # 282 KB, then 150 KB: together over CAPACITY
    run(c, scripts, first)
    evicted = blob_service.running.servicer.blobs.stats()["evicted"]
    run(c, scripts, second)
    assert blob_service.running.servicer.blobs.stats()["evicted"] > evicted
    before = c.blobs.inline_bytes
    row = run(c, scripts, first)  # named by hash, refused as BLOBS_MISSING, sent again
    assert row.hard == 1.0 and c.blobs.inline_bytes == before + corpus_bytes(first)
    assert blob_service.running.servicer.blobs.stats()["bytes"] <= CAPACITY


def test_a_large_skill_travels_once_and_comes_back_whole_in_the_trace(blob_service, scripts):
    c, it = client(blob_service), item("UID0023")
    skill = "# Rules\n" + "".join(
        f"- Rule {i}: check the table's unit line before answering.\n" for i in range(400)
    )
    run(c, scripts, it, skill)
    sent = c.blobs.inline_bytes
    row = run(c, scripts, it, skill)
    assert c.blobs.inline_bytes == sent  # neither the skill nor the bulletin again
    # The host sent the trace with the skill as a marker; the client put the skill back.
    assert skill.strip() in row.trace.system_prompt and skill.strip() in row.trace.messages[0].content
    assert "\ue000" not in row.trace.system_prompt


def raw_run(service: Service, msg: pb.RunRequest, token: str) -> grpc.RpcError:
    channel = grpc.insecure_channel(service.running.address)
    try:
        stub = pb_grpc.SandboxStub(channel)
        with pytest.raises(grpc.RpcError) as info:
            list(stub.Run(msg, timeout=30, metadata=(("authorization", f"Bearer {token}"),)))
        return info.value
    finally:
        channel.close()


def test_a_hash_that_does_not_match_and_an_unknown_hash_are_refused(blob_service):
    it = item("UID0023")
    msg = convert.request_to_proto(request(it))
    f = msg.task.cases[0].files[0]
    f.sha256 = hashlib.sha256(b"something else").hexdigest()
    err = raw_run(blob_service, msg, blob_service.token)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "does not match its sha256" in err.details()
    f.sha256 = "zz"
    err = raw_run(blob_service, msg, blob_service.token)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "64 hex digits" in err.details()
    unknown = hashlib.sha256(b"never sent" + uuid.uuid4().bytes).hexdigest()
    f.sha256, f.content = unknown, b""
    err = raw_run(blob_service, msg, blob_service.token)
    detail = detail_from_metadata(err.trailing_metadata())
    assert err.code() == grpc.StatusCode.FAILED_PRECONDITION and detail is not None
    assert detail.reason == pb.ErrorDetail.BLOBS_MISSING and list(detail.missing_sha256) == [unknown]


def test_one_tokens_files_are_never_served_to_another(blob_service, scripts):
    it = item("UID0152")
    mine = client(blob_service)
    run(mine, scripts, it)  # kept for this token
    digest = hashlib.sha256(it.task.cases[0].files[0].content).hexdigest()
    msg = convert.request_to_proto(request(it))
    msg.task.cases[0].files[0].sha256, msg.task.cases[0].files[0].content = digest, b""
    err = raw_run(blob_service, msg, OTHER_TOKEN)  # the other token names the same hash
    detail = detail_from_metadata(err.trailing_metadata())
    assert err.code() == grpc.StatusCode.FAILED_PRECONDITION and list(detail.missing_sha256) == [digest]
    theirs = client(blob_service, OTHER_TOKEN)
    theirs.blobs.learn([digest])  # a client that guesses: it must send the file anyway
    run(theirs, scripts, it)
    assert theirs.blobs.inline_bytes == corpus_bytes(it)
