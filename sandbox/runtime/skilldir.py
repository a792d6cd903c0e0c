"""A skill package placed in a sandbox's host directories, for its read-only mounts.

A runtime whose sandboxes see host directories through bind mounts (Docker) keeps two per
sandbox, both mounted read-only when the sandbox is created: the *package* folder (mounted at
``/skill``: ``SKILL.md``, ``scripts/…``) and the *skills* folder (mounted where agent CLIs
discover skills, e.g. ``<workspace>/.claude/skills``), which shows the package as ``<name>/``.
Mounts are fixed at creation, before the warm pool knows which skill a sandbox will get; the
package's files are placed when the sandbox is leased.

Placing costs links, not bytes: a version named by its caller (:class:`PlacedPackages`) is
written once into the host's package store and hard-linked into each sandbox's folders after
that (a 50-file, 2 MiB package: ~4 ms written, well under 1 ms linked); the skills folder's
copy is always links to the package folder's files. Sharing inodes between sandboxes is safe:
every mount of them is read-only, so no sandbox can change a file, its mode or its links.

Modes: files 0644, executables 0755, folders 0755. The sandbox's user reads and runs the
package; the read-only mounts keep it from changing anything in it.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
import uuid
from collections import OrderedDict
from pathlib import Path

import structlog

from skillopt.errors import InvalidRequest
from skillopt.files import check_relative_name
from skillopt.skill.package import DEFAULT_SKILL_NAME, SKILL_MD
from skillopt.types import SkillVersion
from skillopt.units import MiB

__all__ = ["PlacedPackages", "clear_placed", "place_skill"]

log = structlog.get_logger("skillopt.sandbox.runtime")

_VERSION = re.compile(r"[A-Za-z0-9._-]{1,128}")

#: ``(relative path, bytes, executable)``, SKILL.md first.
Entry = tuple[str, bytes, bool]


def _entries(skill: SkillVersion) -> list[Entry]:
    """The package's files; paths checked (the service refused bad packages already: this is
    the runtime's own guard)."""
    entries = [(SKILL_MD, skill.content.encode("utf-8"), False)]
    seen = {SKILL_MD}
    for f in skill.files:
        path = check_relative_name(f.path, what="skill file path")
        if path in seen:
            raise InvalidRequest(f"skill file path {f.path[:200]!r} is listed twice")
        seen.add(path)
        entries.append((path, f.data, f.executable))
    return entries


def _folder_name(skill: SkillVersion) -> str:
    name = check_relative_name(skill.name or DEFAULT_SKILL_NAME, what="skill name")
    if "/" in name or name.startswith("."):
        raise InvalidRequest(f"skill name must be a single folder name, got {name[:100]!r}")
    return name


def _clear(folder: Path) -> None:
    """Empty ``folder`` but keep it: it is a bind mount's source (a new folder would not be)."""
    for child in folder.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def clear_placed(package_dir: Path, skills_dir: Path | None) -> None:
    """Empty a sandbox's skill folders (its reset: the next execution sees no package until
    its own is placed)."""
    _clear(package_dir)
    if skills_dir is not None and skills_dir.exists():
        _clear(skills_dir)


def _mkdirs(root: Path, rel: str, made: set[Path]) -> None:
    parent = root
    for part in Path(rel).parts[:-1]:
        parent = parent / part
        if parent not in made:
            parent.mkdir(exist_ok=True)
            parent.chmod(0o755)
            made.add(parent)


def _write(target: Path, data: bytes, executable: bool) -> None:
    # O_EXCL: never through something already there; fchmod: whatever the umask.
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o755 if executable else 0o644)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def _link(source: Path, target: Path, data: bytes, executable: bool) -> None:
    """``target`` as a hard link of ``source``, or a copy where the filesystem refuses links
    (another device, a link count at its maximum)."""
    try:
        os.link(source, target)
    except OSError:
        _write(target, data, executable)


def _fill(folder: Path, entries: list[Entry], source: Path | None) -> None:
    made: set[Path] = set()
    for path, data, executable in entries:
        _mkdirs(folder, path, made)
        if source is None:
            _write(folder / path, data, executable)
        else:
            _link(source / path, folder / path, data, executable)


