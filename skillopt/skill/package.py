"""Agent Skills packages (agentskills.io): load one from disk, check it, write it, index it.

A package is a folder named after the skill holding ``SKILL.md`` (YAML front matter with
``name`` and ``description``, then the body) and optional files, by convention under
``scripts/`` (code the agent runs), ``references/`` (documents read on demand) and ``assets/``
(templates, data). In memory it is a :class:`skillopt.types.SkillVersion`: ``content`` is the
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

import errno
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
from skillopt.types import SkillFile, SkillVersion

__all__ = [
    "DEFAULT_SKILL_NAME",
    "SKILL_MD",
    "PackageLimits",
    "PackageProblem",
    "SkillPackageError",
    "as_package",
    "check_package",
    "file_index",
    "front_matter",
    "load_skill",
    "package_problems",
    "read_skill",
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
        self.where = where
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
        # strictyaml's messages span lines (a caret under the column): one line per problem.
        message = " ".join(str(exc).split())
        raise SkillPackageError(SKILL_MD, [PackageProblem(SKILL_MD, "front-matter", message)]) from None
    except Exception as exc:  # strictyaml fails on its own error for some bytes (see below)
        # A character YAML refuses (NUL, other control characters, a lone surrogate) makes
        # strictyaml's ReaderError raise AttributeError while building its message.
        bad = next((i for i, c in enumerate(content) if _not_yaml(c)), None)
        where = (
            f"character {content[bad]!r} at offset {bad} is not allowed in YAML" if bad is not None else ""
        )
        message = f"Invalid YAML in frontmatter: {where or f'the parser failed ({type(exc).__name__})'}"
        raise SkillPackageError(SKILL_MD, [PackageProblem(SKILL_MD, "front-matter", message)]) from None
    return dict(fields), body


def _not_yaml(c: str) -> bool:
    """A character a YAML stream may not hold (YAML 1.2 §5.1, c-printable)."""
    o = ord(c)
    return not (
        c in "\t\n\r"
        or 0x20 <= o <= 0x7E
        or o == 0x85
        or 0xA0 <= o <= 0xD7FF
        or 0xE000 <= o <= 0xFFFD
        or o >= 0x10000
    )


#: Plain scalars other YAML parsers (the harnesses') read as booleans or null.
_YAML_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "y", "n", "null"})


def _yaml_string(text: str) -> str:
    """``text`` as a YAML scalar every parser reads back as that string: plain when it is a
    skill name starting with a letter and not a YAML word (``yes``, ``null``, ...), else
    double-quoted (JSON escapes are YAML escapes; ``123`` would be a number elsewhere)."""
    if _NAME_RE.fullmatch(text) and text[0].isalpha() and text not in _YAML_WORDS:
        return text
    return json.dumps(text, ensure_ascii=False)  # ASCII escapes would split astral characters


def _synthesized_front_matter(name: str, body: str) -> str:
    heading = next((ln.lstrip("#").strip() for ln in body.splitlines() if ln.strip()), "")
    # The standard's parser cuts the front matter at the first "---" anywhere, even inside a
    # quoted value, and YAML refuses control characters: keep printable text only.
    heading = re.sub(r"-{3,}", "-", "".join(c if c.isprintable() else " " for c in heading))
    description = " ".join(heading.split())[:200] or "A skill trained by skillopt."
    return f"---\nname: {_yaml_string(name)}\ndescription: {_yaml_string(description)}\n---\n\n"


def as_package(spec: SkillVersion) -> SkillVersion:
    """``spec`` with a front matter: a one-file skill without one gets ``name`` (its name)
    and ``description`` (its first line); any other skill is returned as it is."""
    if spec.content.startswith("---"):
        return spec
    return SkillVersion(
        name=spec.name,
        content=_synthesized_front_matter(spec.name, spec.content) + spec.content,
        files=spec.files,
    )


# ── the rules ─────────────────────────────────────────────────────────────────────────────


def _path_problems(path: str) -> list[PackageProblem]:
    def bad(rule: str, message: str) -> list[PackageProblem]:
        return [PackageProblem(_printable(path), rule, message)]

    if not path or "\x00" in path or "\\" in path:
        return bad("path", "a file path must be non-empty POSIX, without NUL or backslash")
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return bad("path", "file names must be UTF-8")
    if any(ord(c) < 0x20 or c == "\x7f" for c in path):
        # A newline would also forge a line of the manifest the tree hash is taken over.
        return bad("path", "control characters (newline, tab, ...) are not allowed in file names")
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


def _printable(path: str) -> str:
    """``path`` safe to print: a file name that is not UTF-8 (surrogate escapes from the file
    system) shows U+FFFD where its bad bytes are."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


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


