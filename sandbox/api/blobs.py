"""Content addressing on the wire, both sides (see ``File`` in the proto).

A request's large files and its skill travel once per host: the client names what the host
already keeps by SHA-256 (:class:`ClientBlobs`), the host resolves the names from its cache
(:class:`sandbox.service.blobs.BlobStore`) and answers ``BLOBS_MISSING`` for the rest. The
result's trace, which repeats the skill in its prompts, carries it as a marker that the client
expands again (:func:`elide` / :func:`restore`, applied by ``convert``).

A skill package (SKILL.md plus files) is named as a whole by its tree hash: the first request
of a version lists its files (each by hash, with its content unless the host keeps it), every
later one sends the tree hash alone (:meth:`ClientBlobs.package`). A skill's hashes are the
:class:`~skillopt.types.SkillVersion`'s own, computed once inside it.

Usage (client)::

    blobs = ClientBlobs()
    msg = convert.request_to_proto(request)
    inlined = blobs.elide(msg)            # names what the host keeps, inlines the rest
    ... Run(msg) ...                      # BlobsMissing: blobs.forget(err.missing), elide again
    blobs.learn(inlined)                  # once the host accepted the request
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from sandbox.api.v1 import sandbox_pb2 as pb
from skillopt.types import SkillVersion

__all__ = [
    "BLOB_MIN_BYTES",
    "EMPTY_SHA256",
    "SKILL_MARKER",
    "ClientBlobs",
    "PackageNames",
    "can_elide",
    "elide",
    "restore",
    "sha256_hex",
]

#: Files (and skills) smaller than this always travel inline: naming them saves nothing.
BLOB_MIN_BYTES = 4096
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
#: What stands for the skill's text in an elided trace (private-use characters).
SKILL_MARKER = "\ue000skill\ue000"
_HASHES_KEPT = 4096
_HASHED_BYTES_KEPT = 256 * 1024 * 1024
_KNOWN_KEPT = 100_000
#: Packages whose parts a client remembers by tree hash (to forget them with their tree).
_PACKAGES_KEPT = 64


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, kw_only=True)
class PackageNames:
    """How one request names the parts of a skill package (:meth:`ClientBlobs.package`)."""

    tree_sha256: str
    #: SKILL.md's hash, and each file's (in the order of ``SkillVersion.files``).
    skill_sha256: str
    file_sha256: tuple[str, ...]
    #: The host keeps the whole version: send its name and tree hash alone.
    tree_known: bool = False
    #: Parts the host keeps: sent as their hash, without content.
    known: frozenset[str] = frozenset()
    #: The tree and the parts sent with content: what the host keeps once it accepted them.
    inlined: tuple[str, ...] = ()

    @classmethod
    def inline(cls, skill: SkillVersion) -> PackageNames:
        """Every part sent with its content (no cache consulted)."""
        return cls(
            tree_sha256=skill.tree_sha256,
            skill_sha256=skill.sha256,
            file_sha256=tuple(f.sha256 for f in skill.files),
        )


class ClientBlobs:
    """What one host is known to keep, as seen by one client (thread-safe).

    Hashes of a task's file contents are memoised by object identity (the loaders share one
    ``bytes`` object per file across items), so a corpus is hashed once per process, not per
    request; a skill's come with it (:class:`~skillopt.types.SkillVersion`).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: OrderedDict[str, None] = OrderedDict()
        self._hashes: OrderedDict[int, tuple[bytes, str]] = OrderedDict()
        self._hashed_bytes = 0
        #: Tree hash -> the hashes of its parts, for the packages sent lately.
        self._packages: OrderedDict[str, tuple[str, ...]] = OrderedDict()
        #: Bytes of content-addressed files, skills and skill packages sent inline, and named
        #: instead (by their own hash or their package's tree hash).
        self.inline_bytes = 0
        self.named_bytes = 0

    def _sha(self, data: bytes) -> str:
        key = id(data)
        with self._lock:
            hit = self._hashes.get(key)
            if hit is not None and hit[0] is data:
                self._hashes.move_to_end(key)
                return hit[1]
        digest = sha256_hex(data)
        with self._lock:
            old = self._hashes.pop(key, None)
            if old is not None:
                self._hashed_bytes -= len(old[0])
            self._hashes[key] = (data, digest)  # the reference keeps id(data) valid
            self._hashed_bytes += len(data)
            # Bounded by count and by bytes: the memo must not keep request files alive.
            while len(self._hashes) > _HASHES_KEPT or self._hashed_bytes > _HASHED_BYTES_KEPT:
                _, (gone, _digest) = self._hashes.popitem(last=False)
                self._hashed_bytes -= len(gone)
        return digest

    def _is_known(self, digest: str) -> bool:
        with self._lock:
            return digest in self._known

    def elide(self, msg: pb.RunRequest) -> list[str]:
        """Name the large files of ``msg`` by hash (in place); clear the content of those the
        host keeps. Returns the hashes sent inline (to :meth:`learn` once the host accepted
        them). The skill: :meth:`elide_skill`."""
        inlined: list[str] = []
        for case in (*msg.task.cases, *msg.grading.cases):
            for f in case.files:
                if len(f.content) < BLOB_MIN_BYTES and not f.sha256:
                    continue
                data = f.content
                digest = f.sha256 or self._sha(data)
                f.sha256 = digest
                if self._is_known(digest):
                    self._count(named=len(data))
                    f.content = b""
                elif data:
                    self._count(inline=len(data))
                    inlined.append(digest)
        return inlined

    def skill(self, skill: SkillVersion) -> tuple[str, bool]:
        """``(sha256, inline)`` of a one-file skill: its hash and whether to send its text (the
        host does not keep it yet). ``("", True)`` for a skill too small to name."""
        content = skill.content
        if len(content) < BLOB_MIN_BYTES:
            return "", True
        digest = skill.sha256
        known = self._is_known(digest)
        self._count(named=len(content)) if known else self._count(inline=len(content))
        return digest, not known

    def package(self, skill: SkillVersion) -> PackageNames:
        """How to name the parts of ``skill`` (a package) for this host: by the tree hash alone
        once the host keeps the version, else every part by hash, with the content of those the
        host does not keep. The hashes are the version's own (computed once inside it: its
        every rollout after the first costs a lookup, not a hash of its bytes)."""
        tree, skill_sha = skill.tree_sha256, skill.sha256
        shas = tuple(f.sha256 for f in skill.files)
        with self._lock:
            self._packages[tree] = (skill_sha, *shas)
            self._packages.move_to_end(tree)
            while len(self._packages) > _PACKAGES_KEPT:
                self._packages.popitem(last=False)
        sizes = [len(skill.content.encode("utf-8")), *(len(f.data) for f in skill.files)]
        if self._is_known(tree):
            self._count(named=sum(sizes))
            return PackageNames(tree_sha256=tree, skill_sha256=skill_sha, file_sha256=shas, tree_known=True)
        known = frozenset(d for d in (skill_sha, *shas) if self._is_known(d))
        inlined = [tree]
        for digest, size in zip((skill_sha, *shas), sizes, strict=True):
            if digest in known:
                self._count(named=size)
            else:
                self._count(inline=size)
                inlined.append(digest)
        return PackageNames(
            tree_sha256=tree, skill_sha256=skill_sha, file_sha256=shas, known=known, inlined=tuple(inlined)
        )

    def _count(self, *, inline: int = 0, named: int = 0) -> None:
        with self._lock:
            self.inline_bytes += inline
            self.named_bytes += named

    def learn(self, digests: Iterable[str]) -> None:
        """The host accepted these hashes' contents."""
        with self._lock:
            for d in digests:
                self._known[d] = None
                self._known.move_to_end(d)
            while len(self._known) > _KNOWN_KEPT:
                self._known.popitem(last=False)

    def forget(self, digests: Iterable[str]) -> None:
        """The host no longer keeps these (evicted, restarted). A package's tree hash among
        them: none of its parts either (the host names the tree alone when any part is gone)."""
        with self._lock:
            for d in digests:
                self._known.pop(d, None)
                for part in self._packages.get(d, ()):
                    self._known.pop(part, None)


