"""Skill packages on the wire (part of :mod:`sandbox.api.convert`): a one-file skill as its
text or its hash, a package as its files (content-addressed) and its tree hash, a version the
host keeps as its name and tree hash alone."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from sandbox.api.blobs import BLOB_MIN_BYTES, EMPTY_SHA256, PackageNames, sha256_hex
from sandbox.api.v1 import sandbox_pb2 as pb
from skillopt.errors import InvalidRequest
from skillopt.skill.package import DEFAULT_SKILL_NAME
from skillopt.types import SkillFile, SkillVersion, skill_manifest

if TYPE_CHECKING:
    from sandbox.service.blobs import BlobResolver

__all__ = ["skill_from_proto", "skill_to_proto"]


def skill_from_proto(msg: pb.Skill, blobs: BlobResolver | None = None) -> SkillVersion:
    """The domain skill of ``msg``: a one-file skill, or a package (listed, or named by its tree
    hash); content-addressed parts are resolved through ``blobs`` (``None``: none accepted).

    Raises:
        InvalidRequest: a hash that does not match, a package without its tree hash.
    """
    if msg.files or msg.tree_sha256:
        return _package_from(msg, blobs)
    name = msg.name or DEFAULT_SKILL_NAME
    digest = msg.sha256.lower()
    named = bool(digest) and not msg.content and digest != EMPTY_SHA256
    if named or (digest and blobs is not None and len(msg.content) >= BLOB_MIN_BYTES):
        # A kept skill, or one to keep so that the next request can name it.
        if blobs is None:
            raise InvalidRequest("skill: content-addressed skills are not accepted here")
        try:
            return SkillVersion(name=name, content=blobs.skill(digest, msg.content))
        except InvalidRequest:
            raise InvalidRequest(
                "skill.sha256 does not match the skill content (corrupted or edited in transit)"
            ) from None
    skill = SkillVersion(name=name, content=msg.content)
    if digest and digest != skill.sha256:
        raise InvalidRequest("skill.sha256 does not match the skill content (corrupted or edited in transit)")
    return skill


def _package_from(msg: pb.Skill, blobs: BlobResolver | None) -> SkillVersion:
    """A skill package: named by its tree hash alone (a listing the host keeps), or listed in
    full (its files inline or named by hash), checked against its tree hash and kept."""
    name = msg.name or DEFAULT_SKILL_NAME
    tree = msg.tree_sha256.lower()
    if tree and not (msg.files or msg.content or msg.sha256):
        if blobs is None:
            raise InvalidRequest("skill: a package named by its tree hash is not accepted here")
        return blobs.package(tree, name)
    if not tree:
        raise InvalidRequest("skill: a package (skill.files) needs its skill.tree_sha256")
    content_sha = msg.sha256.lower() or sha256_hex(msg.content.encode("utf-8"))
    if blobs is None:
        if msg.sha256 and content_sha != sha256_hex(msg.content.encode("utf-8")):
            raise InvalidRequest(
                "skill.sha256 does not match the skill content (corrupted or edited in transit)"
            )
        content = msg.content
    else:
        content = blobs.skill(content_sha, msg.content)
    files: list[SkillFile] = []
    digests: list[tuple[str, str, bool]] = []
    for f in msg.files:
        what = f"skill file {f.path[:200]!r}"
        if blobs is None:
            if f.sha256 and f.sha256.lower() != sha256_hex(f.content):
                raise InvalidRequest(f"{what}: the content does not match its sha256 (corrupted in transit?)")
            data, sha = f.content, sha256_hex(f.content)
        elif f.sha256:
            data, sha = blobs.file(f.sha256, f.content, what), f.sha256.lower()
        else:
            data = f.content
            sha = sha256_hex(data)
            data = blobs.file(sha, data, what)
        files.append(SkillFile(path=f.path, data=data, executable=f.executable))
        digests.append((f.path, sha, f.executable))
    if blobs is not None and blobs.missing:
        return SkillVersion(name=name, content=content)  # blobs.check() refuses the request
    if hashlib.sha256(skill_manifest(content_sha, digests)).hexdigest() != tree:
        raise InvalidRequest(
            "skill.tree_sha256 does not match the package's files (corrupted or edited in transit)"
        )
    if blobs is not None:
        blobs.keep_package(tree, content_sha, digests)
    return SkillVersion(name=name, content=content, files=tuple(sorted(files, key=lambda f: f.path)))


def skill_to_proto(skill: SkillVersion, names: PackageNames | None = None) -> pb.Skill:
    """The proto of a skill package (a one-file skill: name and content). With ``names``
    (:meth:`sandbox.api.blobs.ClientBlobs.package`), a version the host keeps travels as its
    name and tree hash alone, and files the host keeps as their hashes; without, every file is
    inline (with its hash)."""
    if not skill.files and names is None:
        return pb.Skill(name=skill.name, content=skill.content)
    if names is None:
        names = PackageNames.inline(skill)
    if names.tree_known:
        return pb.Skill(name=skill.name, tree_sha256=names.tree_sha256)
    known = names.known
    return pb.Skill(
        name=skill.name,
        content="" if names.skill_sha256 in known else skill.content,
        sha256=names.skill_sha256,
        tree_sha256=names.tree_sha256,
        files=[
            pb.SkillFile(
                path=f.path, content=b"" if sha in known else f.data, sha256=sha, executable=f.executable
            )
            for f, sha in zip(skill.files, names.file_sha256, strict=True)
        ],
    )
