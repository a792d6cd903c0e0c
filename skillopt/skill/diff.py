"""What changed between two versions of a skill package, file by file.

SKILL.md is compared like any other file (it comes first). A file is text when it is UTF-8
without NUL bytes on both sides; text files get a unified diff, binary files only their
sizes. Shared by ``skillopt skill diff``, step records and the WebUI, which print or render
the same :class:`FileChange` list.

Usage::

    for change in package_diff(old_spec, new_spec):
        print(change.path, change.status, change.old_size, change.new_size)
        print(change.diff)
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from skillopt.types import SkillVersion

__all__ = ["FileChange", "FileStatus", "diff_summary", "package_diff"]

SKILL_MD = "SKILL.md"
FileStatus = Literal["added", "removed", "changed"]
_NO_EOL = "\\ No newline at end of file\n"


@dataclass(frozen=True, kw_only=True, slots=True)
class FileChange:
    """One file that differs between version ``a`` and version ``b`` of a package.

    Attributes:
        path: relative POSIX path in the package (``SKILL.md`` for the skill's text).
        status: ``added`` (only in b), ``removed`` (only in a) or ``changed`` (its bytes or its
            executable bit differ).
        old_size, new_size: bytes in a and in b (``None`` where the file is absent).
        old_executable, new_executable: the executable bit in a and in b (``None`` where absent).
        content_changed: the bytes differ (always true for an added or removed file).
        binary: either side is not UTF-8 text (or holds a NUL byte); then ``diff`` is empty.
        diff: a unified diff (``a/<path>`` to ``b/<path>``, ``/dev/null`` for an absent side)
            for text files whose content differs, ``""`` otherwise.
    """

    path: str
    status: FileStatus
    old_size: int | None
    new_size: int | None
    old_executable: bool | None
    new_executable: bool | None
    content_changed: bool
    binary: bool
    diff: str

    @property
    def mode_changed(self) -> bool:
        """Both sides exist and their executable bits differ."""
        return self.status == "changed" and self.old_executable != self.new_executable

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "status": self.status,
            "old_size": self.old_size,
            "new_size": self.new_size,
            "old_executable": self.old_executable,
            "new_executable": self.new_executable,
            "content_changed": self.content_changed,
            "binary": self.binary,
            "diff": self.diff,
        }

    def summary(self) -> dict[str, Any]:
        """What a step record keeps: the change without its diff, with line counts."""
        lines = self.diff.splitlines()
        return {
            "path": self.path,
            "status": self.status,
            "old_size": self.old_size,
            "new_size": self.new_size,
            "executable": self.new_executable if self.new_executable is not None else self.old_executable,
            "lines_added": sum(1 for ln in lines if ln.startswith("+") and not ln.startswith("+++")),
            "lines_removed": sum(1 for ln in lines if ln.startswith("-") and not ln.startswith("---")),
            "binary": self.binary,
        }


def _entries(spec: SkillVersion) -> dict[str, tuple[bytes, bool]]:
    out = {SKILL_MD: (spec.content.encode("utf-8", "surrogatepass"), False)}
    out.update({f.path: (f.data, f.executable) for f in spec.files})
    return out


def _text(data: bytes | None) -> str | None:
    """``data`` as text, ``""`` for an absent side, ``None`` when it is binary."""
    if data is None:
        return ""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if "\x00" in text else text


def _lines(text: str) -> list[str]:
    """Lines split at ``\\n`` only, each keeping its end; a last line without one gets git's
    marker, so a missing final newline shows as a change."""
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1] + "\n" + _NO_EOL)
    return lines


def _unified(path: str, a: str, b: str, *, a_exists: bool, b_exists: bool, context: int) -> str:
    out = difflib.unified_diff(
        _lines(a),
        _lines(b),
        fromfile=f"a/{path}" if a_exists else "/dev/null",
        tofile=f"b/{path}" if b_exists else "/dev/null",
        n=context,
    )
    # A line that had the end-of-file marker appended is two lines in one string: fine to join.
    return "".join(line if line.endswith("\n") else line + "\n" for line in out)


def _order(paths: Iterable[str]) -> list[str]:
    return sorted(paths, key=lambda p: (p != SKILL_MD, p))


def package_diff(a: SkillVersion, b: SkillVersion, *, context: int = 3) -> list[FileChange]:
    """The files that differ from ``a`` to ``b``, SKILL.md first then by path; unchanged
    files are left out (an empty list: same package, up to its name).

    Args:
        a, b: the old and the new version.
        context: lines of context around each hunk of a unified diff.
    """
    old, new = _entries(a), _entries(b)
    changes = []
    for path in _order(old.keys() | new.keys()):
        before, after = old.get(path), new.get(path)
        if before == after:
            continue
        a_data, b_data = (before[0] if before else None), (after[0] if after else None)
        a_text, b_text = _text(a_data), _text(b_data)
        binary = a_text is None or b_text is None
        diff = ""
        if not binary and a_data != b_data:
            assert a_text is not None and b_text is not None
            diff = _unified(
                path, a_text, b_text, a_exists=before is not None, b_exists=after is not None, context=context
            )
        changes.append(
            FileChange(
                path=path,
                status="added" if before is None else "removed" if after is None else "changed",
                old_size=len(before[0]) if before else None,
                new_size=len(after[0]) if after else None,
                old_executable=before[1] if before else None,
                new_executable=after[1] if after else None,
                content_changed=a_data != b_data,
                binary=binary,
                diff=diff,
            )
        )
    return changes


def diff_summary(changes: Iterable[FileChange]) -> str:
    """One line: ``2 changed, 1 added, 0 removed`` (``no changes`` for none)."""
    counts = {s: 0 for s in ("changed", "added", "removed")}
    for c in changes:
        counts[c.status] += 1
    if not any(counts.values()):
        return "no changes"
    return ", ".join(f"{n} {s}" for s, n in counts.items())