def elide(value: str, skill: str) -> str:
    """``value`` with every occurrence of the skill's text (``skill`` without surrounding
    whitespace: prompts embed it stripped) replaced by :data:`SKILL_MARKER`. Searches for its
    first 64 characters and compares the rest in place: ``str.replace`` with a 200 KB needle
    costs ~0.4 ms per text, this a few microseconds."""
    skill = skill.strip()
    if len(value) < len(skill) or not skill:
        return value
    head = skill[:64]
    parts: list[str] = []
    start, i = 0, value.find(head)
    while i >= 0:
        if value.startswith(skill, i):
            parts += (value[start:i], SKILL_MARKER)
            start = i + len(skill)
            i = value.find(head, start)
        else:
            i = value.find(head, i + 1)
    if not parts:
        return value
    parts.append(value[start:])
    return "".join(parts)


def can_elide(texts: Iterable[str], skill: str) -> bool:
    """Whether a trace of ``texts`` may carry ``skill`` as a marker: the skill is large and the
    marker occurs in none of them already."""
    return len(skill) >= BLOB_MIN_BYTES and not any(SKILL_MARKER in t for t in texts)


def restore(value: str, skill: str) -> str:
    """Undo :func:`elide`."""
    return value.replace(SKILL_MARKER, skill.strip()) if SKILL_MARKER in value else value