#: The standard's messages (skills-ref's wording) by the rule they enforce.
_STANDARD_RULES = (
    ("Unexpected fields", "fields"),
    ("Missing required field in frontmatter: name", "name"),
    ("Field 'name'", "name"),
    ("Skill name", "name"),
    ("Directory name", "name-folder"),
    ("Missing required field in frontmatter: description", "description"),
    ("Field 'description'", "description"),
    ("Description", "description"),
    ("Field 'compatibility'", "compatibility"),
    ("Compatibility", "compatibility"),
)


def _standard_rule(message: str) -> str:
    """The rule id of one of the standard's messages (``standard`` for wording not known)."""
    return next((rule for prefix, rule in _STANDARD_RULES if message.startswith(prefix)), "standard")


def _layout_problems(files: Iterable[SkillFile]) -> list[PackageProblem]:
    """The paths' rules: each one safe and relative, none twice, none under another's file."""
    problems: list[PackageProblem] = []
    seen: set[str] = set()
    for f in files:
        problems += _path_problems(f.path)
        if f.path in seen:
            problems.append(PackageProblem(_printable(f.path), "duplicate", "listed twice"))
        seen.add(f.path)
    # A path that is a file and also a folder of another file cannot be written to disk.
    taken = seen | {SKILL_MD}
    for path in sorted(seen):
        parts = path.split("/")
        clash = next((d for d in ("/".join(parts[:i]) for i in range(1, len(parts))) if d in taken), None)
        if clash is not None:
            problems.append(
                PackageProblem(
                    _printable(path), "path-conflict", f"{clash!r} is a file, so it cannot be a folder"
                )
            )
    return problems


def package_problems(
    spec: SkillVersion, limits: PackageLimits = PackageLimits(), *, folder: str | None = None
) -> list[PackageProblem]:
    """Every rule ``spec`` breaks (empty: a valid package). ``folder`` is the folder name it
    was read from or is written to (default: ``spec.name``).

    Rule ids: the standard's ``front-matter`` (missing or not YAML), ``fields`` (a field the
    standard does not define), ``name``, ``description``, ``compatibility``; ours
    ``name-folder``, ``path``, ``absolute-path``, ``parent-path``, ``path-conflict``,
    ``duplicate``, ``utf-8``, ``too-many-files``, ``too-large`` (and, when reading a folder,
    ``symlink``, ``special-file``, ``missing``, ``unreadable``)."""
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
        standard = [(_standard_rule(m), m) for m in validate_metadata(fields)]
        problems += [PackageProblem(SKILL_MD, rule, m) for rule, m in standard]
        name = fields.get("name")
        if isinstance(name, str) and name.strip():
            # Ours on top of the standard's: ASCII only, and equal to the folder it lives in.
            named_by_standard = any(rule == "name" for rule, _ in standard)
            problems += [
                p for p in _name_problems(name, folder) if p.rule == "name-folder" or not named_by_standard
            ]
    try:
        total = len(spec.content.encode("utf-8"))
    except UnicodeEncodeError as exc:
        total = len(spec.content.encode("utf-8", "surrogatepass"))
        problems.append(PackageProblem(SKILL_MD, "utf-8", f"not UTF-8 text (character {exc.start})"))
    problems += _layout_problems(spec.files)
    for f in spec.files:
        total += len(f.data)
        if PurePosixPath(f.path).parts[:1] != (ASSETS,):
            try:
                f.data.decode("utf-8")
            except UnicodeDecodeError as exc:
                problems.append(
                    PackageProblem(
                        _printable(f.path),
                        "utf-8",
                        f"not UTF-8 text (byte {exc.start}); binary files belong in assets/",
                    )
                )
    if 1 + len(spec.files) > limits.max_files:
        problems.append(
            PackageProblem(
                "", "too-many-files", f"{1 + len(spec.files)} files, more than the {limits.max_files} allowed"
            )
        )
    if total > limits.max_bytes:
        sizes = [(len(f.data), f.path) for f in spec.files]
        problems.append(
            _too_large(total, limits, max([(total - sum(n for n, _ in sizes), SKILL_MD), *sizes]))
        )
    return problems


def check_package(
    spec: SkillVersion, limits: PackageLimits = PackageLimits(), *, where: str = "skill"
) -> SkillVersion:
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
    path: Path, *, limits: PackageLimits = PackageLimits(), default_name: str = DEFAULT_SKILL_NAME
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


def _too_large(
    total: int, limits: PackageLimits, largest: tuple[int, str], *, at_least: bool = False
) -> PackageProblem:
    """The byte limit's problem, about the largest file (the one to move out or shrink)."""
    size, path = largest
    held = f"{'at least ' if at_least else ''}{total} bytes"
    return PackageProblem(
        _printable(path),
        "too-large",
        f"the package holds {held}, more than the {limits.max_bytes} allowed; this file alone is {size} bytes",
    )


