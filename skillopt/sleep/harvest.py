"""Harvest: read the user's agent sessions, normalise and redact them, write one record each.

:func:`harvest` is ``skillopt sleep harvest``'s work, apart from its command line::

    config = HarvestConfig(roots={"codex": Path("~/.codex/sessions").expanduser()}, out=Path("h"))
    result = harvest(config)
    result.harvested, result.unchanged, result.skipped

For each transcript file: a file whose path, size and modification time match its index
entry is unchanged and not read again; else it is hashed (sha256), and unchanged when the hash
matches; else it is parsed by its CLI's reader, filtered (``since``, ``project``), redacted
(every string of the record, :mod:`skillopt.sleep.redact`) and written, replacing an older
record of the same session (a session whose file grew since). Nothing is written with
``dry_run``. A file that cannot be read, or is in a format this version does not know, is
reported and skipped; a bad line is skipped and counted. Transcripts are only ever read.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import structlog

from skillopt.errors import ConfigError
from skillopt.sleep.claude_code import read_claude_code
from skillopt.sleep.codex import read_codex
from skillopt.sleep.record import SOURCES, HarvestedSession, IndexEntry, Source
from skillopt.sleep.redact import Redactor
from skillopt.sleep.signals import HarvestLimits, Skipped
from skillopt.sleep.sources import SessionFile, claude_slug, file_sha256, find_session_files
from skillopt.sleep.store import HarvestStore, entry_for

__all__ = ["HarvestConfig", "HarvestResult", "SkippedFile", "harvest", "parse_since", "redact_session"]

log = structlog.get_logger(__name__)

_READERS: dict[Source, Callable[..., HarvestedSession | Skipped]] = {
    "claude-code": read_claude_code,
    "codex": read_codex,
}
#: Fields of a record that are identifiers, not content: never redacted (the index matches on them).
_IDENTIFIERS = frozenset({"source", "session_id", "source_path", "sha256", "format", "cli_version"})
#: The index is written after this many new records too, not only at the end.
_INDEX_EVERY = 50
_HINTS: dict[Source, str] = {
    "claude-code": "set CLAUDE_CONFIG_DIR if Claude Code keeps its config elsewhere",
    "codex": "set CODEX_HOME if Codex keeps its home elsewhere",
}


def parse_since(text: str, now: datetime) -> datetime:
    """``--since``: a span back from ``now`` (``30m``, ``24h``, ``7d``, ``2w``) or an ISO date
    or time (``2026-12-01``, ``2026-12-01T08:00``; UTC unless it names a zone).

    Raises:
        ConfigError: neither.
    """
    m = re.fullmatch(r"\s*(\d+)\s*([mhdw])\s*", text)
    if m:
        unit = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}[m.group(2)]
        return now - timedelta(**{unit: int(m.group(1))})
    try:
        at = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ConfigError(
            f"--since {text!r}: give a span back from now (30m, 24h, 7d, 2w) or an ISO date (2026-12-01)"
        ) from None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


@dataclass(frozen=True, kw_only=True)
class HarvestConfig:
    """What to harvest and where to.

    Attributes:
        roots: the transcript folder of each source to read (``sources.source_root``).
        out: the harvest folder.
        since: keep sessions active at or after this time (their last timestamp).
        project: keep sessions whose folder is this one or inside it (absolute).
        include_tool_output: keep tool outputs (redacted and clipped) in the records.
        dry_run: read, parse and redact, but write nothing.
        limits: the size caps of one record.
    """

    roots: Mapping[Source, Path]
    out: Path
    since: datetime | None = None
    project: Path | None = None
    include_tool_output: bool = False
    dry_run: bool = False
    limits: HarvestLimits = field(default_factory=HarvestLimits)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.roots) - set(SOURCES))
        if unknown:
            raise ConfigError(f"unknown session source(s) {unknown}; known: {', '.join(SOURCES)}")
        if self.project is not None and not self.project.is_absolute():
            raise ConfigError(f"project folder {self.project} must be absolute (resolve it first)")


@dataclass(frozen=True)
class SkippedFile:
    """A transcript that gave no record: the summary's category, what was found, the file."""

    reason: str
    detail: str
    path: str


