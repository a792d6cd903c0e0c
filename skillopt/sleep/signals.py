"""From a transcript's events to a session record: turns, tool calls, skills and outcome.

Each CLI's reader (:mod:`skillopt.sleep.claude_code`, :mod:`skillopt.sleep.codex`) walks its
own file format and tells a :class:`SessionBuilder` what happened, in order (a user message, an
assistant reply, a tool call, its result); the builder applies the rules below, the same for
every CLI, and the size caps of :class:`HarvestLimits`.

The rules (each a heuristic over text; tests in ``tests/skillopt/sleep/test_signals.py``):

- **negative feedback**: a user message after the first that says the work was wrong: it
  starts with "no" / "nope", or says "that's wrong", "(it|that|this) didn't/doesn't work",
  "still failing/broken/wrong/not working/the same error", "not working", "you broke", "not
  what I asked", "revert that", "undo that".
- **retry**: a user message after the first that asks for the work again: "try again",
  "again", "retry", "redo", "one more time", "fix it", or it repeats an earlier user message
  (70% or more of the words of the two, taken as sets, are shared; 4 words or more each).
- **failed tool call**: the CLI recorded a non-zero exit code, or marked the result as an
  error. It is a **failed test** when the command runs a test suite (pytest, unittest, tox,
  npm/yarn/pnpm test, jest, vitest, mocha, go test, cargo test, mvn/gradle test, make test,
  ctest, rspec, phpunit).
- **abandoned**: the session ends on a failed tool call, on a user message with no answer
  after it, or on the user interrupting the agent; or the agent never replied at all.
- **skill used**: a call of Claude Code's ``Skill`` tool (its ``skill`` argument), or a tool
  call whose arguments name a path under ``.agents/skills/<name>/``, ``.claude/skills/<name>/``,
  ``.codex/skills/<name>/`` or ``skills/<name>/SKILL.md`` (Codex reads a skill with a shell
  command: it has no skill tool); in both cases only when the call did not fail.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from skillopt.sleep.record import HarvestedSession, Outcome, Source, ToolUse, Turn
from skillopt.units import MiB

__all__ = [
    "HarvestLimits",
    "SessionBuilder",
    "Skipped",
    "is_negative_feedback",
    "is_retry",
    "parse_time",
    "skill_paths",
]


@dataclass(frozen=True)
class Skipped:
    """A transcript a reader will not make a record of: ``reason`` is the summary's category
    (``unknown format version``, ``no user message`` ...), ``detail`` says what was found and
    what to do about it."""

    reason: str
    detail: str


def parse_time(value: Any) -> datetime | None:
    """An ISO 8601 timestamp as the CLIs write them (``2026-12-07T22:56:15.195Z``), else None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        return None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


@dataclass(frozen=True, kw_only=True)
class HarvestLimits:
    """How much of one session a record keeps (a huge session is cut, and says so).

    Attributes:
        max_turns: turns kept; beyond it the first and last halves are kept.
        max_tool_calls: tool calls kept, the same way.
        max_text_chars: characters kept of one turn's text.
        max_argument_chars: characters kept of one tool call's arguments.
        max_output_chars: characters kept of one tool output (with ``--include-tool-output``).
        max_line_bytes: a longer line of a transcript is skipped and counted, not parsed.
    """

    max_turns: int = 200
    max_tool_calls: int = 300
    max_text_chars: int = 4000
    max_argument_chars: int = 2000
    max_output_chars: int = 2000
    max_line_bytes: int = 16 * MiB

    def __post_init__(self) -> None:
        for name in (
            "max_turns",
            "max_tool_calls",
            "max_text_chars",
            "max_argument_chars",
            "max_output_chars",
        ):
            if getattr(self, name) < 2:
                raise ValueError(f"HarvestLimits.{name} must be at least 2, got {getattr(self, name)}")


