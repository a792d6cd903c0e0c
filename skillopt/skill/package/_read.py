"""Reading a skill from disk: a package folder, or a lone SKILL.md file.

:func:`read_skill` returns what could be read and every problem found; :func:`load_skill`
raises the problems instead. Nothing inside a package is followed (a symlink is a problem),
and reading stops at the first limit passed, so a hostile folder costs little.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillopt.errors import SkillError
from skillopt.skill.package._rules import (
    DEFAULT_SKILL_NAME,
    SKILL_MD,
    PackageLimits,
    PackageProblem,
    SkillPackageError,
    front_matter,
    package_problems,
    printable_path,
    too_large,
)
from skillopt.types import SkillFile, SkillVersion

__all__ = ["load_skill", "read_skill"]

#: The limits a skill is read within when the caller names none.
_LIMITS = PackageLimits()


# ── disk ──────────────────────────────────────────────────────────────────────────────────


def load_skill(
    path: Path, *, limits: PackageLimits = _LIMITS, default_name: str = DEFAULT_SKILL_NAME
) -> SkillVersion:
    """The skill at ``path``: a package folder, or a single SKILL.md (Markdown) file.

    ``path`` itself may be a symlink (a harness's skills folder often links to a package
    elsewhere); inside a package nothing is followed: a symlink is a problem, never read. A
    folder's name is the name ``path`` gives it. Reading stops once a limit is passed: files
    past :attr:`PackageLimits.max_bytes` are counted from their size, never read, and the walk
    ends at the first entry past :attr:`PackageLimits.max_files`, so a hostile folder (10,000
    files, a 50 MiB asset, a link to /etc/passwd) costs little.

    Raises:
        SkillPackageError: every problem found, each naming its file and rule.
        SkillError: ``path`` does not exist or is not a file or folder.
    """
    spec, problems = read_skill(path, limits=limits, default_name=default_name)
    if problems:
        raise SkillPackageError(str(Path(os.path.abspath(path))), problems)
    return spec


def read_skill(
    path: Path, *, limits: PackageLimits = _LIMITS, default_name: str = DEFAULT_SKILL_NAME
) -> tuple[SkillVersion, list[PackageProblem]]:
    """:func:`load_skill` without raising on broken rules: what could be read of the skill
    (a part when a limit stopped the reading) and every problem found. For tools that show a
    broken package (``skillopt skill show``/``diff``); never run or install what this returns
    with problems.

    Raises:
        SkillError: ``path`` does not exist or is not a file or folder.
    """
    path = Path(os.path.abspath(path))
    try:
        st = path.stat()
    except OSError as exc:
        raise SkillError(f"{path}: cannot read the skill: {exc.strerror or exc}") from None
    if stat.S_ISREG(st.st_mode):
        return _read_lone_file(path, st.st_size, limits, default_name)
    if stat.S_ISDIR(st.st_mode):
        return _read_folder(path, limits)
    raise SkillError(f"{path}: a skill is a SKILL.md file or a package folder")


def _read_regular(path: Path, max_bytes: int, *, follow: bool = False) -> bytes:
    """At most ``max_bytes + 1`` bytes of the regular file ``path``, opened without following a
    final symlink (unless ``follow``) and without blocking on a FIFO swapped in after an lstat.

    Raises:
        OSError: cannot be opened or read, or (``EINVAL``) is not a regular file.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    with open(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        return fh.read(max_bytes + 1)


def _read_lone_file(
    path: Path, size: int, limits: PackageLimits, default_name: str
) -> tuple[SkillVersion, list[PackageProblem]]:
    if size > limits.max_bytes:
        return SkillVersion(name=default_name), [too_large(size, limits, (size, path.name))]
    try:
        data = _read_regular(path, limits.max_bytes, follow=True)
    except OSError as exc:
        raise SkillError(f"{path}: cannot read the skill: {exc.strerror or exc}") from None
    if len(data) > limits.max_bytes:  # grew since the stat
        return SkillVersion(name=default_name), [
            too_large(len(data), limits, (len(data), path.name), at_least=True)
        ]
    try:
        content = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return SkillVersion(name=default_name), [
            PackageProblem(path.name, "utf-8", f"not UTF-8 text (byte {exc.start})")
        ]
    try:
        fields, _ = front_matter(content)
    except SkillPackageError as exc:
        return SkillVersion(name=default_name, content=content), list(exc.problems)
    name = fields.get("name") if fields else None
    spec = SkillVersion(name=name if isinstance(name, str) else default_name, content=content)
    return spec, package_problems(spec, limits, folder=spec.name)


def _missing_skill_md_hint(root: Path) -> str:
    """Where the SKILL.md a folder lacks probably is: a lowercase ``skill.md``, or one folder
    deeper (a run's ``skill_packages/v0003/`` holds the package ``<name>/``)."""
    if (root / "skill.md").is_file():
        return " (there is a skill.md: the name is SKILL.md)"
    inner = [p for p in root.iterdir() if p.is_dir() and (p / SKILL_MD).is_file()] if root.is_dir() else []
    if len(inner) == 1:
        return f" (the package is one folder deeper: give {root / inner[0].name})"
    return ""


def _read_folder(root: Path, limits: PackageLimits) -> tuple[SkillVersion, list[PackageProblem]]:
    reading = _FolderReading(root, limits)
    reading.walk()
    return reading.result()


@dataclass
class _FolderReading:
    """What reading the package folder ``root`` has found so far: SKILL.md's text, the other
    files, the problems, and the bytes counted against the limit."""

    root: Path
    limits: PackageLimits
    problems: list[PackageProblem] = field(default_factory=list)
    files: list[SkillFile] = field(default_factory=list)
    content: str | None = None
    total: int = 0
    largest: tuple[int, str] = (0, "")
    stopped: bool = False  # the walk ended at a limit: what was not seen is not reported

    def walk(self) -> None:
        """Read every entry, in sorted order, until a limit on files or folders is passed."""
        entries = folders = 0
        for dirpath, dirnames, filenames in os.walk(self.root, onerror=self.unreadable):
            here = Path(dirpath)
            links = [d for d in dirnames if (here / d).is_symlink()]
            dirnames[:] = sorted(d for d in dirnames if d not in links)
            for entry in sorted(filenames + links):
                entries += 1
                if entries > self.limits.max_files:
                    self.stop(f"files allowed; stopped reading at {self.rel_of(here / entry)}")
                    return
                self.read_entry(here / entry)
            folders += len(dirnames)
            if folders > self.limits.max_files:
                self.stop("folders allowed")
                return

    def stop(self, what: str) -> None:
        self.problems.append(
            PackageProblem("", "too-many-files", f"more than the {self.limits.max_files} {what}")
        )
        self.stopped = True

    def rel_of(self, p: str | Path) -> str:
        return printable_path(Path(p).relative_to(self.root).as_posix())

    def unreadable(self, exc: OSError) -> None:
        where = self.rel_of(exc.filename) if exc.filename else ""
        self.problems.append(PackageProblem(where, "unreadable", f"cannot read: {exc.strerror or exc}"))

    def read_entry(self, p: Path) -> None:
        """Read one entry: a regular file is kept, anything else is a problem; a file past the
        byte limit is counted from its size, never read (the limit's problem comes at the end)."""
        rel = p.relative_to(self.root).as_posix()
        try:
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                target = printable_path(os.readlink(p))
                self.problems.append(
                    PackageProblem(printable_path(rel), "symlink", f"symlinks are not allowed (-> {target})")
                )
                return
            if not stat.S_ISREG(st.st_mode):
                self.problems.append(
                    PackageProblem(printable_path(rel), "special-file", "only regular files are allowed")
                )
                return
            self.total += st.st_size
            self.largest = max(self.largest, (st.st_size, rel))
            if self.total > self.limits.max_bytes:
                return
            data = _read_regular(p, st.st_size)
        except OSError as exc:
            self.unreadable(exc if exc.filename else OSError(exc.errno, exc.strerror, str(p)))
            return
        self.total += len(data) - st.st_size  # changed since the lstat
        if rel == SKILL_MD:
            try:
                self.content = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                self.problems.append(PackageProblem(SKILL_MD, "utf-8", f"not UTF-8 text (byte {exc.start})"))
                self.content = ""
        else:
            self.files.append(SkillFile(path=rel, data=data, executable=bool(st.st_mode & 0o111)))

    def result(self) -> tuple[SkillVersion, list[PackageProblem]]:
        """The skill read and every problem: those found reading, then the package's rules."""
        problems, limits, root = self.problems, self.limits, self.root
        if self.total > limits.max_bytes:
            problems.append(too_large(self.total, limits, self.largest, at_least=self.stopped))
        if self.content is None:
            if not self.stopped and self.total <= limits.max_bytes:
                hint = _missing_skill_md_hint(root)
                problems.append(
                    PackageProblem(SKILL_MD, "missing", f"a package folder needs a SKILL.md{hint}")
                )
            return SkillVersion(name=root.name, content="", files=tuple(self.files)), problems
        try:
            fields: dict[str, Any] | None = front_matter(self.content)[0]
        except SkillPackageError:
            fields = {}  # not YAML: package_problems says so, and checks the files all the same
        if fields is None:
            problems.append(
                PackageProblem(
                    SKILL_MD, "front-matter", "a package's SKILL.md starts with a front matter (---)"
                )
            )
        spec = SkillVersion(
            name=root.name, content=self.content, files=tuple(sorted(self.files, key=lambda f: f.path))
        )
        seen = {(p.path, p.rule) for p in problems}
        problems += [
            p for p in package_problems(spec, limits, folder=root.name) if (p.path, p.rule) not in seen
        ]
        return spec, problems
