"""Reading Claude Code's session transcripts (``projects/<slug>/<session-uuid>.jsonl``).

The format, as Claude Code 2.1.332 writes it (``claude -p``, measured; earlier 1.x and 2.x
releases write the same user/assistant records): one JSON object per line, ``type`` first.

- ``user`` / ``assistant``: ``message`` is an Anthropic Messages API message (``role``,
  ``content``: a string, or blocks ``text`` / ``tool_use`` {id, name, input} / ``tool_result``
  {tool_use_id, content, is_error} / ``thinking``). Each also carries ``sessionId``, ``cwd``,
  ``version`` (the CLI's), ``timestamp``, ``uuid``/``parentUuid``, ``isSidechain`` (a
  sub-agent's turn), and on a user record ``isMeta`` (text the CLI added, such as a skill's
  body after a ``Skill`` call), ``toolUseResult``, and after a compaction
  ``isCompactSummary`` (the CLI's summary of the conversation so far: not the user's). A Bash failure comes back as a
  ``tool_result`` with ``is_error: true`` and content ``Exit code N\\n<output>``.
- A ``Skill`` call is a ``tool_use`` named ``Skill`` with ``input: {"skill": "<name>"}``; its
  result is ``Launching skill: <name>``.
- Others, passed over: ``attachment`` (environment, skill listing, reminders, prompt
  snapshots), ``queue-operation``, ``last-prompt``, ``api-request``/``api-request-blob``/
  ``api-request-shape``, ``tools-used``, ``cost-state``, ``atis-latch``, ``mode``, ``summary``.

A session resumed with ``--resume`` appends to the same file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from skillopt.sleep.record import HarvestedSession
from skillopt.sleep.signals import HarvestLimits, SessionBuilder, Skipped, parse_time
from skillopt.sleep.sources import LineTally, SessionFile, iter_records

__all__ = ["SUPPORTED_MAJORS", "read_claude_code"]

#: Claude Code major versions whose transcripts this reader knows; a file written by another
#: is skipped as ``unknown format version`` rather than guessed at.
SUPPORTED_MAJORS = (1, 2)

#: Starts of user-record texts that the CLI wrote, not the user.
_INJECTED = (
    "<local-command-",
    "<system-reminder>",
    "<bash-input>",
    "<bash-stdout>",
    "<bash-stderr>",
    "Caveat: The messages below were generated",
)
_INTERRUPTED = "[Request interrupted by user"
_SLASH = re.compile(
    r"<command-name>\s*(?P<name>[^<]*)</command-name>.*?(?:<command-args>(?P<args>.*?)</command-args>|\Z)",
    re.S,
)
_EXIT = re.compile(r"^(?:Error: )?Exit code (\d+)")


@dataclass
class _Meta:
    session_id: str = ""
    cwd: str = ""
    version: str = ""
    started: datetime | None = None
    ended: datetime | None = None
    main: int = 0
    sidechain: int = 0

    def note(self, rec: dict[str, Any]) -> None:
        self.session_id = self.session_id or str(rec.get("sessionId") or "")
        self.version = self.version or str(rec.get("version") or "")
        if rec.get("type") in ("user", "assistant"):
            self.cwd = self.cwd or str(rec.get("cwd") or "")
        at = parse_time(rec.get("timestamp"))
        if at is not None:
            self.started = min(self.started, at) if self.started else at
            self.ended = max(self.ended, at) if self.ended else at


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


def _user_text(b: SessionBuilder, text: str, at: datetime | None) -> None:
    stripped = text.lstrip()
    if stripped.startswith(_INTERRUPTED):
        b.interrupted()
    elif stripped.startswith("<command-name>") or stripped.startswith("<command-message>"):
        m = _SLASH.search(stripped)
        if m:  # a slash command the user typed: kept as they typed it
            b.user(f"{m.group('name').strip()} {(m.group('args') or '').strip()}".strip(), at)
    elif not stripped.startswith(_INJECTED):
        b.user(text, at)


def _user(rec: dict[str, Any], b: SessionBuilder) -> None:
    content = (rec.get("message") or {}).get("content")
    at = parse_time(rec.get("timestamp"))
    injected = bool(rec.get("isMeta") or rec.get("isCompactSummary"))  # the CLI's text, not the user's
    if isinstance(content, str):
        if not injected:
            _user_text(b, content, at)
        return
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        if block.get("type") == "tool_result":
            output = _text_of(block.get("content"))
            code = _EXIT.match(output)
            b.tool_result(
                str(block.get("tool_use_id") or ""),
                output,
                is_error=bool(block.get("is_error")),
                exit_code=int(code.group(1)) if code else None,
            )
        elif block.get("type") == "text" and not injected:
            _user_text(b, str(block.get("text") or ""), at)


def _assistant(rec: dict[str, Any], b: SessionBuilder) -> None:
    content = (rec.get("message") or {}).get("content")
    at = parse_time(rec.get("timestamp"))
    if isinstance(content, str):
        b.assistant(content, at)
        return
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            b.assistant(str(block.get("text") or ""), at)
        elif block.get("type") == "tool_use":
            name = str(block.get("name") or "")
            args = block["input"] if isinstance(block.get("input"), dict) else {}
            skill = str(args.get("skill") or args.get("command") or "") if name == "Skill" else ""
            b.tool_call(str(block.get("id") or ""), name, args, skill=skill)


def _unusable(meta: _Meta, b: SessionBuilder) -> Skipped | None:
    if meta.main == 0 and meta.sidechain:
        return Skipped("sub-agent transcript", "every record is a sub-agent's (isSidechain)")
    if meta.main == 0:
        return Skipped("no conversation", "no user or assistant record in the file")
    major = meta.version.split(".")[0]
    if not major.isdigit():
        return Skipped("unknown format version", "no Claude Code `version` field in any record")
    if int(major) not in SUPPORTED_MAJORS:
        return Skipped(
            "unknown format version",
            f"written by Claude Code {meta.version}; this skillopt reads transcripts of Claude Code "
            f"{', '.join(f'{m}.x' for m in SUPPORTED_MAJORS)}: upgrade skillopt to read it",
        )
    if not any(t.role == "user" for t in b.turns):
        return Skipped("no user message", "the conversation holds no message typed by the user")
    return None


def read_claude_code(
    file: SessionFile, *, sha256: str, limits: HarvestLimits, include_tool_output: bool
) -> HarvestedSession | Skipped:
    """One Claude Code transcript as a (not yet redacted) record, or why it is skipped.

    Raises:
        OSError: the file cannot be read.
    """
    tally = LineTally()
    meta = _Meta()
    b = SessionBuilder(limits=limits, include_tool_output=include_tool_output)
    for rec in iter_records(file.path, tally, max_line_bytes=limits.max_line_bytes):
        meta.note(rec)
        if rec.get("type") not in ("user", "assistant"):
            continue
        if rec.get("isSidechain"):
            meta.sidechain += 1
            continue
        meta.main += 1
        (_user if rec["type"] == "user" else _assistant)(rec, b)
    skipped = _unusable(meta, b)
    if skipped is not None:
        return skipped
    return b.finish(
        source="claude-code",
        session_id=meta.session_id or file.path.stem,
        source_path=str(file.path),
        sha256=sha256,
        size_bytes=file.size_bytes,
        format=f"claude-code-jsonl/{meta.version.split('.')[0]}",
        cli_version=meta.version,
        cwd=meta.cwd,
        started_at=meta.started,
        ended_at=meta.ended,
        lines_skipped=tally.total,
    )