_NEGATIVE = re.compile(
    r"^\s*(?:no|nope|nah)\b"
    r"|\b(?:that'?s|that is|this is|it'?s|it is) (?:wrong|incorrect|not right|broken)\b"
    r"|\b(?:it|that|this) (?:didn'?t|did not|doesn'?t|does not|still doesn'?t) work"
    r"|\bstill (?:fail\w*|broken|wrong|not working|doesn'?t work|errors?|the same error|crash\w*)"
    r"|\bnot working\b|\byou broke\b|\bnot what i (?:asked|wanted|meant)\b"
    r"|\b(?:revert|undo) (?:that|this|it)\b",
    re.I,
)
_REASK = re.compile(r"\b(?:try again|again|retry|redo|one more time|fix it)\b", re.I)
_WORD = re.compile(r"[a-z0-9]+")
#: A message repeats an earlier one when at least this share of their words (as sets) is
#: shared, both having this many words or more ("continue with module 4" then "... module 5"
#: shares 3 of 5: not a repeat).
_REPEAT_SHARE = 0.7
_REPEAT_MIN_WORDS = 4
_TEST_COMMAND = re.compile(
    r"\b(?:pytest|py\.test|unittest|tox|nox|jest|vitest|mocha|ctest|rspec|phpunit"
    r"|(?:npm|yarn|pnpm|bun)(?: run)? test|go test|cargo test|mvn test|gradle test|make test)\b"
)
_SKILL_PATH = re.compile(
    r"(?:\.agents|\.claude|\.codex)/skills/(?:\.system/)?([A-Za-z0-9._-]+)/"
    r"|(?<![\w.])skills/(?:\.system/)?([A-Za-z0-9._-]+)/SKILL\.md"
)


def is_negative_feedback(text: str) -> bool:
    """Whether a (later) user message says the agent's work was wrong."""
    return bool(_NEGATIVE.search(text))


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def is_retry(text: str, earlier: list[str]) -> bool:
    """Whether a later user message asks for the work again (``earlier``: the user messages
    before it)."""
    return _asks_again(text, _words(text), [_words(e) for e in earlier])


def _asks_again(text: str, words: set[str], earlier: list[set[str]]) -> bool:
    if _REASK.search(text):
        return True
    if len(words) < _REPEAT_MIN_WORDS:
        return False
    return any(
        len(other) >= _REPEAT_MIN_WORDS and len(words & other) / len(words | other) >= _REPEAT_SHARE
        for other in earlier
    )


def skill_paths(text: str) -> list[str]:
    """The skill names that paths in ``text`` point into, in order of appearance."""
    return [a or b for a, b in _SKILL_PATH.findall(text) if (a or b) not in (".system", "")]


def _command_text(arguments: Any) -> str:
    if isinstance(arguments, dict):
        cmd = arguments.get("cmd", arguments.get("command", ""))
        return " ".join(map(str, cmd)) if isinstance(cmd, list) else str(cmd)
    return str(arguments)


@dataclass
class _Call:
    call_id: str
    name: str
    arguments: str
    command: str
    after_turn: int
    output: str | None = None
    exit_code: int | None = None
    is_error: bool = False

    @property
    def failed(self) -> bool:
        return self.is_error or (self.exit_code is not None and self.exit_code != 0)


