"""A skill package as the one text the trainer optimizes.

The trainer's machinery (hashes, caches, the run state, the gate, diffs, optimizer prompts)
works on one string per version. A package's *editable* files ride inside that string as
sections after SKILL.md, so every version of a package is still one string, a one-file skill's
text is exactly what it always was, and the optimizer reads the files it may edit::

    ---
    name: sheet-totals
    description: ...
    ---
    # Body of SKILL.md

    <!-- SKILL_FILE path="references/totals.md" -->
    Totals rows are ...
    <!-- SKILL_FILE_END -->

    <!-- SKILL_FILE path="scripts/helpers.py" executable -->
    def total(rows): ...
    <!-- SKILL_FILE_END -->

Editable = UTF-8 text up to :data:`EDITABLE_MAX_BYTES` that holds no marker line; the rest
(binary assets, large files) stays in the :class:`~skillopt.skill.package.PackageFrame` and
rides along unchanged. :func:`pack` splits a package into ``(frame, text)``;
``frame.spec(text)`` (:func:`unpack`) puts it back together, so ``frame.spec(text) == spec``
up to SKILL.md ending in exactly one newline when the package has sections.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from skillopt.skill.document import FILE_END, FILE_START_RE, PROTECTED_MARKERS, file_spans
from skillopt.skill.package import PackageFrame, as_package, split_package
from skillopt.types import SkillFile, SkillSpec

__all__ = [
    "EDITABLE_MAX_BYTES",
    "FileSection",
    "editable",
    "join_packed",
    "pack",
    "skill_md_of",
    "split_packed",
    "unpack",
]

#: Larger files are not put in the optimizer's text (they ride along unchanged).
EDITABLE_MAX_BYTES = 64 * 1024
_NO_EOL = "no-final-newline"
_EXECUTABLE = "executable"


@dataclass(frozen=True, slots=True)
class FileSection:
    """One editable file of a package's text."""

    path: str
    text: str
    executable: bool = False

    def render(self) -> str:
        flags = (f" {_EXECUTABLE}" if self.executable else "") + (
            f" {_NO_EOL}" if self.text and not self.text.endswith("\n") else ""
        )
        body = self.text if not self.text or self.text.endswith("\n") else self.text + "\n"
        return (
            f"<!-- SKILL_FILE path={json.dumps(self.path, ensure_ascii=False)}{flags} -->\n{body}{FILE_END}"
        )

    def as_file(self) -> SkillFile:
        return SkillFile(path=self.path, data=self.text.encode("utf-8"), executable=self.executable)


def editable(f: SkillFile) -> bool:
    """Whether ``f`` goes into the optimizer's text: small UTF-8 text without marker lines."""
    if len(f.data) > EDITABLE_MAX_BYTES:
        return False
    try:
        text = f.data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    # "\r": a section's line structure would not round-trip every byte; a marker would end it.
    return not ("\r" in text or any(m in text for m in PROTECTED_MARKERS) or "<!-- SKILL_FILE" in text)


def split_packed(text: str) -> tuple[str, dict[str, FileSection]]:
    """``(skill_md, sections by path)`` of a package's text. Without sections, ``skill_md``
    is ``text`` itself; with them, the text around them joined (ending in one newline). A
    path given twice keeps its last section."""
    spans = file_spans(text) if "<!-- SKILL_FILE" in text else []
    if not spans:
        return text, {}
    sections: dict[str, FileSection] = {}
    rest: list[str] = []
    pos = 0
    for a, b in spans:
        rest.append(text[pos:a])
        pos = b
        section = _read_section(text[a:b])
        if section is not None:
            sections[section.path] = section
    rest.append(text[pos:])
    skill_md = "\n\n".join(part.strip("\n") for part in rest if part.strip())
    return (skill_md + "\n" if skill_md else ""), sections


def _read_section(block: str) -> FileSection | None:
    head, _, body = block.partition("\n")
    match = FILE_START_RE.match(head)
    if match is None:
        return None
    try:
        path = json.loads(match.group(1))
    except ValueError:
        return None
    flags = match.group(2).split()
    if body.endswith(FILE_END):
        body = body[: -len(FILE_END)]
    elif not body.endswith("\n"):  # never closed: the rest is the file
        body += "\n"
    if _NO_EOL in flags and body.endswith("\n"):
        body = body[:-1]
    return FileSection(path=str(path), text=body, executable=_EXECUTABLE in flags)


def join_packed(skill_md: str, sections: Iterable[FileSection] | Mapping[str, FileSection]) -> str:
    """The package's text: SKILL.md, then the sections sorted by path."""
    items = list(sections.values()) if isinstance(sections, Mapping) else list(sections)
    if not items:
        return skill_md
    parts = [skill_md.strip("\n")] if skill_md.strip() else []
    parts += [s.render() for s in sorted(items, key=lambda s: s.path)]
    return "\n\n".join(parts) + "\n"


def pack(spec: SkillSpec) -> tuple[PackageFrame, str]:
    """Split a package into the frame (name, front matter, files the optimizer cannot edit)
    and the text the trainer optimizes (SKILL.md with its front matter, then the editable
    files). A one-file skill's text is its SKILL.md unchanged."""
    frame, _ = split_package(spec)
    fixed = tuple(f for f in spec.files if not editable(f))
    sections = [
        FileSection(path=f.path, text=f.data.decode("utf-8"), executable=f.executable)
        for f in spec.files
        if editable(f)
    ]
    return PackageFrame(name=frame.name, head=frame.head, files=fixed), join_packed(spec.content, sections)


def unpack(frame: PackageFrame, text: str) -> SkillSpec:
    """The package a text stands for in ``frame``: its SKILL.md (the frame's front matter
    put back when the text has none: a text from before packages, or a rewrite that dropped
    it), its sections as files, and the frame's fixed files. A one-file skill that gained
    files gets a front matter (a package needs one)."""
    skill_md, sections = split_packed(text)
    content = skill_md if skill_md.startswith("---") else frame.head + skill_md
    fixed = {f.path: f for f in frame.files}
    files = [*fixed.values(), *(s.as_file() for p, s in sections.items() if p not in fixed)]
    files.sort(key=lambda f: f.path)
    spec = SkillSpec(name=frame.name, content=content, files=tuple(files))
    return as_package(spec) if files and not content.startswith("---") else spec


def skill_md_of(text: str) -> str:
    """SKILL.md's part of a package's text (the whole text for a one-file skill)."""
    return split_packed(text)[0]
