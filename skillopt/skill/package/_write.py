"""Writing a skill as a package folder, all at once: a reader never sees half a package."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

from skillopt.skill.package._rules import (
    SKILL_MD,
    SkillPackageError,
    as_package,
    layout_problems,
    name_problems,
)
from skillopt.types import SkillFile, SkillVersion

__all__ = ["write_package"]


def _same_file(path: Path, f: SkillFile) -> bool:
    try:
        st = path.lstat()
        return (
            stat.S_ISREG(st.st_mode)
            and st.st_size == len(f.data)
            and bool(st.st_mode & 0o111) == f.executable
            and path.read_bytes() == f.data
        )
    except OSError:
        return False


def write_package(spec: SkillVersion, parent: Path, *, link_from: Path | None = None) -> Path:
    """Write ``spec`` as ``parent/<name>/`` (a one-file skill gets its front matter, see
    :func:`as_package`), replacing what was there; returns the folder. Written into a
    temporary sibling first, so a reader never sees half a package. A file equal to the one
    at the same path under ``link_from`` (an earlier version) is hard-linked, not copied:
    a run's versions share the bytes they have in common."""
    spec = as_package(spec)
    # Raises SkillPackageError, writing nothing, if a path or the name would land outside
    # parent/<name>/; the other rules are the caller's (check_package).
    _check_writable(spec)
    parent.mkdir(parents=True, exist_ok=True)
    dest = parent / spec.name
    tmp = Path(tempfile.mkdtemp(prefix=f".{spec.name}.", dir=parent))
    try:
        (tmp / SKILL_MD).write_text(spec.content, encoding="utf-8")
        (tmp / SKILL_MD).chmod(0o644)
        for f in spec.files:
            target = tmp / f.path
            target.parent.mkdir(parents=True, exist_ok=True)
            if link_from is not None and _same_file(link_from / f.path, f):
                os.link(link_from / f.path, target)
                continue
            target.write_bytes(f.data)
            target.chmod(0o755 if f.executable else 0o644)
        tmp.chmod(0o755)
        _replace(dest, tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def _check_writable(spec: SkillVersion) -> None:
    """The rules whose breach would write outside ``parent/<name>/`` or fail half-way."""
    problems = name_problems(spec.name, "") + layout_problems(spec.files)
    if problems:
        raise SkillPackageError(f"cannot write skill {spec.name!r}", problems)


def _replace(dest: Path, new: Path) -> None:
    """Put folder ``new`` at ``dest``: the old folder is moved aside first, so ``dest`` is
    missing for the time of one rename, never half written; a symlink at ``dest`` is replaced,
    its target left alone."""
    if not dest.is_symlink() and not dest.exists():
        new.rename(dest)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old.", dir=dest.parent))
    aside = old / dest.name
    dest.rename(aside)
    try:
        new.rename(dest)
    except BaseException:
        aside.rename(dest)
        raise
    finally:
        shutil.rmtree(old, ignore_errors=True)  # removes a symlink, never what it points to