def place_skill(
    skill: SkillVersion, package_dir: Path, skills_dir: Path | None, *, source: Path | None = None
) -> None:
    """Place ``skill`` in ``package_dir`` (replacing what was there) and, when ``skills_dir``
    is given, show it there as ``<name>/``. ``source``: a folder holding exactly these files
    (:class:`PlacedPackages`), linked instead of written.

    Raises:
        InvalidRequest: a file path or the name is not a safe relative path.
        OSError: the host's disk refused (the caller maps it to an infrastructure error).
    """
    entries = _entries(skill)
    name = _folder_name(skill)
    _clear(package_dir)
    _fill(package_dir, entries, source)
    if skills_dir is None:
        return
    _clear(skills_dir)
    home = skills_dir / name
    home.mkdir()
    home.chmod(0o755)
    _fill(home, entries, package_dir)


class PlacedPackages:
    """The host's package store: versions placed before, one folder each, so that placing one
    again is a hard link per file (thread-safe; one per runtime, emptied when it starts).
    Bounded: beyond ``max_versions`` or ``max_bytes`` the least recently placed versions go (a
    sandbox that linked their files keeps them: links outlive the store's folder)."""

    def __init__(self, root: Path, *, max_versions: int = 32, max_bytes: int = 512 * MiB) -> None:
        self.root = root
        self.max_versions, self.max_bytes = max_versions, max_bytes
        shutil.rmtree(root, ignore_errors=True)  # a predecessor's: never trusted, never needed
        root.mkdir(parents=True)
        root.chmod(0o755)
        self._lock = threading.Lock()
        # version -> (its folders, its files: both relative, parents first; its bytes)
        self._versions: OrderedDict[str, tuple[tuple[str, ...], tuple[str, ...], int]] = OrderedDict()
        self.bytes = 0
        #: Placements written from bytes (a version's first) and linked from the store.
        self.written = 0
        self.linked = 0

    def place(self, skill: SkillVersion, version: str, package_dir: Path, skills_dir: Path | None) -> None:
        """:func:`place_skill`, linking from the store's copy of ``version`` (written there
        first when it is new). ``version`` must name exactly these files and modes (the
        caller's tree hash with SKILL.md's as placed); one that is not a plain name is placed
        from the bytes.

        Raises:
            InvalidRequest, OSError: as :func:`place_skill`.
        """
        if not _VERSION.fullmatch(version):
            place_skill(skill, package_dir, skills_dir)
            return
        name = _folder_name(skill)
        with self._lock:  # an eviction never removes a version while it is being linked
            source = str(self.root / version)
            kept = self._versions.get(version)
            if kept is None:
                kept = self._write(skill, version)
            else:
                self._versions.move_to_end(version)
                self.linked += 1
            dirs, files, _ = kept
            # Paths were checked when the version was written: plain string joins from here
            # (a 50-file package is ~50 link calls, not ~50 path objects and checks each).
            _clear(package_dir)
            _link_tree(source, str(package_dir), dirs, files)
            if skills_dir is not None:
                _clear(skills_dir)
                home = skills_dir / name
                home.mkdir()
                home.chmod(0o755)
                _link_tree(source, str(home), dirs, files)

    def _write(self, skill: SkillVersion, version: str) -> tuple[tuple[str, ...], tuple[str, ...], int]:
        entries = _entries(skill)
        tmp = self.root / f".{uuid.uuid4().hex}"
        tmp.mkdir()
        try:
            _fill(tmp, entries, None)
            tmp.chmod(0o755)
            tmp.rename(self.root / version)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        dirs = sorted(
            {str(parent) for path, _, _ in entries for parent in Path(path).parents if str(parent) != "."}
        )
        size = sum(len(data) for _, data, _ in entries)
        kept = (tuple(dirs), tuple(path for path, _, _ in entries), size)
        self._versions[version] = kept
        self.bytes += size
        self.written += 1
        while len(self._versions) > self.max_versions or (
            self.bytes > self.max_bytes and len(self._versions) > 1
        ):
            old, (_, _, old_size) = self._versions.popitem(last=False)
            self.bytes -= old_size
            shutil.rmtree(self.root / old, ignore_errors=True)
            log.debug("packages.evicted", version=old, bytes=old_size)
        return kept


def _link_tree(source: str, target: str, dirs: tuple[str, ...], files: tuple[str, ...]) -> None:
    """Recreate ``source``'s ``dirs`` (parents first) in ``target`` and hard-link its ``files``
    there (copied where the filesystem refuses links)."""
    for d in dirs:
        os.mkdir(f"{target}/{d}")
        os.chmod(f"{target}/{d}", 0o755)
    for f in files:
        try:
            os.link(f"{source}/{f}", f"{target}/{f}")
        except OSError:
            shutil.copy2(f"{source}/{f}", f"{target}/{f}")
