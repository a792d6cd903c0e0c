"""Where each agent CLI keeps its session transcripts, and reading them (read-only).

=============  =========================================================================
source         files
=============  =========================================================================
claude-code    ``$CLAUDE_CONFIG_DIR/projects/<slug>/<session-uuid>.jsonl``, else
               ``~/.claude/projects/...``; ``<slug>`` is the session's folder with every
               character other than a letter or digit replaced by ``-``
               (``/home/me/my_app.v2`` -> ``-home-me-my-app-v2``: lossy, so the folder is
               read from the records, the slug only narrows ``--project``)
codex          ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl``, else
               ``~/.codex/sessions/...``
=============  =========================================================================

Files are opened for reading only and never locked, moved or changed. A CLI may be appending
to a file while it is read: its last line may be cut off (it is skipped and counted, and the
grown file is harvested again next time).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from skillopt.sleep.record import Source

__all__ = [
    "LineTally",
    "SessionFile",
    "claude_slug",
    "file_sha256",
    "find_session_files",
    "iter_records",
    "parse_sources",
    "source_root",
]

_ROOTS: dict[Source, tuple[str, str, str]] = {
    # source: (environment variable, its default under HOME, sub-folder of the sessions)
    "claude-code": ("CLAUDE_CONFIG_DIR", ".claude", "projects"),
    "codex": ("CODEX_HOME", ".codex", "sessions"),
}


def parse_sources(text: str) -> list[Source]:
    """``--source``: a comma-separated list of :data:`~skillopt.sleep.record.SOURCES`.

    Raises:
        ConfigError: empty, or a name that is not a source.
    """
    from skillopt.errors import ConfigError
    from skillopt.sleep.record import SOURCES

    names = list(dict.fromkeys(s.strip() for s in text.split(",") if s.strip()))
    if not names or any(s not in SOURCES for s in names):
        raise ConfigError(f"--source {text!r}: give a comma-separated list of {', '.join(SOURCES)}")
    return [cast("Source", s) for s in names]


def source_root(source: Source, env: Mapping[str, str]) -> Path:
    """The folder holding ``source``'s transcripts, from ``env`` (``os.environ`` in the CLI)."""
    var, default, sub = _ROOTS[source]
    base = env.get(var) or str(Path(env.get("HOME") or Path.home()) / default)
    return Path(base).expanduser().absolute() / sub  # absolute: the index matches on paths


def claude_slug(folder: str) -> str:
    """Claude Code's name for a project folder under ``projects/`` (measured with 2.1.332:
    ``/tmp/h49-scratch/cws/sub.dir_x`` -> ``-tmp-h49-scratch-cws-sub-dir-x``)."""
    return re.sub(r"[^A-Za-z0-9]", "-", folder)


@dataclass(frozen=True)
class SessionFile:
    """One transcript file found, with what ``stat`` said of it."""

    source: Source
    path: Path
    size_bytes: int
    mtime_ns: int


def find_session_files(source: Source, root: Path, errors: list[tuple[Path, str]]) -> Iterator[SessionFile]:
    """The transcript files under ``root``, sorted by path. A file that cannot be looked at
    (a dangling link, no permission) is appended to ``errors`` with the reason and skipped."""
    pattern = "*/*.jsonl" if source == "claude-code" else "**/rollout-*.jsonl"
    for path in sorted(root.glob(pattern)):
        try:
            st = path.stat()
        except OSError as exc:
            errors.append((path, f"cannot be read ({exc.strerror or exc})"))
            continue
        if not os.path.isfile(path):
            continue
        yield SessionFile(source=source, path=path, size_bytes=st.st_size, mtime_ns=st.st_mtime_ns)


def file_sha256(path: Path) -> str:
    """Hex sha256 of the file's bytes, read in blocks.

    Raises:
        OSError: the file cannot be read.
    """
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass
class LineTally:
    """The lines of one file that were not records, by reason."""

    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    @property
    def total(self) -> int:
        return sum(self.skipped.values())


def iter_records(path: Path, tally: LineTally, *, max_line_bytes: int) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSON-lines file, one per line. Blank lines are passed over; a
    line that is not a JSON object (corrupt, not UTF-8, cut off mid-write, longer than
    ``max_line_bytes``) is counted in ``tally`` and skipped, never fatal.

    Raises:
        OSError: the file cannot be opened or read.
    """
    with path.open("rb") as fh:
        while True:
            raw = fh.readline(max_line_bytes + 1)
            if not raw:
                return
            if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                tally.skip(f"longer than {max_line_bytes} bytes")
                while raw and not raw.endswith(b"\n"):  # the rest of that line
                    raw = fh.readline(1 << 20)
                continue
            if not raw.strip():
                continue
            try:
                value = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError:
                tally.skip("not UTF-8")
                continue
            except (json.JSONDecodeError, RecursionError):
                tally.skip("cut off (last line)" if not raw.endswith(b"\n") else "not JSON")
                continue
            if isinstance(value, dict):
                yield value
            else:
                tally.skip("not a JSON object")
