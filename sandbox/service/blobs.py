"""The host's cache of content-addressed request files (see ``File`` in the proto).

Kept in memory, per tenant (a token's files are never served to another token), bounded by
bytes with least-recently-used eviction; a file larger than the whole budget is used for its
request and not kept. :meth:`BlobStore.resolver` gives request conversion the one function it
needs: content + hash → checked and kept; hash alone → the kept bytes (the same object every
time, so a corpus costs its size once, whatever the number of requests in flight).

Skill packages: the files of a package are kept like any other, and its listing (SKILL.md's
hash, then path, hash and executable bit per file) by its tree hash, so that a later request
names the whole version by that hash alone (:meth:`BlobResolver.package`). A listing that is
gone, or whose files were evicted, resolves as missing: the tree hash alone is reported, and the
client sends the package in full again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import structlog

from sandbox.api.blobs import EMPTY_SHA256, sha256_hex
from skillopt.errors import BlobsMissing, InvalidRequest
from skillopt.types import SkillFile, SkillVersion

__all__ = ["BlobResolver", "BlobStore"]

log = structlog.get_logger(__name__)

#: Package listings kept (all tenants together; a listing is a few KiB at most).
_PACKAGES_KEPT = 4096
#: One package's listing: SKILL.md's hash, then ``(path, sha256, executable)`` per file.
Listing = tuple[str, tuple[tuple[str, str, bool], ...]]


class BlobStore:
    """Content-addressed files per tenant, LRU within ``capacity_bytes`` (0 = keep nothing)."""

    def __init__(self, capacity_bytes: int) -> None:
        self.capacity_bytes = max(0, int(capacity_bytes))
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[str, str], bytes] = OrderedDict()
        # Decoded skills, so that every request naming a skill gets the same str object.
        self._texts: OrderedDict[tuple[str, str], str] = OrderedDict()
        # Skill package listings by (tenant, tree hash).
        self._packages: OrderedDict[tuple[str, str], Listing] = OrderedDict()
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self.stored = 0
        self.evicted = 0

    def get(self, tenant: str, digest: str) -> bytes | None:
        with self._lock:
            data = self._items.get((tenant, digest))
            if data is not None:
                self._items.move_to_end((tenant, digest))
                self.hits += 1
            else:
                self.misses += 1
            return data

    def put(self, tenant: str, digest: str, data: bytes) -> bytes:
        """Keep ``data`` (already checked against ``digest``); returns the kept object."""
        if len(data) > self.capacity_bytes:
            return data
        key = (tenant, digest)
        with self._lock:
            kept = self._items.get(key)
            if kept is not None:
                self._items.move_to_end(key)
                return kept
            self._items[key] = data
            self.bytes += len(data)
            self.stored += 1
            while self.bytes > self.capacity_bytes:
                _, old = self._items.popitem(last=False)
                self.bytes -= len(old)
                self.evicted += 1
        return data

    def text(self, tenant: str, digest: str, data: bytes) -> str:
        """``data`` (a kept skill) decoded, the same object for every request naming it."""
        key = (tenant, digest)
        with self._lock:
            kept = self._texts.get(key)
            if kept is not None:
                self._texts.move_to_end(key)
                return kept
        text = data.decode("utf-8")
        with self._lock:
            self._texts[key] = text
            while len(self._texts) > 64:
                self._texts.popitem(last=False)
        return text

    def listing(self, tenant: str, tree: str) -> Listing | None:
        """The kept listing of the package named ``tree`` (``None``: not kept)."""
        with self._lock:
            listing = self._packages.get((tenant, tree))
            if listing is not None:
                self._packages.move_to_end((tenant, tree))
                self.hits += 1
            else:
                self.misses += 1
            return listing

    def keep_listing(self, tenant: str, tree: str, listing: Listing) -> None:
        """Keep a package's listing (its files already checked against ``tree``)."""
        with self._lock:
            self._packages[(tenant, tree)] = listing
            self._packages.move_to_end((tenant, tree))
            while len(self._packages) > _PACKAGES_KEPT:
                self._packages.popitem(last=False)

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "entries": len(self._items),
                "bytes": self.bytes,
                "capacity_bytes": self.capacity_bytes,
                "hits": self.hits,
                "misses": self.misses,
                "stored": self.stored,
                "evicted": self.evicted,
                "packages": len(self._packages),
            }

    def resolver(self, tenant: str) -> BlobResolver:
        return BlobResolver(self, tenant)