@dataclass(frozen=True, kw_only=True)
class HarvestResult:
    """What a harvest did (a dry run: what it would have done).

    Attributes:
        seen: transcript files found.
        harvested: ``(source, session_id)`` of each record written (or previewed).
        replaced: of those, records that replaced an older one of the same session.
        unchanged: files already harvested as they are now.
        filtered: sessions left out by ``--since`` / ``--project``, by flag.
        skipped: files that gave no record, with the reason.
        lines_skipped: transcript lines that were not JSON, in the files read.
        redactions: secrets taken out, by kind, over the records made.
        missing: sources whose folder does not exist, with the folder.
        index_note: said when the index had to be rebuilt.
    """

    seen: int = 0
    harvested: tuple[tuple[str, str], ...] = ()
    replaced: int = 0
    unchanged: int = 0
    filtered: Mapping[str, int] = field(default_factory=dict)
    skipped: tuple[SkippedFile, ...] = ()
    lines_skipped: int = 0
    redactions: Mapping[str, int] = field(default_factory=dict)
    missing: tuple[tuple[Source, Path], ...] = ()
    index_note: str = ""


@dataclass
class _Run:
    """One harvest's working state (counts and the index as it grows)."""

    config: HarvestConfig
    store: HarvestStore
    index: dict[tuple[str, str], IndexEntry]
    preview: Callable[[HarvestedSession], None] | None
    by_path: dict[str, IndexEntry] = field(default_factory=dict)
    seen: int = 0
    harvested: list[tuple[str, str]] = field(default_factory=list)
    replaced: int = 0
    unchanged: int = 0
    filtered: Counter[str] = field(default_factory=Counter)
    skipped: list[SkippedFile] = field(default_factory=list)
    lines_skipped: int = 0
    redactions: Counter[str] = field(default_factory=Counter)
    pending: int = 0


def harvest(
    config: HarvestConfig, *, preview: Callable[[HarvestedSession], None] | None = None
) -> HarvestResult:
    """Harvest every source in ``config.roots`` into ``config.out``.

    Args:
        preview: called with each redacted record as it is made (``--dry-run`` prints it).

    Raises:
        ConfigError: none of the sources' folders exists (the message names each).
        OSError: a record or the index could not be written (what was written stays).
    """
    present = {s: r for s, r in config.roots.items() if r.is_dir()}
    missing = tuple((s, r) for s, r in config.roots.items() if s not in present)
    if not present:
        raise ConfigError(
            "no agent session folders found: "
            + "; ".join(f"{s}: {r} does not exist ({_HINTS[s]})" for s, r in missing)
        )
    store = HarvestStore(config.out)
    loaded = store.load()
    run = _Run(config=config, store=store, index=dict(loaded.entries), preview=preview)
    run.by_path = {e.source_path: e for e in run.index.values()}
    errors: list[tuple[Path, str]] = []
    for source, root in present.items():
        for file in find_session_files(source, root, errors):
            run.seen += 1
            _one_file(run, file)
    run.seen += len(errors)
    run.skipped += [SkippedFile("unreadable", why, str(path)) for path, why in errors]
    if (run.pending or loaded.note) and not config.dry_run:
        store.write_index(run.index)  # also a rebuilt index, when nothing new came in
    log.debug("sleep.harvest.done", seen=run.seen, harvested=len(run.harvested), unchanged=run.unchanged)
    return HarvestResult(
        seen=run.seen,
        harvested=tuple(run.harvested),
        replaced=run.replaced,
        unchanged=run.unchanged,
        filtered=dict(run.filtered),
        skipped=tuple(run.skipped),
        lines_skipped=run.lines_skipped,
        redactions=dict(run.redactions),
        missing=missing,
        index_note=loaded.note,
    )


