"""A run's note, tags and archived flag: what a person writes about a run (from its WebUI page),
kept in the run directory (``notes.json``) so it travels with the run.

The trainer never reads or writes this file; the WebUI writes it atomically. Usage::

    notes = read_notes(run_dir)                       # RunNotes(note="", tags=(), archived=False)
    write_notes(run_dir, replace(notes, tags=("baseline",)))
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillopt.durable import atomic_write_json
from skillopt.errors import InvalidRequest

__all__ = ["NOTES_NAME", "RunNotes", "parse_tags", "read_notes", "write_notes"]

NOTES_NAME = "notes.json"
MAX_NOTE_CHARS = 10_000
MAX_TAGS = 20
_TAG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:+-]{0,39}$")


@dataclass(frozen=True)
class RunNotes:
    note: str = ""
    tags: tuple[str, ...] = ()
    archived: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"note": self.note, "tags": list(self.tags), "archived": self.archived}


def parse_tags(value: Any) -> tuple[str, ...]:
    """Tags from a list or a comma/space-separated string, checked and de-duplicated.

    Raises:
        InvalidRequest: a tag that is not 1-40 of ``[A-Za-z0-9_.:+-]`` (starting with a letter
            or digit), or more than 20 tags.
    """
    items = value if isinstance(value, list) else re.split(r"[,\s]+", str(value or ""))
    tags = tuple(dict.fromkeys(str(t).strip() for t in items if str(t).strip()))
    bad = [t for t in tags if not _TAG.match(t)]
    if bad:
        raise InvalidRequest(
            f"tag {bad[0][:60]!r}: a tag is 1-40 letters, digits or _.:+- and starts with a letter or digit"
        )
    if len(tags) > MAX_TAGS:
        raise InvalidRequest(f"{len(tags)} tags; at most {MAX_TAGS}")
    return tags


def read_notes(run_dir: Path) -> RunNotes:
    """The run's notes (defaults when the file is missing or unreadable)."""
    try:
        data = json.loads((run_dir / NOTES_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return RunNotes()
    if not isinstance(data, dict):
        return RunNotes()
    tags = data.get("tags")
    return RunNotes(
        note=str(data.get("note") or "")[:MAX_NOTE_CHARS],
        tags=tuple(str(t) for t in tags)[:MAX_TAGS] if isinstance(tags, list) else (),
        archived=bool(data.get("archived", False)),
    )


def write_notes(run_dir: Path, notes: RunNotes) -> None:
    """Replace the run's notes (atomically).

    Raises:
        InvalidRequest: a note over 10,000 characters.
    """
    if len(notes.note) > MAX_NOTE_CHARS:
        raise InvalidRequest(f"the note has {len(notes.note)} characters; at most {MAX_NOTE_CHARS}")
    atomic_write_json(run_dir / NOTES_NAME, notes.to_dict())
