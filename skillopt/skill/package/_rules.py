"""What a valid skill package is: its limits, its front matter, and every rule it must keep.

:func:`package_problems` lists every rule a :class:`~skillopt.types.SkillVersion` breaks, each
as a :class:`PackageProblem` naming the file and the rule; :func:`check_package` raises them
together as one :class:`SkillPackageError`. :func:`front_matter` reads the YAML block that
opens SKILL.md, and :func:`as_package` gives a one-file skill the front matter a package needs.
The rules themselves are listed in :mod:`skillopt.skill.package`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from skills_ref.errors import ParseError
from skills_ref.parser import parse_frontmatter
from skills_ref.validator import validate_metadata

from skillopt.errors import SkillError
from skillopt.types import SkillFile, SkillVersion
from skillopt.units import MiB

__all__ = [
    "ASSETS",
    "DEFAULT_SKILL_NAME",
    "SKILL_MD",
    "PackageLimits",
    "PackageProblem",
    "SkillPackageError",
    "as_package",
    "check_package",
    "front_matter",
    "layout_problems",
    "name_problems",
    "package_problems",
    "printable_path",
    "too_large",
]

SKILL_MD = "SKILL.md"
DEFAULT_SKILL_NAME = "skillopt-target"
#: Files under this folder may be binary; every other file must be UTF-8 text.
ASSETS = "assets"
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
        return [PackageProblem(printable_path(path), rule, message)]

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


def printable_path(path: str) -> str:
    """``path`` safe to print: a file name that is not UTF-8 (surrogate escapes from the file
    system) shows U+FFFD where its bad bytes are."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def name_problems(name: str, folder: str) -> list[PackageProblem]:
    """The name's rules: 1-64 lowercase ASCII letters, digits and single hyphens, and equal to
    the ``folder`` it lives in (when one is given)."""
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


def layout_problems(files: Iterable[SkillFile]) -> list[PackageProblem]:
    """The paths' rules: each one safe and relative, none twice, none under another's file."""
    problems: list[PackageProblem] = []
    seen: set[str] = set()
    for f in files:
        problems += _path_problems(f.path)
        if f.path in seen:
            problems.append(PackageProblem(printable_path(f.path), "duplicate", "listed twice"))
        seen.add(f.path)
    # A path that is a file and also a folder of another file cannot be written to disk.
    taken = seen | {SKILL_MD}
    for path in sorted(seen):
        parts = path.split("/")
        clash = next((d for d in ("/".join(parts[:i]) for i in range(1, len(parts))) if d in taken), None)
        if clash is not None:
            problems.append(
                PackageProblem(
                    printable_path(path), "path-conflict", f"{clash!r} is a file, so it cannot be a folder"
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
        problems += name_problems(spec.name, folder)
    else:
        standard = [(_standard_rule(m), m) for m in validate_metadata(fields)]
        problems += [PackageProblem(SKILL_MD, rule, m) for rule, m in standard]
        name = fields.get("name")
        if isinstance(name, str) and name.strip():
            # Ours on top of the standard's: ASCII only, and equal to the folder it lives in.
            named_by_standard = any(rule == "name" for rule, _ in standard)
            problems += [
                p for p in name_problems(name, folder) if p.rule == "name-folder" or not named_by_standard
            ]
    try:
        total = len(spec.content.encode("utf-8"))
    except UnicodeEncodeError as exc:
        total = len(spec.content.encode("utf-8", "surrogatepass"))
        problems.append(PackageProblem(SKILL_MD, "utf-8", f"not UTF-8 text (character {exc.start})"))
    problems += layout_problems(spec.files)
    for f in spec.files:
        total += len(f.data)
        if PurePosixPath(f.path).parts[:1] != (ASSETS,):
            try:
                f.data.decode("utf-8")
            except UnicodeDecodeError as exc:
                problems.append(
                    PackageProblem(
                        printable_path(f.path),
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
        problems.append(too_large(total, limits, max([(total - sum(n for n, _ in sizes), SKILL_MD), *sizes])))
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


def too_large(
    total: int, limits: PackageLimits, largest: tuple[int, str], *, at_least: bool = False
) -> PackageProblem:
    """The byte limit's problem, about the largest file (the one to move out or shrink)."""
    size, path = largest
    held = f"{'at least ' if at_least else ''}{total} bytes"
    return PackageProblem(
        printable_path(path),
        "too-large",
        f"the package holds {held}, more than the {limits.max_bytes} allowed; this file alone is {size} bytes",
    )
