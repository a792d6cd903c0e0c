"""The harvested session: one typed record per agent session, whatever CLI wrote it.

A harvest writes one :class:`HarvestedSession` per session file (``sessions/<source>/<id>.json``
under the harvest folder) and an :class:`HarvestIndex` (``index.json``). Every reader gets them
back through these models (``HarvestedSession.model_validate_json(text)``), never by walking the
JSON itself. Every string in a written record has been through
:class:`skillopt.sleep.redact.Redactor`.

:func:`render_session` is the session as a model will later read it (``skillopt sleep harvest
--dry-run`` prints it), so that what a person checks is what would be sent.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = [
    "INDEX_VERSION",
    "SCHEMA_VERSION",
    "SOURCES",
    "HarvestIndex",
    "HarvestedSession",
    "IndexEntry",
    "Outcome",
    "Source",
    "ToolUse",
    "Turn",
    "render_session",
]

#: The version of :class:`HarvestedSession`'s JSON (``schema_version``).
SCHEMA_VERSION = 1
#: The version of ``index.json`` (:class:`HarvestIndex`).
INDEX_VERSION = 1

Source = Literal["claude-code", "codex"]
#: The agent CLIs a harvest reads, by the name ``--source`` takes.
SOURCES: tuple[Source, ...] = ("claude-code", "codex")


class _Record(BaseModel):
    """Frozen; keys this version does not know (a newer writer's) are ignored on reading."""

    model_config = ConfigDict(frozen=True, extra="ignore")


class Turn(_Record):
    """One message of the conversation: what the user typed, or the agent's text reply."""

    role: Literal["user", "assistant"]
    text: str
    at: datetime | None = None


class ToolUse(_Record):
    """One tool call of the agent.

    Attributes:
        name: the tool (``Bash``, ``exec_command``, ``Skill``, ``apply_patch`` ...).
        arguments: the call's arguments as compact JSON (or the freeform input), redacted
            and clipped.
        after_turn: index in ``turns`` of the last turn before the call; -1 before any.
        output: the tool's output, redacted and clipped; ``None`` unless the harvest was asked
            for outputs (``--include-tool-output``).
        exit_code: the command's exit code, when the CLI recorded one.
        failed: a non-zero exit code, or the CLI marked the result as an error.
        is_test: the command runs a test suite (pytest, npm test, go test ...).
    """

    name: str
    arguments: str
    after_turn: int = -1
    output: str | None = None
    exit_code: int | None = None
    failed: bool = False
    is_test: bool = False


class Outcome(_Record):
    """How the session went, as far as the transcript tells (the rules are in
    :mod:`skillopt.sleep.signals`).

    Attributes:
        negative_feedback: user messages after the first that said the work was wrong
            ("no, that's wrong", "that didn't work", "still failing" ...).
        feedback_turns: their indexes in ``turns`` (those kept by the size cap).
        retries: user messages after the first that asked for the work again.
        failed_tool_calls: tool calls that failed (non-zero exit or an error result).
        failed_tests: those of them that ran a test suite.
        abandoned: the session ended on a failure or without an answer.
        abandoned_reason: why it counts as abandoned; empty when it does not.
    """

    negative_feedback: int = 0
    feedback_turns: tuple[int, ...] = ()
    retries: int = 0
    failed_tool_calls: int = 0
    failed_tests: int = 0
    abandoned: bool = False
    abandoned_reason: str = ""


class HarvestedSession(_Record):
    """One agent session, normalised and redacted.

    Attributes:
        source: the CLI that wrote it (``claude-code`` or ``codex``).
        session_id: the CLI's own session id.
        source_path: the transcript file it was read from (read-only).
        sha256: hex digest of that file's bytes when it was read; with ``source`` and
            ``session_id`` the key of the harvest index.
        size_bytes: the file's size then.
        format: the on-disk format it was parsed as (``claude-code-jsonl/2``,
            ``codex-rollout/envelope``).
        cli_version: the CLI version the file names (``2.1.332``, ``0.171.0``).
        cwd: the folder the session worked in.
        started_at, ended_at: the first and last timestamps in the file.
        task: the first real user message: the task as first asked.
        turns: the conversation (user and assistant texts), capped (see ``truncated``).
        tool_calls: the agent's tool calls, capped.
        skills_used: skills the session used, in order of first use.
        outcome: the signals of how it went.
        truncated: what the size caps cut, one note each; empty when nothing was cut.
        lines_skipped: lines of the file that were not JSON (corrupt, or cut off mid-write).
        redactions: secrets taken out of this record, by kind.
        tool_output_included: whether tool outputs were kept.
        harvested_at: when this record was made.
    """

    schema_version: int = SCHEMA_VERSION
    source: Source
    session_id: str
    source_path: str
    sha256: str
    size_bytes: int
    format: str
    cli_version: str = ""
    cwd: str = ""
    started_at: datetime | None = None
    ended_at: datetime | None = None
    task: str = ""
    turns: tuple[Turn, ...] = ()
    tool_calls: tuple[ToolUse, ...] = ()
    skills_used: tuple[str, ...] = ()
    outcome: Outcome = Outcome()
    truncated: tuple[str, ...] = ()
    lines_skipped: int = 0
    redactions: dict[str, int] = {}
    tool_output_included: bool = False
    harvested_at: datetime | None = None

    @property
    def key(self) -> tuple[str, str]:
        """``(source, session_id)``: the identity of a session across harvests."""
        return (self.source, self.session_id)


class IndexEntry(_Record):
    """One harvested session in ``index.json``: where its record is and what it was made from.

    Attributes:
        record: the record's path, relative to the harvest folder.
        mtime_ns: the transcript's modification time when read; with ``size_bytes`` it lets a
            later harvest skip an untouched file without reading it.
    """

    source: Source
    session_id: str
    sha256: str
    record: str
    source_path: str
    size_bytes: int
    mtime_ns: int
    cwd: str = ""
    started_at: datetime | None = None
    ended_at: datetime | None = None
    harvested_at: datetime | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.source, self.session_id)


