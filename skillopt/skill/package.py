"""Agent Skills packages (agentskills.io): load one from disk, check it, write it, index it.

A package is a folder named after the skill holding ``SKILL.md`` (YAML front matter with
``name`` and ``description``, then the body) and optional files, by convention under
``scripts/`` (code the agent runs), ``references/`` (documents read on demand) and ``assets/``
(templates, data). In memory it is a :class:`skillopt.types.SkillSpec`: ``content`` is the
text of SKILL.md, ``files`` the rest. A lone SKILL.md without front matter is the one-file
case every skill was before packages; it gets a front matter when written as a package.

Two sets of rules apply (:func:`package_problems`): the standard's, through its reference
implementation (PyPI ``skills-ref``: front-matter parser, allowed fields, name and description
rules), and ours, which keep a package safe to move and mount: relative paths without ``..``,
no symlinks or special files, at most :class:`PackageLimits` files and bytes, text in UTF-8
outside ``assets/``, and an ASCII name (the standard also allows Unicode letters).

Usage::

    spec = load_skill(Path("my-skill"))            # a folder, or a single SKILL.md
    write_package(spec, run_dir / "skills" / "v0001")   # -> run_dir/skills/v0001/my-skill/
    print(file_index(spec))                         # what an agent is told is there
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from skills_ref.errors import ParseError
from skills_ref.parser import parse_frontmatter
from skills_ref.validator import validate_metadata

from skillopt.errors import SkillError
from skillopt.types import SkillFile, SkillSpec

__all__ = [
    "DEFAULT_SKILL_NAME",
    "SKILL_MD",
    "PackageFrame",
    "PackageLimits",
    "PackageProblem",
    "SkillPackageError",
    "as_package",
    "check_package",
    "file_index",
    "front_matter",
    "load_skill",
    "package_problems",
    "split_package",
    "write_package",
]

SKILL_MD = "SKILL.md"
DEFAULT_SKILL_NAME = "skillopt-target"
#: Files under this folder may be binary; every other file must be UTF-8 text.
ASSETS = "assets"
MiB = 1024 * 1024
_NAME_RE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_MAX_NAME = 64
_MAX_PATH = 255


@dataclass(frozen=True, kw_only=True, slots=True)
class PackageLimits:
    """How large a package may be (SKILL.md counts as one of the files)."""

    max_files: int = 200
    max_bytes: int = 8 * MiB


@dataclass(frozen=True, slots=True)
class PackageProblem:
    """One broken rule: the file it is about (``""``: the package), a short rule id, and a
    message a user can act on."""

    path: str
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.path or 'package'}: {self.message} [{self.rule}]"


class SkillPackageError(SkillError):
    """A skill package breaks a rule; ``problems`` lists every one found."""

    def __init__(self, where: str, problems: Iterable[PackageProblem]) -> None:
        self.problems = tuple(problems)
        listed = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{where}: not a valid skill package ({len(self.problems)} problem(s)):\n{listed}")


# ── front matter ──────────────────────────────────────────────────────────────────────────


def front_matter(content: str) -> tuple[dict[str, Any] | None, str]:
    """``(fields, body)`` of a SKILL.md text; ``(None, content)`` when it has no front matter.

    Raises:
        SkillPackageError: the text starts a front matter (``---``) that is not valid YAML.
    """
    if not content.startswith("---"):
        return None, content
    try:
        fields, body = parse_frontmatter(content)
    except ParseError as exc:
        raise SkillPackageError(SKILL_MD, [PackageProblem(SKILL_MD, "front-matter", str(exc))]) from None
    return dict(fields), body


def _synthesized_front_matter(name: str, body: str) -> str:
    heading = next((ln.lstrip("#").strip() for ln in body.splitlines() if ln.strip()), "")
    description = (heading or "A skill trained by skillopt.")[:200]
    # Double-quoted scalars: strictyaml (the standard's parser) and YAML read JSON strings.
    return f"---\nname: {name}\ndescription: {json.dumps(description)}\n---\n\n"


def as_package(spec: SkillSpec) -> SkillSpec:
    """``spec`` with a front matter: a one-file skill without one gets ``name`` (its name)
    and ``description`` (its first line); any other skill is returned as it is."""
    if spec.content.startswith("---"):
        return spec
    return SkillSpec(
        name=spec.name,
        content=_synthesized_front_matter(spec.name, spec.content) + spec.content,
        files=spec.files,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class PackageFrame:
    """A package without its SKILL.md body: the name, the front matter block as written
    (``""`` for a one-file skill without one) and the other files. The trainer edits the
    body; :meth:`spec` puts a body back into the frame."""

    name: str = DEFAULT_SKILL_NAME
    head: str = ""
    files: tuple[SkillFile, ...] = ()

    def spec(self, body: str) -> SkillSpec:
        """The package with SKILL.md = the head, then ``body``."""
        return SkillSpec(name=self.name, content=self.head + body, files=self.files)


def split_package(spec: SkillSpec) -> tuple[PackageFrame, str]:
    """``(frame, body)`` of ``spec``, with ``frame.spec(body) == spec``: the head is the front
    matter block verbatim with the blank lines after it, the body the rest."""
    head = ""
    if spec.content.startswith("---"):
        match = re.match(r"---[^\n]*\n.*?^---[ \t]*(?:\n[ \t]*)*(?:\n|\Z)", spec.content, re.S | re.M)
        if match:
            head = match.group(0)
    return PackageFrame(name=spec.name, head=head, files=spec.files), spec.content[len(head) :]


# ── the rules ─────────────────────────────────────────────────────────────────────────────


def _path_problems(path: str) -> list[PackageProblem]:
    def bad(rule: str, message: str) -> list[PackageProblem]:
        return [PackageProblem(path, rule, message)]

    if not path or "\x00" in path or "\\" in path:
        return bad("path", "a file path must be non-empty POSIX, without NUL or backslash")
    if path.startswith("/"):
        return bad("absolute-path", "absolute paths are not allowed; paths are relative to the package")
    parts = path.split("/")
    if ".." in parts:
        return bad("parent-path", "'..' is not allowed in a package path")
    if any(p in ("", ".") for p in parts):
        return bad("path", "empty or '.' path components are not allowed")
    if len(path) > _MAX_PATH:
        return bad("path", f"path longer than {_MAX_PATH} characters")
    if path == SKILL_MD:
        return bad("path", "SKILL.md is the package's text, not one of its files")
    return []


def _name_problems(name: str, folder: str) -> list[PackageProblem]:
    if not 1 <= len(name) <= _MAX_NAME or not _NAME_RE.fullmatch(name):
        return [
            PackageProblem(
                SKILL_MD,
                "name",
                f"name {name!r} must be 1-{_MAX_NAME} lowercase ASCII letters, digits and single hyphens, "
                "not starting or ending with a hyphen",
            )
        ]
    if folder and folder != name:
        return [PackageProblem(SKILL_MD, "name-folder", f"name {name!r} differs from its folder {folder!r}")]
    return []


def package_problems(
    spec: SkillSpec, limits: PackageLimits = PackageLimits(), *, folder: str | None = None
) -> list[PackageProblem]:
    """Every rule ``spec`` breaks (empty: a valid package). ``folder`` is the folder name it
    was read from or is written to (default: ``spec.name``)."""
    problems: list[PackageProblem] = []
    try:
        fields, _ = front_matter(spec.content)
    except SkillPackageError as exc:
        problems += exc.problems
        fields = None
    folder = spec.name if folder is None else folder
    if fields is None:
        if spec.files and not problems:
            problems.append(
                PackageProblem(
                    SKILL_MD, "front-matter", "a package with files needs a front matter (name, description)"
                )
            )
        problems += _name_problems(spec.name, folder)
    else:
        standard = validate_metadata(fields)
        problems += [PackageProblem(SKILL_MD, "standard", m) for m in standard]
        name = fields.get("name")
        if isinstance(name, str) and name.strip():
            # Ours on top of the standard's: ASCII only, and equal to the folder it lives in.
            ours = _name_problems(name, folder)
            named_by_standard = any("name" in m.lower() for m in standard)
            problems += [p for p in ours if p.rule == "name-folder" or not named_by_standard]
    seen: set[str] = set()
    total = len(spec.content.encode("utf-8"))
    for f in spec.files:
        problems += _path_problems(f.path)
        if f.path in seen:
            problems.append(PackageProblem(f.path, "duplicate", "listed twice"))
        seen.add(f.path)
        total += len(f.data)
        if PurePosixPath(f.path).parts[:1] != (ASSETS,):
            try:
                f.data.decode("utf-8")
            except UnicodeDecodeError as exc:
                problems.append(
                    PackageProblem(
                        f.path, "utf-8", f"not UTF-8 text (byte {exc.start}); binary files belong in assets/"
                    )
                )
    if 1 + len(spec.files) > limits.max_files:
        problems.append(
            PackageProblem(
                "", "too-many-files", f"{1 + len(spec.files)} files, more than the {limits.max_files} allowed"
            )
        )
    if total > limits.max_bytes:
        problems.append(
            PackageProblem("", "too-large", f"{total} bytes, more than the {limits.max_bytes} allowed")
        )
    return problems


def check_package(
    spec: SkillSpec, limits: PackageLimits = PackageLimits(), *, where: str = "skill"
) -> SkillSpec:
    """``spec`` if it breaks no rule.

    Raises:
        SkillPackageError: every problem, each naming its file and rule.
    """
    problems = package_problems(spec, limits)
    if problems:
        raise SkillPackageError(where, problems)
    return spec


# ── disk ──────────────────────────────────────────────────────────────────────────────────


def load_skill(
    path: Path, *, limits: PackageLimits = PackageLimits(), default_name: str = DEFAULT_SKILL_NAME
) -> SkillSpec:
    """The skill at ``path``: a package folder, or a single SKILL.md (Markdown) file.

    A folder is read without following symlinks and stops reading once a limit is passed, so
    a hostile folder (10,000 files, a 50 MiB asset, a link to /etc/passwd) costs little.

    Raises:
        SkillPackageError: every problem found, each naming its file and rule.
        SkillError: ``path`` does not exist or is not a file or folder.
    """
    path = Path(path)
    try:
        st = path.lstat()
    except OSError as exc:
        raise SkillError(f"{path}: cannot read the skill: {exc.strerror or exc}") from None
    if stat.S_ISREG(st.st_mode):
        try:
            content = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SkillPackageError(
                str(path), [PackageProblem(path.name, "utf-8", f"not UTF-8 text (byte {exc.start})")]
            ) from None
        try:
            fields, _ = front_matter(content)
        except SkillPackageError as exc:
            raise SkillPackageError(str(path), exc.problems) from None
        name = fields.get("name") if fields else None
        spec = SkillSpec(name=name if isinstance(name, str) else default_name, content=content)
        problems = package_problems(spec, limits, folder=spec.name)
    elif stat.S_ISDIR(st.st_mode):
        spec, problems = _read_folder(path, limits)
    else:
        raise SkillError(f"{path}: a skill is a SKILL.md file or a package folder")
    if problems:
        raise SkillPackageError(str(path), problems)
    return spec


def _read_folder(root: Path, limits: PackageLimits) -> tuple[SkillSpec, list[PackageProblem]]:
    problems: list[PackageProblem] = []
    files: list[SkillFile] = []
    content: str | None = None
    count = total = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        here = Path(dirpath)
        for entry in sorted(filenames) + [d for d in dirnames if (here / d).is_symlink()]:
            p = here / entry
            rel = p.relative_to(root).as_posix()
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                problems.append(
                    PackageProblem(rel, "symlink", f"symlinks are not allowed (-> {os.readlink(p)})")
                )
                continue
            if not stat.S_ISREG(st.st_mode):
                problems.append(PackageProblem(rel, "special-file", "only regular files are allowed"))
                continue
            count += 1
            total += st.st_size
            if count > limits.max_files or total > limits.max_bytes:
                continue  # counted, not read: the limit problem is reported below
            data = p.read_bytes()
            if rel == SKILL_MD:
                try:
                    content = data.decode("utf-8")
                except UnicodeDecodeError as exc:
                    problems.append(PackageProblem(SKILL_MD, "utf-8", f"not UTF-8 text (byte {exc.start})"))
                    content = ""
            else:
                files.append(SkillFile(path=rel, data=data, executable=bool(st.st_mode & 0o111)))
        dirnames[:] = [d for d in dirnames if not (here / d).is_symlink()]
    if count > limits.max_files:
        problems.append(
            PackageProblem("", "too-many-files", f"{count} files, more than the {limits.max_files} allowed")
        )
    if total > limits.max_bytes:
        problems.append(
            PackageProblem("", "too-large", f"{total} bytes, more than the {limits.max_bytes} allowed")
        )
    if content is None:
        if count <= limits.max_files and total <= limits.max_bytes:
            problems.append(PackageProblem(SKILL_MD, "missing", "a package folder needs a SKILL.md"))
        return SkillSpec(name=root.name, content="", files=tuple(files)), problems
    try:
        fields, _ = front_matter(content)
    except SkillPackageError as exc:
        return SkillSpec(name=root.name, content=content, files=tuple(files)), problems + list(exc.problems)
    if fields is None:
        problems.append(
            PackageProblem(SKILL_MD, "front-matter", "a package's SKILL.md starts with a front matter (---)")
        )
    spec = SkillSpec(name=root.name, content=content, files=tuple(sorted(files, key=lambda f: f.path)))
    seen = {(p.path, p.rule) for p in problems}
    problems += [p for p in package_problems(spec, limits, folder=root.name) if (p.path, p.rule) not in seen]
    return spec, problems


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


def write_package(spec: SkillSpec, parent: Path, *, link_from: Path | None = None) -> Path:
    """Write ``spec`` as ``parent/<name>/`` (a one-file skill gets its front matter, see
    :func:`as_package`), replacing what was there; returns the folder. Written into a
    temporary sibling first, so a reader never sees half a package. A file equal to the one
    at the same path under ``link_from`` (an earlier version) is hard-linked, not copied:
    a run's versions share the bytes they have in common."""
    spec = as_package(spec)
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
        if dest.exists():
            shutil.rmtree(dest)
        tmp.rename(dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


# ── what an agent is told ─────────────────────────────────────────────────────────────────


def _size(n: int) -> str:
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KiB" if n < MiB else f"{n / MiB:.1f} MiB"


def _first_line(f: SkillFile) -> str:
    if PurePosixPath(f.path).parts[:1] == (ASSETS,):
        return ""
    try:
        text = f.data[:4096].decode("utf-8", "strict")
    except UnicodeDecodeError:
        return ""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#!")), "")
    return line[:120]


def file_index(spec: SkillSpec, *, root: str = "/skill") -> str:
    """The package's other files as Markdown lines (path, size, first line), never their
    contents: what the harnesses show up front (progressive disclosure). ``""`` for a one-file
    skill."""
    lines = []
    for f in spec.files:
        flags = ", executable" if f.executable else ""
        first = _first_line(f)
        lines.append(f"- `{root}/{f.path}` ({_size(len(f.data))}{flags})" + (f": {first}" if first else ""))
    return "\n".join(lines)


def manifest_fields(spec: SkillSpec) -> Mapping[str, Any]:
    """Front-matter fields of ``spec`` (``{}`` for a one-file skill without one)."""
    fields, _ = front_matter(spec.content)
    return fields or {}
