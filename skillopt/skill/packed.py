"""The packed text: a skill version as the optimizer model reads and writes it.

The trainer holds every version of a skill as a :class:`~skillopt.types.SkillVersion` (the
package, with its hashes). The optimizer model sees one text per version instead: SKILL.md,
then the package's *editable* files as sections, so it reads the files it may edit, and a
one-file skill's text is exactly its SKILL.md::

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
(binary assets, large files) stays in the run's :class:`PackageFrame` and rides along
unchanged. The frame, made once from the run's initial version (:meth:`PackageFrame.of`), is
the one codec between the two forms: :meth:`PackageFrame.text` is a version's text,
:meth:`PackageFrame.version` the version a text (the optimizer's answer, a stored text) stands
for. ``frame.version(frame.text(v)) == v`` for every version the frame made, and for the
initial one up to SKILL.md ending in exactly one newline when the package has sections.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from skillopt.skill.document import FILE_END, FILE_START_RE, PROTECTED_MARKERS, file_spans, split_front_matter
from skillopt.skill.package import DEFAULT_SKILL_NAME, as_package
from skillopt.types import SkillFile, SkillVersion

__all__ = [
    "EDITABLE_MAX_BYTES",
    "FileSection",
    "PackageFrame",
    "editable",
    "join_packed",
    "skill_md_of",
    "split_packed",
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


@dataclass(frozen=True, kw_only=True, slots=True)
class PackageFrame:
    """What a run's packed texts leave out: the package's name, its front matter block as
    written (``""`` for a one-file skill without one; put back into a text that has none) and
    the files the optimizer cannot edit. Made once per run from its initial version
    (:meth:`of`); the codec between a version and its text (:meth:`text`, :meth:`version`)."""

    name: str = DEFAULT_SKILL_NAME
    head: str = ""
    files: tuple[SkillFile, ...] = ()
    #: The initial version's editable files: a stored text from before the optimizer edited
    #: files (SKILL.md alone: the files rode in the frame then) gets them back (:meth:`stored`).
    sections: tuple[FileSection, ...] = ()

    @classmethod
    def of(cls, skill: SkillVersion) -> PackageFrame:
        """The frame of ``skill`` (a run's initial version): its name, front matter and the
        files the optimizer cannot edit (:func:`editable`)."""
        head, _ = split_front_matter(skill.content)
        text = {f.path for f in skill.files if editable(f)}
        return cls(
            name=skill.name,
            head=head,
            files=tuple(f for f in skill.files if f.path not in text),
            sections=tuple(_section(f) for f in skill.files if f.path in text),
        )

    def text(self, skill: SkillVersion) -> str:
        """The packed text of ``skill`` (a version of this frame's package): its SKILL.md, then
        every file the frame does not hold as a section. A one-file skill's text is its
        SKILL.md unchanged."""
        fixed = {f.path for f in self.files}
        return join_packed(skill.content, [_section(f) for f in skill.files if f.path not in fixed])

    def version(self, text: str) -> SkillVersion:
        """The version a packed text stands for: its SKILL.md (the frame's front matter put
        back when the text has none: a rewrite that dropped it), its sections as files, and the
        frame's fixed files. A one-file skill that gained files gets a front matter (a package
        needs one)."""
        skill_md, sections = split_packed(text)
        content = skill_md if skill_md.startswith("---") else self.head + skill_md
        fixed = {f.path: f for f in self.files}
        files = (*fixed.values(), *(s.as_file() for p, s in sections.items() if p not in fixed))
        skill = SkillVersion(name=self.name, content=content, files=files)
        return as_package(skill) if files and not content.startswith("---") else skill

    def stored(self, text: str) -> SkillVersion:
        """:meth:`version` of a text a run stored (its state, ``skills/skill_vNNNN.md``),
        also one stored before the optimizer edited files: SKILL.md's body alone, which gets
        the initial version's editable files back."""
        if self.sections and text and not text.startswith("---") and "<!-- SKILL_FILE" not in text:
            text = join_packed(text, self.sections)
        return self.version(text)


def _section(f: SkillFile) -> FileSection:
    return FileSection(path=f.path, text=f.data.decode("utf-8"), executable=f.executable)


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


def skill_md_of(text: str) -> str:
    """SKILL.md's part of a package's text (the whole text for a one-file skill)."""
    return split_packed(text)[0]