def _one_file(run: _Run, file: SessionFile) -> None:
    config = run.config
    if config.since is not None and file.mtime_ns < config.since.timestamp() * 1e9:
        run.filtered["--since"] += 1  # untouched since before the window: not even read
        return
    slug = claude_slug(str(config.project)) if config.project is not None else ""
    if file.source == "claude-code" and not file.path.parent.name.startswith(slug):
        run.filtered["--project"] += 1  # a folder inside the project has a slug that starts so
        return
    old = run.by_path.get(str(file.path))
    if old and (old.size_bytes, old.mtime_ns) == (file.size_bytes, file.mtime_ns) and run.store.has(old):
        run.unchanged += 1
        return
    try:
        sha = file_sha256(file.path)
        if old and old.sha256 == sha and run.store.has(old):
            _unchanged(run, old, file)  # touched, not changed: not parsed again
            return
        parsed = _READERS[file.source](
            file, sha256=sha, limits=config.limits, include_tool_output=config.include_tool_output
        )
    except OSError as exc:
        run.skipped.append(
            SkippedFile("unreadable", f"cannot be read ({exc.strerror or exc})", str(file.path))
        )
        return
    if isinstance(parsed, Skipped):
        run.skipped.append(SkippedFile(parsed.reason, parsed.detail, str(file.path)))
        return
    run.lines_skipped += parsed.lines_skipped
    reason = _filtered_by(parsed, config)
    if reason:
        run.filtered[reason] += 1
        return
    entry = run.index.get(parsed.key)
    if entry is not None and entry.sha256 == sha and run.store.has(entry):
        _unchanged(run, entry, file)  # the same session, moved: the record stands
        return
    _write(run, file, parsed, replaces=entry is not None)


def _unchanged(run: _Run, entry: IndexEntry, file: SessionFile) -> None:
    """A file harvested before as it is now; its entry learns its path and time, so the next
    harvest passes it by without reading it."""
    run.unchanged += 1
    if not run.config.dry_run and (entry.source_path, entry.mtime_ns) != (str(file.path), file.mtime_ns):
        _keep(run, entry.model_copy(update={"source_path": str(file.path), "mtime_ns": file.mtime_ns}))


def _filtered_by(session: HarvestedSession, config: HarvestConfig) -> str:
    if config.since is not None:
        last = session.ended_at or session.started_at
        if last is not None and last < config.since:
            return "--since"
    if config.project is not None:
        top = str(config.project).rstrip("/") or "/"
        if not (session.cwd == top or session.cwd.startswith(top.rstrip("/") + "/")):
            return "--project"
    return ""


def redact_session(session: HarvestedSession, redactor: Redactor) -> HarvestedSession:
    """``session`` with every string but its identifiers redacted (``redactions`` counts what
    this record lost; ``redactor.counts`` adds up over every record it redacted)."""
    before = Counter(redactor.counts)
    data: dict[str, Any] = session.model_dump(mode="json")
    clean = {k: (v if k in _IDENTIFIERS | {"task"} else redactor.data(v)) for k, v in data.items()}
    clean["task"] = Redactor().text(session.task)  # a copy of the first turn: counted there
    clean["redactions"] = dict(sorted((redactor.counts - before).items()))
    return HarvestedSession.model_validate(clean)


def _write(run: _Run, file: SessionFile, parsed: HarvestedSession, *, replaces: bool) -> None:
    redactor = Redactor()
    session = redact_session(parsed.model_copy(update={"harvested_at": datetime.now(UTC)}), redactor)
    run.redactions.update(redactor.counts)
    if run.preview is not None:
        run.preview(session)
    run.harvested.append(session.key)
    run.replaced += replaces
    if run.config.dry_run:
        return
    record = run.store.write_session(session)
    _keep(run, entry_for(session, record, mtime_ns=file.mtime_ns))


def _keep(run: _Run, entry: IndexEntry) -> None:
    old = run.index.get(entry.key)
    if old is not None:
        run.by_path.pop(old.source_path, None)
    run.index[entry.key] = entry
    run.by_path[entry.source_path] = entry
    run.pending += 1
    if run.pending % _INDEX_EVERY == 0:
        run.store.write_index(run.index)