@dataclass
class SessionBuilder:
    """Collects one session's events in order and makes the record (:meth:`finish`)."""

    limits: HarvestLimits
    include_tool_output: bool = False
    turns: list[Turn] = field(default_factory=list)
    _calls: list[_Call] = field(default_factory=list)
    _by_id: dict[str, _Call] = field(default_factory=dict)
    _skills: list[tuple[str, _Call]] = field(default_factory=list)
    _last: str = ""
    _clipped: int = 0

    def _clip(self, text: str, limit: int) -> str:
        if len(text) <= limit:
            return text
        self._clipped += 1
        return f"{text[:limit]} [... {len(text) - limit} more characters cut]"

    def user(self, text: str, at: datetime | None = None) -> None:
        """A message the user typed (the caller has left out what the CLI injected)."""
        if text.strip():
            self.turns.append(Turn(role="user", text=self._clip(text, self.limits.max_text_chars), at=at))
            self._last = "user"

    def assistant(self, text: str, at: datetime | None = None) -> None:
        """The agent's text reply; one right after another (no tool call between) is joined."""
        if not text.strip():
            return
        if self._last == "assistant" and self.turns and self.turns[-1].role == "assistant":
            prev = self.turns.pop()
            text = f"{prev.text}\n\n{text}"
            at = prev.at
        self.turns.append(Turn(role="assistant", text=self._clip(text, self.limits.max_text_chars), at=at))
        self._last = "assistant"

    def tool_call(self, call_id: str, name: str, arguments: Any, *, skill: str = "") -> None:
        """The agent called a tool (``arguments``: a JSON object, or a freeform string;
        ``skill``: the skill it invokes, for a CLI's skill tool)."""
        text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        call = _Call(
            call_id=call_id,
            name=name,
            arguments=self._clip(text, self.limits.max_argument_chars),
            command=_command_text(arguments),
            after_turn=len(self.turns) - 1,
        )
        self._calls.append(call)
        if call_id:
            self._by_id[call_id] = call
        # Each counts once the call is known not to have failed (``_skills_used``).
        self._skills += [(found, call) for found in ([skill] if skill else []) + skill_paths(text)]
        self._last = "tool"

    def tool_result(
        self, call_id: str, output: str, *, is_error: bool = False, exit_code: int | None = None
    ) -> None:
        """A tool call's result (matched to its call by id; a result without one is dropped)."""
        call = self._by_id.get(call_id)
        if call is None:
            return
        call.is_error = call.is_error or is_error
        if exit_code is not None and call.exit_code is None:
            call.exit_code = exit_code
        if self.include_tool_output:
            call.output = self._clip(output, self.limits.max_output_chars)
        if self._calls and self._calls[-1] is call:
            self._last = "tool"

    def exit_code(self, call_id: str, code: int | None) -> None:
        """The exit code the CLI recorded for a call apart from its output (it wins)."""
        call = self._by_id.get(call_id)
        if call is not None and code is not None:
            call.exit_code = code

    def _skills_used(self) -> tuple[str, ...]:
        """Invoked by a skill tool, or named by a path a tool call read, without failing."""
        names: list[str] = []
        for name, call in self._skills:
            if not call.failed and name not in names:
                names.append(name)
        return tuple(names)

    def interrupted(self) -> None:
        """The user stopped the agent mid-turn."""
        self._last = "interrupted"

    def finish(self, *, source: Source, session_id: str, **meta: Any) -> HarvestedSession:
        """The record (not yet redacted): ``meta`` holds the fields the reader knows (path,
        hash, format, cwd, times ...)."""
        outcome = self._outcome()
        turns, turn_map, notes = _keep_ends(self.turns, self.limits.max_turns, "turns")
        calls = [c for c in self._calls if c.after_turn == -1 or c.after_turn in turn_map]
        kept_calls, _, call_notes = _keep_ends(calls, self.limits.max_tool_calls, "tool calls")
        if self._clipped:
            notes.append(f"{self._clipped} texts longer than their cap were cut")
        outcome = outcome.model_copy(
            update={"feedback_turns": tuple(turn_map[i] for i in outcome.feedback_turns if i in turn_map)}
        )
        task = next((t.text for t in self.turns if t.role == "user"), "")
        return HarvestedSession(
            source=source,
            session_id=session_id,
            task=task,
            turns=tuple(turns),
            tool_calls=tuple(_tool_use(c, turn_map) for c in kept_calls),
            skills_used=self._skills_used(),
            outcome=outcome,
            truncated=tuple(notes + call_notes),
            tool_output_included=self.include_tool_output,
            **meta,
        )

    def _outcome(self) -> Outcome:
        users = [(i, t.text) for i, t in enumerate(self.turns) if t.role == "user"]
        feedback = [i for i, text in users[1:] if is_negative_feedback(text)]
        sets = [_words(text) for _, text in users]
        # Compared with the task and the 50 messages before (a long session stays linear).
        retries = sum(
            _asks_again(text, sets[n], sets[:1] + sets[max(1, n - 50) : n])
            for n, (_, text) in enumerate(users)
            if n > 0
        )
        failed = [c for c in self._calls if c.failed]
        reason = ""
        if self._last == "interrupted":
            reason = "the user interrupted the agent"
        elif self._last == "tool" and self._calls and self._calls[-1].failed:
            reason = "ends on a failed tool call"
        elif self._last == "user":
            reason = "ends on a user message with no reply"
        elif not any(t.role == "assistant" for t in self.turns):
            reason = "the agent never replied"
        return Outcome(
            negative_feedback=len(feedback),
            feedback_turns=tuple(feedback),
            retries=retries,
            failed_tool_calls=len(failed),
            failed_tests=sum(bool(_TEST_COMMAND.search(c.command)) for c in failed),
            abandoned=bool(reason),
            abandoned_reason=reason,
        )


def _keep_ends(items: list[Any], cap: int, what: str) -> tuple[list[Any], dict[int, int], list[str]]:
    """The first and last halves of ``items`` when there are more than ``cap``: the kept
    items, old index -> new index, and a note saying what was cut."""
    if len(items) <= cap:
        return list(items), {i: i for i in range(len(items))}, []
    head = cap // 2
    keep = list(range(head)) + list(range(len(items) - (cap - head), len(items)))
    note = f"kept {cap} of {len(items)} {what} (the first {head} and the last {cap - head})"
    return [items[i] for i in keep], {old: new for new, old in enumerate(keep)}, [note]


def _tool_use(call: _Call, turn_map: dict[int, int]) -> ToolUse:
    return ToolUse(
        name=call.name,
        arguments=call.arguments,
        after_turn=turn_map.get(call.after_turn, -1),
        output=call.output,
        exit_code=call.exit_code,
        failed=call.failed,
        is_test=bool(_TEST_COMMAND.search(call.command)),
    )