class HarvestIndex(_Record):
    """``index.json``: every session harvested into the folder, by ``(source, session_id)``."""

    version: int = INDEX_VERSION
    sessions: tuple[IndexEntry, ...] = ()


def _clock(at: datetime | None) -> str:
    return at.strftime("%Y-%m-%d %H:%M") if at else "?"


def render_session(session: HarvestedSession) -> str:
    """The session as text for a model (and for a person checking it first): a header, the
    task, then turns and tool calls in order. Built from the redacted record only."""
    o = session.outcome
    lines = [
        f"# {session.source} session {session.session_id}",
        f"folder: {session.cwd or '?'}; {_clock(session.started_at)} to {_clock(session.ended_at)}",
        f"skills used: {', '.join(session.skills_used) or 'none'}",
        (
            f"outcome: {o.negative_feedback} negative feedback, {o.retries} retries, "
            f"{o.failed_tool_calls} failed tool calls ({o.failed_tests} test runs), "
            + (f"abandoned ({o.abandoned_reason})" if o.abandoned else "not abandoned")
        ),
    ]
    lines += [f"note: {note}" for note in session.truncated]
    lines += ["", "## Task", session.task, "", "## Transcript"]
    calls: dict[int, list[ToolUse]] = {}
    for call in session.tool_calls:
        calls.setdefault(call.after_turn, []).append(call)

    def tool_lines(after: int) -> list[str]:
        out = []
        for c in calls.get(after, ()):
            status = "" if c.exit_code is None else f" exit {c.exit_code}"
            status += " FAILED" if c.failed else ""
            out.append(f"[tool {c.name}] {c.arguments}{' ->' + status if status else ''}")
            if c.output is not None:
                out.append(f"[output] {c.output}")
        return out

    lines += tool_lines(-1)
    for i, turn in enumerate(session.turns):
        lines.append(f"[{turn.role}] {turn.text}")
        lines += tool_lines(i)
    return "\n".join(lines) + "\n"
