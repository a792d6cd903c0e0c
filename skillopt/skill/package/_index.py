"""What an agent is told about a package's files before it reads any (progressive disclosure)."""

from __future__ import annotations

from pathlib import PurePosixPath

from skillopt.skill.package._rules import ASSETS
from skillopt.types import SkillFile, SkillVersion
from skillopt.units import size_text

__all__ = ["file_index"]


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
        lines.append(
            f"- `{root}/{f.path}` ({size_text(len(f.data))}{flags})" + (f": {first}" if first else "")
        )
    return "\n".join(lines)
