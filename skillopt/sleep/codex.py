"""Reading Codex's session rollouts (``sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl``).

The format, as ``codex exec`` 0.171.0 writes it (measured), and as codex-rs defines it
(``RolloutLine``: ``timestamp`` plus ``RolloutItem``, serialised with ``tag = "type",
content = "payload"``): one JSON object per line, ``{"timestamp", "type", "payload"}``
(0.171.0 adds ``ordinal``).

- ``session_meta`` (first line): ``payload.id`` (the session id; 0.171.0 repeats it as
  ``session_id``), ``cwd``, ``cli_version``, ``timestamp``, ``originator``, ``source``
  (``exec``, ``cli``, ``vscode``, or a sub-agent's ``{"subagent": ...}``), ``model_provider``,
  ``base_instructions``.
- ``response_item``: the Responses API items the model saw: ``message`` (``role`` user /
  assistant / developer; ``content`` parts ``input_text`` / ``output_text``),
  ``function_call`` (``name``, ``arguments`` as a JSON string, ``call_id``; the shell tool is
  ``exec_command {cmd}``), ``function_call_output`` (``call_id``, ``output``: 0.171.0 writes
  ``Chunk ID ...\\nProcess exited with code N\\n...Output:\\n...``), ``custom_tool_call`` /
  ``custom_tool_call_output`` (``apply_patch``; ``Exit code: N`` first), ``local_shell_call``
  (older releases), ``reasoning`` (encrypted; passed over).
- ``event_msg``: UI events; read here: ``item_completed`` with a ``CommandExecution`` item
  (``id`` = the call id, ``exit_code``), the older ``exec_command_end`` (``call_id``,
  ``exit_code``) and ``turn_aborted``. Others (``task_started``, ``task_complete``,
  ``token_count``, ``thread_settings_applied`` ...) are passed over.
- ``turn_context``, ``world_state``, ``token_usage_record``, ``compacted``: passed over.

The CLI adds user-role messages of its own (``<environment_context>``, ``# AGENTS.md
instructions``, ``<user_instructions>``): they are not the user's and are left out. A session
continued with ``codex exec resume`` appends to the same file. A file without a
``session_meta`` first line (the layout before the envelope, or not a rollout) is skipped as
``unknown format version``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from skillopt.sleep.record import HarvestedSession
from skillopt.sleep.signals import HarvestLimits, SessionBuilder, Skipped, parse_time
from skillopt.sleep.sources import LineTally, SessionFile, iter_records

__all__ = ["FORMAT", "SUPPORTED_MAJORS", "read_codex"]

FORMAT = "codex-rollout/envelope"
#: Codex major versions (of ``cli_version``) whose rollouts this reader knows; another is
#: skipped as ``unknown format version`` rather than guessed at.
SUPPORTED_MAJORS = (0,)

_INJECTED = (
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
    "<INSTRUCTIONS>",
    "<permissions instructions>",
    "<skills_instructions>",
    "<turn_aborted>",
    "<user_shell_command>",
)
_EXIT = re.compile(r"(?:Process exited with code|^Exit code:)\s*(-?\d+)", re.M)
_HEADER = re.compile(r"(?:Chunk ID|Exit code|Wall time)[^\n]*\n(?:[^\n]*\n){0,6}?Output:\n")


@dataclass
class _Meta:
    session_id: str = ""
    cwd: str = ""
    version: str = ""
    subagent: bool = False
    started: datetime | None = None
    ended: datetime | None = None
    records: int = 0

    def note(self, rec: dict[str, Any]) -> None:
        self.records += 1
        at = parse_time(rec.get("timestamp"))
        if at is not None:
            self.started = min(self.started, at) if self.started else at
            self.ended = max(self.ended, at) if self.ended else at


def _parts_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(
        str(p.get("text", ""))
        for p in content
        if isinstance(p, dict) and p.get("type") in ("input_text", "output_text", "text")
    )


def _output_text(output: Any) -> tuple[str, int | None]:
    """A call output's text, and the exit code it states (older releases wrote a JSON string
    ``{"output": ..., "metadata": {"exit_code": N}}``)."""
    if isinstance(output, dict):
        text = str(output.get("content") or output.get("output") or "")
    elif isinstance(output, list):
        text = _parts_text(output)
    else:
        text = str(output or "")
    if text.startswith("{"):
        try:
            wrapped = json.loads(text)
        except json.JSONDecodeError:
            wrapped = None
        if isinstance(wrapped, dict) and isinstance(wrapped.get("metadata"), dict):
            code = wrapped["metadata"].get("exit_code")
            return str(wrapped.get("output", "")), code if isinstance(code, int) else None
    m = _EXIT.search(text)
    body = _HEADER.match(text)  # the exec tool's preamble (chunk id, wall time ...): kept out
    return (text[body.end() :] if body else text), int(m.group(1)) if m else None


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw
    return raw


def _response_item(p: dict[str, Any], at: datetime | None, b: SessionBuilder) -> None:
    kind = p.get("type")
    if kind == "message":
        text = _parts_text(p.get("content"))
        if p.get("role") == "user" and not text.lstrip().startswith(_INJECTED):
            b.user(text, at)
        elif p.get("role") == "assistant":
            b.assistant(text, at)
    elif kind == "function_call":
        b.tool_call(str(p.get("call_id") or ""), str(p.get("name") or ""), _arguments(p.get("arguments")))
    elif kind == "custom_tool_call":
        b.tool_call(str(p.get("call_id") or ""), str(p.get("name") or ""), str(p.get("input") or ""))
    elif kind == "local_shell_call":
        action = p["action"] if isinstance(p.get("action"), dict) else {}
        b.tool_call(
            str(p.get("call_id") or p.get("id") or ""), "local_shell", {"command": action.get("command")}
        )
    elif kind in ("function_call_output", "custom_tool_call_output"):
        text, code = _output_text(p.get("output"))
        b.tool_result(str(p.get("call_id") or ""), text, exit_code=code)


def _event(p: dict[str, Any], b: SessionBuilder) -> None:
    kind = p.get("type")
    if kind == "item_completed" and isinstance(p.get("item"), dict):
        item = p["item"]
        if item.get("type") == "CommandExecution" and isinstance(item.get("exit_code"), int):
            b.exit_code(str(item.get("id") or ""), item["exit_code"])
    elif kind == "exec_command_end" and isinstance(p.get("exit_code"), int):
        b.exit_code(str(p.get("call_id") or ""), p["exit_code"])
    elif kind == "turn_aborted":
        b.interrupted()


def _session_meta(p: dict[str, Any], meta: _Meta) -> None:
    meta.session_id = meta.session_id or str(p.get("id") or p.get("session_id") or "")
    meta.cwd = meta.cwd or str(p.get("cwd") or "")
    meta.version = meta.version or str(p.get("cli_version") or "")
    meta.subagent = meta.subagent or (isinstance(p.get("source"), dict) and "subagent" in p["source"])
    meta.started = parse_time(p.get("timestamp")) or meta.started


def _unusable(meta: _Meta, first: dict[str, Any] | None, b: SessionBuilder) -> Skipped | None:
    if first is None:
        return Skipped("no conversation", "no JSON records in the file")
    if first.get("type") != "session_meta" or not isinstance(first.get("payload"), dict):
        layout = (
            "the layout before the {timestamp, type, payload} envelope"
            if "type" not in first
            else "not a rollout"
        )
        return Skipped("unknown format version", f"the first record is not a session_meta line ({layout})")
    major = meta.version.split(".")[0]
    if not major.isdigit() or int(major) not in SUPPORTED_MAJORS:
        return Skipped(
            "unknown format version",
            f"written by Codex {meta.version or '(no cli_version)'}; this skillopt reads rollouts of Codex "
            f"{', '.join(f'{m}.x' for m in SUPPORTED_MAJORS)}: upgrade skillopt to read it",
        )
    if meta.subagent:
        return Skipped("sub-agent transcript", "session_meta.source names a sub-agent")
    if not any(t.role == "user" for t in b.turns):
        return Skipped("no user message", "the rollout holds no message typed by the user")
    return None


def read_codex(
    file: SessionFile, *, sha256: str, limits: HarvestLimits, include_tool_output: bool
) -> HarvestedSession | Skipped:
    """One Codex rollout as a (not yet redacted) record, or why it is skipped.

    Raises:
        OSError: the file cannot be read.
    """
    tally = LineTally()
    meta = _Meta()
    b = SessionBuilder(limits=limits, include_tool_output=include_tool_output)
    first: dict[str, Any] | None = None
    for rec in iter_records(file.path, tally, max_line_bytes=limits.max_line_bytes):
        first = first or rec
        meta.note(rec)
        payload = rec.get("payload")
        if not isinstance(payload, dict):
            continue
        kind = rec.get("type")
        if kind == "session_meta":
            _session_meta(payload, meta)
        elif kind == "response_item":
            _response_item(payload, parse_time(rec.get("timestamp")), b)
        elif kind == "event_msg":
            _event(payload, b)
    skipped = _unusable(meta, first, b)
    if skipped is not None:
        return skipped
    return b.finish(
        source="codex",
        session_id=meta.session_id or file.path.stem,
        source_path=str(file.path),
        sha256=sha256,
        size_bytes=file.size_bytes,
        format=FORMAT,
        cli_version=meta.version,
        cwd=meta.cwd,
        started_at=meta.started,
        ended_at=meta.ended,
        lines_skipped=tally.total,
    )
