"""What an agent is told about a package's files before it reads any (progressive disclosure)."""

from __future__ import annotations

from pathlib import PurePosixPath

from skillopt.skill.package._rules import ASSETS
from skillopt.types import SkillFile, SkillVersion
from skillopt.units import MiB

__all__ = ["file_index"]


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