class BlobResolver:
    """Resolves one request's content-addressed files for one tenant; collects the misses so
    that one refusal lists them all (:meth:`check`)."""

    def __init__(self, store: BlobStore, tenant: str) -> None:
        self.store = store
        self.tenant = tenant
        self.missing: list[str] = []

    def file(self, digest: str, content: bytes, what: str) -> bytes:
        """The content of a file sent with ``sha256 = digest`` (``""``: not addressed).

        Raises:
            InvalidRequest: the content does not match its hash, or the hash is malformed.
        """
        if not digest:
            return content
        digest = digest.lower()
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise InvalidRequest(f"{what}: sha256 must be 64 hex digits, got {digest[:70]!r}")
        if content or digest == EMPTY_SHA256:
            if sha256_hex(content) != digest:
                raise InvalidRequest(f"{what}: the content does not match its sha256 (corrupted in transit?)")
            return self.store.put(self.tenant, digest, content)
        kept = self.store.get(self.tenant, digest)
        if kept is None:
            self.missing.append(digest)
            return b""
        return kept

    def skill(self, digest: str, content: str) -> str:
        """The text of a skill sent with ``sha256 = digest`` (``content`` empty: a kept one).

        Raises:
            InvalidRequest: the content does not match its hash.
        """
        digest = digest.lower()
        data = self.file(digest, content.encode("utf-8"), "skill")
        if not data:
            return ""
        return self.store.text(self.tenant, digest, data)

    def package(self, tree: str, name: str) -> SkillVersion:
        """The package named by its tree hash alone (a listing kept from an earlier request).
        A listing or file not kept is a miss (:meth:`check` lists the tree hash with it, so the
        client sends the package in full)."""
        if len(tree) != 64 or any(c not in "0123456789abcdef" for c in tree):
            raise InvalidRequest(f"skill.tree_sha256 must be 64 hex digits, got {tree[:70]!r}")
        listing = self.store.listing(self.tenant, tree)
        if listing is None:
            self.missing.append(tree)
            return SkillVersion(name=name)
        skill_sha, entries = listing
        text = self._kept(skill_sha)
        kept = [self._kept(sha) for _, sha, _ in entries]
        if text is None or any(data is None for data in kept):
            # Parts evicted: name the tree alone (a few bytes of trailing metadata however many
            # files are gone); the client forgets every part of it and lists the package anew.
            self.missing.append(tree)
            return SkillVersion(name=name)
        files = tuple(
            SkillFile(path=path, data=data, executable=executable)
            for (path, _, executable), data in zip(entries, kept, strict=True)
            if data is not None
        )
        content = self.store.text(self.tenant, skill_sha, text) if text else ""
        return SkillVersion(name=name, content=content, files=files)

    def _kept(self, digest: str) -> bytes | None:
        return b"" if digest == EMPTY_SHA256 else self.store.get(self.tenant, digest)

    def keep_package(self, tree: str, skill_sha256: str, entries: list[tuple[str, str, bool]]) -> None:
        """Keep the listing of a package whose files hash to ``tree`` (checked by the caller)."""
        self.store.keep_listing(self.tenant, tree, (skill_sha256, tuple(sorted(entries))))

    def check(self) -> None:
        """Raises :class:`BlobsMissing` (listing every miss) when any file was not kept."""
        if self.missing:
            missing = tuple(dict.fromkeys(self.missing))
            log.info("blobs.missing", tenant=self.tenant, count=len(missing))
            raise BlobsMissing(
                f"{len(missing)} content-addressed file(s) are not kept on this host; send them again "
                "with their content",
                missing=missing,
            )
