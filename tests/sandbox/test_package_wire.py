"""A skill package on the wire, both ends without a server: the client's naming (a version once
in full, then by its tree hash), the host's resolution and what it keeps, eviction, tampering,
and a refusal's typed detail through the status table. The same parts run through the real
service in ``test_skill_packages.py``."""

from __future__ import annotations

import grpc
import pytest

from sandbox.api import convert
from sandbox.api.blobs import ClientBlobs, PackageNames
from sandbox.api.status import detail_from_metadata, error_for, status_for
from sandbox.service.blobs import BlobStore
from sandbox.service.validation import check_skill_package
from skillopt.errors import BlobsMissing, InvalidRequest, SkillPackageRefused
from skillopt.skill.package import PackageLimits
from skillopt.types import SkillFile, SkillVersion, WorkOutcome

SKILL = SkillVersion(
    name="demo-pkg",
    content="---\nname: demo-pkg\ndescription: A demo.\n---\n# Demo\n",
    files=(
        SkillFile(path="references/a.md", data=b"# A\n" * 3000),
        SkillFile(path="scripts/run.sh", data=b"#!/bin/sh\necho hi\n", executable=True),
    ),
)
SIZE = len(SKILL.content.encode()) + sum(len(f.data) for f in SKILL.files)


def resolve(store: BlobStore, msg, tenant: str = "t") -> SkillVersion:
    resolver = store.resolver(tenant)
    skill = convert.skill_from_proto(msg, resolver)
    resolver.check()
    return skill


def test_a_version_is_listed_once_then_named_by_its_tree_hash():
    client, store = ClientBlobs(), BlobStore(1 << 30)
    names = client.package(SKILL)
    msg = convert.skill_to_proto(SKILL, names)
    assert msg.tree_sha256 == SKILL.tree_sha256 and len(msg.files) == 2 and all(f.sha256 for f in msg.files)
    assert resolve(store, msg) == SKILL
    assert (client.inline_bytes, client.named_bytes) == (SIZE, 0)
    client.learn(names.inlined)
    msg = convert.skill_to_proto(SKILL, client.package(SKILL))
    assert (msg.name, msg.tree_sha256, msg.content, msg.sha256, len(msg.files)) == (
        SKILL.name,
        SKILL.tree_sha256,
        "",
        "",
        0,
    )
    assert msg.ByteSize() < 100
    assert resolve(store, msg) == SKILL
    assert (client.inline_bytes, client.named_bytes) == (SIZE, SIZE)
    # Another token's cache never serves it.
    with pytest.raises(BlobsMissing) as err:
        resolve(store, msg, tenant="other")
    assert err.value.missing == (SKILL.tree_sha256,)


def test_an_equal_version_built_anew_is_named_by_its_tree_hash():
    """The client names a version by the hashes inside it, never by the object: a copy built
    elsewhere (another batch, a resumed run) is named by its tree hash alone once the host
    keeps the version, and its parts' hashes come with it."""
    client = ClientBlobs()
    client.learn(client.package(SKILL).inlined)
    copy = SkillVersion(
        name=SKILL.name,
        content="".join(SKILL.content),
        files=tuple(
            SkillFile(path=f.path, data=bytes(bytearray(f.data)), executable=f.executable)
            for f in SKILL.files
        ),
    )
    assert copy is not SKILL and copy.files[0].data is not SKILL.files[0].data and copy == SKILL
    names = client.package(copy)
    assert names.tree_known and names.file_sha256 == tuple(f.sha256 for f in SKILL.files)
    assert convert.skill_to_proto(copy, names).ByteSize() < 100


def test_evicted_parts_name_the_tree_alone_and_the_client_lists_it_all_again():
    client, store = ClientBlobs(), BlobStore(1 << 30)
    names = client.package(SKILL)
    resolve(store, convert.skill_to_proto(SKILL, names))
    client.learn(names.inlined)
    store._items.clear()  # every file evicted; the listing is kept
    with pytest.raises(BlobsMissing) as err:
        resolve(store, convert.skill_to_proto(SKILL, client.package(SKILL)))
    assert err.value.missing == (SKILL.tree_sha256,)
    client.forget(err.value.missing)
    msg = convert.skill_to_proto(SKILL, client.package(SKILL))
    assert msg.content and all(f.content for f in msg.files)  # nothing named: all inline
    assert resolve(store, msg) == SKILL


def test_a_package_that_does_not_hash_to_its_tree_is_refused():
    msg = convert.skill_to_proto(SKILL)
    msg.files[1].executable = False  # a mode is part of the version
    with pytest.raises(InvalidRequest, match="tree_sha256 does not match"):
        resolve(BlobStore(1 << 30), msg)
    msg = convert.skill_to_proto(SKILL)
    msg.files[0].content = b"tampered"
    with pytest.raises(InvalidRequest, match="does not match its sha256"):
        resolve(BlobStore(1 << 30), msg)
    msg = convert.skill_to_proto(SKILL)
    msg.tree_sha256 = ""
    with pytest.raises(InvalidRequest, match="needs its skill"):
        resolve(BlobStore(1 << 30), msg)
    # Without a cache (inline only), a package still resolves; a bare tree hash does not.
    assert convert.skill_from_proto(convert.skill_to_proto(SKILL)) == SKILL
    named = PackageNames(tree_sha256=SKILL.tree_sha256, skill_sha256="", file_sha256=(), tree_known=True)
    with pytest.raises(InvalidRequest, match="not accepted here"):
        convert.skill_from_proto(convert.skill_to_proto(SKILL, named))


def test_a_one_file_skill_travels_as_it_always_did():
    msg = convert.skill_to_proto(SkillVersion(content="# Rules\n"))
    assert (msg.content, msg.tree_sha256, len(msg.files)) == ("# Rules\n", "", 0)


def test_a_refusal_carries_every_file_and_rule_within_the_metadata_limit():
    problems = tuple(
        (f"references/{i:03d}-" + "x" * 300, "utf-8", "not UTF-8 text " * 40) for i in range(500)
    )
    exc = SkillPackageRefused("skill package 'demo' refused (500 problem(s)): ...", problems=problems)
    code, message, trailers = status_for(exc, host="h")
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert sum(len(v) for _, v in trailers) < 4096  # well inside gRPC's 8 KiB, base64 included
    err = error_for(code, message, detail_from_metadata(trailers))
    assert isinstance(err, SkillPackageRefused) and err.outcome is WorkOutcome.FINAL
    assert 5 <= len(err.problems) < 500 and err.problems[0][1] == "utf-8"
    assert err.problems[0][0].startswith("references/000-")


@pytest.mark.parametrize(
    ("skill", "path", "rule"),
    [
        # A NUL the standard's YAML parser cannot read: a named refusal, never INTERNAL.
        (
            SkillVersion(name="demo-pkg", content="---\nname: \x00\n---\n", files=SKILL.files),
            "SKILL.md",
            "front-matter",
        ),
        # A newline in a file name (it would forge a manifest line): refused at the door.
        (
            SkillVersion(
                name=SKILL.name, content=SKILL.content, files=(SkillFile(path="a\n.md", data=b"x"),)
            ),
            "a\n.md",
            "path",
        ),
    ],
    ids=["nul-in-front-matter", "newline-in-path"],
)
def test_the_host_refuses_what_the_parser_or_the_manifest_cannot_take(skill, path, rule):
    with pytest.raises(SkillPackageRefused) as err:
        check_skill_package(skill, PackageLimits())
    assert [(p, r) for p, r, _ in err.value.problems] == [(path, rule)]