def _read_lone_file(
    path: Path, size: int, limits: PackageLimits, default_name: str
) -> tuple[SkillVersion, list[PackageProblem]]:
    if size > limits.max_bytes:
        return SkillVersion(name=default_name), [_too_large(size, limits, (size, path.name))]
    try:
        data = _read_regular(path, limits.max_bytes, follow=True)
    except OSError as exc:
        raise SkillError(f"{path}: cannot read the skill: {exc.strerror or exc}") from None
    if len(data) > limits.max_bytes:  # grew since the stat
        return SkillVersion(name=default_name), [
            _too_large(len(data), limits, (len(data), path.name), at_least=True)
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
    problems: list[PackageProblem] = []
    files: list[SkillFile] = []
    content: str | None = None
    count = total = entries = folders = 0
    largest = (0, "")
    stopped = False  # the walk ended at a limit: what was not seen is not reported

    def rel_of(p: str | Path) -> str:
        return _printable(Path(p).relative_to(root).as_posix())

    def unreadable(exc: OSError) -> None:
        where = rel_of(exc.filename) if exc.filename else ""
        problems.append(PackageProblem(where, "unreadable", f"cannot read: {exc.strerror or exc}"))

    for dirpath, dirnames, filenames in os.walk(root, onerror=unreadable):
        here = Path(dirpath)
        links = [d for d in dirnames if (here / d).is_symlink()]
        dirnames[:] = sorted(d for d in dirnames if d not in links)
        for entry in sorted(filenames + links):
            p = here / entry
            entries += 1
            if entries > limits.max_files:
                stopped = True
                break
            rel = p.relative_to(root).as_posix()
            try:
                st = p.lstat()
                if stat.S_ISLNK(st.st_mode):
                    target = _printable(os.readlink(p))
                    problems.append(
                        PackageProblem(_printable(rel), "symlink", f"symlinks are not allowed (-> {target})")
                    )
                    continue
                if not stat.S_ISREG(st.st_mode):
                    problems.append(
                        PackageProblem(_printable(rel), "special-file", "only regular files are allowed")
                    )
                    continue
                count += 1
                total += st.st_size
                largest = max(largest, (st.st_size, rel))
                if total > limits.max_bytes:
                    continue  # counted from its size, never read: the limit problem is reported below
                data = _read_regular(p, st.st_size)
            except OSError as exc:
                unreadable(exc if exc.filename else OSError(exc.errno, exc.strerror, str(p)))
                continue
            total += len(data) - st.st_size  # changed since the lstat
            if rel == SKILL_MD:
                try:
                    content = data.decode("utf-8")
                except UnicodeDecodeError as exc:
                    problems.append(PackageProblem(SKILL_MD, "utf-8", f"not UTF-8 text (byte {exc.start})"))
                    content = ""
            else:
                files.append(SkillFile(path=rel, data=data, executable=bool(st.st_mode & 0o111)))
        folders += len(dirnames)
        if stopped or folders > limits.max_files:
            what = f"files allowed; stopped reading at {rel_of(p)}" if stopped else "folders allowed"
            problems.append(PackageProblem("", "too-many-files", f"more than the {limits.max_files} {what}"))
            stopped = True
            break
    if total > limits.max_bytes:
        problems.append(_too_large(total, limits, largest, at_least=stopped))
    if content is None:
        if not stopped and total <= limits.max_bytes:
            hint = _missing_skill_md_hint(root)
            problems.append(PackageProblem(SKILL_MD, "missing", f"a package folder needs a SKILL.md{hint}"))
        return SkillVersion(name=root.name, content="", files=tuple(files)), problems
    try:
        fields: dict[str, Any] | None = front_matter(content)[0]
    except SkillPackageError:
        fields = {}  # not YAML: package_problems says so, and checks the files all the same
    if fields is None:
        problems.append(
            PackageProblem(SKILL_MD, "front-matter", "a package's SKILL.md starts with a front matter (---)")
        )
    spec = SkillVersion(name=root.name, content=content, files=tuple(sorted(files, key=lambda f: f.path)))
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
    problems = _name_problems(spec.name, "") + _layout_problems(spec.files)
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


def file_index(spec: SkillVersion, *, root: str = "/skill") -> str:
    """The package's other files as Markdown lines (path, size, first line), never their
    contents: what the harnesses show up front (progressive disclosure). ``""`` for a one-file
    skill."""
    lines = []
    for f in spec.files:
        flags = ", executable" if f.executable else ""
        first = _first_line(f)
        lines.append(f"- `{root}/{f.path}` ({_size(len(f.data))}{flags})" + (f": {first}" if first else ""))
    return "\n".join(lines)


def manifest_fields(spec: SkillVersion) -> Mapping[str, Any]:
    """Front-matter fields of ``spec`` (``{}`` for a one-file skill without one)."""
    fields, _ = front_matter(spec.content)
    return fields or {}
