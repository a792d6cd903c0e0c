"""A skill package placed in a sandbox's host directories, for its read-only mounts.

A runtime whose sandboxes see host directories through bind mounts (Docker) keeps two per
sandbox, both mounted read-only when the sandbox is created: the *package* folder (mounted at
``/skill``: ``SKILL.md``, ``scripts/…``) and the *skills* folder (mounted where agent CLIs
discover skills, e.g. ``<workspace>/.claude/skills``), which shows the package as ``<name>/``.
Mounts are fixed at creation, before the warm pool knows which skill a sandbox will get; the
package's files are written here when the sandbox is leased, and the skills folder's copy is
made of hard links to them, so a package costs its bytes once per sandbox whatever the number
of places it appears.

Modes: files 0644, executables 0755, folders 0755. The sandbox's user reads and runs the
package; the read-only mounts keep it from changing anything in it (not even a mode).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from skillopt.errors import InvalidRequest
from skillopt.files import check_relative_name
from skillopt.skill.package import DEFAULT_SKILL_NAME, SKILL_MD
from skillopt.types import SkillSpec

__all__ = ["place_skill"]


def _entries(skill: SkillSpec) -> list[tuple[str, bytes, bool]]:
    """``(relative path, bytes, executable)`` per file, SKILL.md first; paths checked (the
    service refused bad packages already: this is the runtime's own guard)."""
    entries = [(SKILL_MD, skill.content.encode("utf-8"), False)]
    seen = {SKILL_MD}
    for f in skill.files:
        path = check_relative_name(f.path, what="skill file path")
        if path in seen:
            raise InvalidRequest(f"skill file path {f.path[:200]!r} is listed twice")
        seen.add(path)
        entries.append((path, f.data, f.executable))
    return entries


def _clear(folder: Path) -> None:
    """Empty ``folder`` but keep it: it is a bind mount's source (a new folder would not be)."""
    for child in folder.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def _mkdirs(root: Path, rel: str, made: set[Path]) -> None:
    parent = root
    for part in Path(rel).parts[:-1]:
        parent = parent / part
        if parent not in made:
            parent.mkdir(exist_ok=True)
            parent.chmod(0o755)
            made.add(parent)


def place_skill(skill: SkillSpec, package_dir: Path, skills_dir: Path | None) -> None:
    """Write ``skill`` into ``package_dir`` (replacing what was there) and, when
    ``skills_dir`` is given, show it there as ``<name>/`` through hard links.

    Raises:
        InvalidRequest: a file path or the name is not a safe relative path.
        OSError: the host's disk refused (the caller maps it to an infrastructure error).
    """
    entries = _entries(skill)
    name = check_relative_name(skill.name or DEFAULT_SKILL_NAME, what="skill name")
    if "/" in name or name.startswith("."):
        raise InvalidRequest(f"skill name must be a single folder name, got {name[:100]!r}")
    _clear(package_dir)
    made: set[Path] = set()
    for path, data, executable in entries:
        _mkdirs(package_dir, path, made)
        # O_EXCL: never through something already there; fchmod: whatever the umask.
        fd = os.open(package_dir / path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            os.fchmod(fd, 0o755 if executable else 0o644)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
    if skills_dir is None:
        return
    _clear(skills_dir)
    home = skills_dir / name
    home.mkdir()
    home.chmod(0o755)
    for path, _data, _executable in entries:
        _mkdirs(home, path, made)
        os.link(package_dir / path, home / path)
