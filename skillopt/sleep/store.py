"""The harvest folder: one JSON record per session and the index of them.

::

    <out>/                          (default .skillopt/sleep/harvest/)
      index.json                    HarvestIndex: one entry per (source, session id)
      sessions/claude-code/<id>.json
      sessions/codex/<id>.json

Every file is written whole or not at all (:mod:`skillopt.durable`: a temp file, fsync,
rename): a crash leaves the old record or the new one. A record is written before the index
names it, so an index entry always points at a complete record; a record the index does not
name yet (a crash between the two) is written again by the next harvest. When ``index.json``
cannot be read it is rebuilt from the records (they hold every field of an entry), so a
damaged index loses nothing that was harvested.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import structlog
from pydantic import ValidationError

from skillopt.durable import atomic_write_json, atomic_write_text
from skillopt.sleep.record import HarvestedSession, HarvestIndex, IndexEntry

__all__ = ["INDEX", "HarvestStore", "LoadedIndex", "entry_for"]

log = structlog.get_logger(__name__)

INDEX = "index.json"
_SESSIONS = "sessions"
_SAFE = re.compile(r"[^A-Za-z0-9._-]")


@dataclass(frozen=True)
class LoadedIndex:
    """The index as read: entries by ``(source, session_id)``, and a note when it had to be
    rebuilt (empty otherwise)."""

    entries: dict[tuple[str, str], IndexEntry]
    note: str = ""


class HarvestStore:
    """Reads and writes one harvest folder."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def record_name(self, source: str, session_id: str) -> str:
        """A record's path relative to the folder: ``sessions/<source>/<id>.json``, the id made
        safe for a file name (with a short hash when that changed it)."""
        safe = _SAFE.sub("_", session_id)[:120]
        if safe != session_id or not safe.strip("."):
            safe = f"{safe}-{hashlib.sha256(session_id.encode()).hexdigest()[:12]}"
        return f"{_SESSIONS}/{source}/{safe}.json"

    def has(self, entry: IndexEntry) -> bool:
        """Whether the record an entry names is still there."""
        return (self.root / entry.record).is_file()

    def read(self, entry: IndexEntry) -> HarvestedSession:
        """The record an entry names.

        Raises:
            OSError: it cannot be read.
            pydantic.ValidationError: it is not a session record.
        """
        return HarvestedSession.model_validate_json((self.root / entry.record).read_bytes())

    def load(self) -> LoadedIndex:
        """The index; rebuilt from the records when ``index.json`` is damaged (nothing there
        yet: an empty index)."""
        path = self.root / INDEX
        try:
            return LoadedIndex(
                {e.key: e for e in HarvestIndex.model_validate_json(path.read_bytes()).sessions}
            )
        except FileNotFoundError:
            if not (self.root / _SESSIONS).is_dir():
                return LoadedIndex({})
            problem = "missing"
        except (OSError, ValidationError, ValueError) as exc:
            problem = f"unreadable ({type(exc).__name__})"
        entries = self._rebuild()
        note = f"{INDEX} was {problem}; rebuilt it from the {len(entries)} session records in {self.root}"
        log.warning(
            "sleep.harvest.index_rebuilt", folder=str(self.root), problem=problem, records=len(entries)
        )
        return LoadedIndex(entries, note)

    def _rebuild(self) -> dict[tuple[str, str], IndexEntry]:
        entries: dict[tuple[str, str], IndexEntry] = {}
        for path in sorted((self.root / _SESSIONS).glob("*/*.json")):
            try:
                session = HarvestedSession.model_validate_json(path.read_bytes())
            except (OSError, ValidationError, ValueError):
                continue  # not a record (a stray file): the next harvest writes what it needs
            entries[session.key] = entry_for(session, str(path.relative_to(self.root)), mtime_ns=0)
        return entries

    def write_session(self, session: HarvestedSession) -> str:
        """Write a (redacted) record; returns its path relative to the folder.

        Raises:
            OSError: it could not be written (the old record, if any, is left as it was).
        """
        name = self.record_name(session.source, session.session_id)
        atomic_write_text(self.root / name, session.model_dump_json(indent=2) + "\n")
        return name

    def write_index(self, entries: dict[tuple[str, str], IndexEntry]) -> None:
        """Replace ``index.json`` with these entries (sorted by source and id).

        Raises:
            OSError: it could not be written (the old index is left as it was).
        """
        index = HarvestIndex(sessions=tuple(entries[k] for k in sorted(entries)))
        atomic_write_json(self.root / INDEX, index.model_dump(mode="json"))


def entry_for(session: HarvestedSession, record: str, *, mtime_ns: int) -> IndexEntry:
    """The index entry of a record written at ``record`` (``mtime_ns``: the transcript's
    modification time when read; 0 when unknown, which makes the next harvest hash it)."""
    return IndexEntry(
        source=session.source,
        session_id=session.session_id,
        sha256=session.sha256,
        record=record,
        source_path=session.source_path,
        size_bytes=session.size_bytes,
        mtime_ns=mtime_ns,
        cwd=session.cwd,
        started_at=session.started_at,
        ended_at=session.ended_at,
        harvested_at=session.harvested_at,
    )
