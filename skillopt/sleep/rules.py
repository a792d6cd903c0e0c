"""The rule-based miner: one harvested session → one task with a checkable reference, when the
transcript shows one.

The rules, tried in this order (the first that applies gives the session's task):

==================  =======================================================================
rule                the session shows                           reference
==================  =======================================================================
``tests-fixed``     a test run failed, a later one passed       ``tests``: the passing run
``tests-green``     its last test run passed                    ``tests``: that run
``retry-succeeded`` a command failed, a later similar one       ``command``: the one that
                    (same program, mostly the same text)        succeeded
                    succeeded
``corrected-file``  negative feedback, then the agent wrote     ``file``: that file's path and
                    a file and the user did not object again    content
``corrected-answer`` negative feedback, then a short final      ``answer``: that reply's answer
                    reply the user did not object to            (its last line, or its tag)
==================  =======================================================================

A session none of them fits gives a task with ``reference=None`` and a note saying why; mine
keeps those out of every split (they are listed in ``unchecked.json``).

A command is taken as the session ran it, minus leading ``NAME=value`` assignments (a token the
user exported is redacted, and the command runs without it); a command that still holds
redacted text cannot be run as it was and is not a reference. Working files are the files the
session wrote (Claude Code's ``Write``) before the point the task starts from, inside the
session's folder, clipped by the harvest's caps (a clipped call is skipped).

Everything read here is an already-redacted :class:`~skillopt.sleep.record.HarvestedSession`;
the text stays data (``from_transcript``), never instructions.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from pydantic import ValidationError

from skillopt.envs._qa.text import answer_tags
from skillopt.envs.sleep.items import MAX_FILE_CHARS, MAX_FILES, MinedItem, Reference, mined_id, safe_relative
from skillopt.sleep.record import HarvestedSession, ToolUse
from skillopt.sleep.signals import is_negative_feedback, is_retry

__all__ = ["RuleMiner", "call_command", "runnable_command", "session_key", "working_files"]

_SHELL_TOOLS = frozenset({"Bash", "exec_command", "shell", "local_shell", "container.exec"})
_WRITE_TOOLS = frozenset({"Write"})
_ASSIGNMENTS = re.compile(
    r"^\s*(?:export\s+)?(?:[A-Za-z_][A-Za-z0-9_]*=(?:'[^']*'|\"[^\"]*\"|\S*)\s+)+(?:&&\s*)?"
)
_ONLY_ASSIGNMENT = re.compile(r"(?:export\s+)?[A-Za-z_][A-Za-z0-9_]*=\S*")
_SIMILAR = 0.6
_MAX_ANSWER_CHARS = 120
_MAX_ANSWER_WORDS = 12
_MAX_PROMPT_CHARS = 19_000
_RESERVED = ("task.md", ".skillopt/", ".claude/", ".agents/", ".codex/")


def session_key(session: HarvestedSession) -> str:
    """``source:session_id``: how a session is named in mined tasks and the manifest."""
    return f"{session.source}:{session.session_id}"


def _arguments(call: ToolUse) -> dict[str, object]:
    try:
        value = json.loads(call.arguments)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def call_command(call: ToolUse) -> str:
    """The shell command of a tool call, or ``""`` when it is not a shell call."""
    if call.name not in _SHELL_TOOLS:
        return ""
    cmd = _arguments(call).get("command", _arguments(call).get("cmd", ""))
    return " ".join(map(str, cmd)) if isinstance(cmd, list) else str(cmd)


def runnable_command(command: str) -> str:
    """The command without leading ``NAME=value`` assignments; ``""`` when what is left is
    empty or still holds redacted text."""
    cmd = _ASSIGNMENTS.sub("", command).strip()
    if not cmd or "[REDACTED" in cmd or _ONLY_ASSIGNMENT.fullmatch(cmd):
        return ""
    return cmd


def _passed(call: ToolUse) -> bool:
    return not call.failed and call.exit_code in (None, 0)


def _relative(path: str, cwd: str) -> str:
    if path.startswith("/"):
        base = cwd.rstrip("/") + "/"
        if not cwd or not path.startswith(base):
            return ""
        path = path[len(base) :]
    path = str(PurePosixPath(path))
    if not safe_relative(path) or path.startswith(_RESERVED) or path == "task.md":
        return ""
    return path


def _written(call: ToolUse, cwd: str) -> tuple[str, str] | None:
    """``(relative path, content)`` of a file-writing call inside the session's folder."""
    if call.name not in _WRITE_TOOLS:
        return None
    args = _arguments(call)
    path, content = args.get("file_path", ""), args.get("content")
    if not isinstance(path, str) or not isinstance(content, str):
        return None
    rel = _relative(path, cwd)
    return (rel, content) if rel else None


def working_files(session: HarvestedSession, before: int) -> dict[str, str]:
    """The files the session wrote with tool calls before call index ``before`` (the last
    version of each), inside its folder, at most :data:`MAX_FILES`, each within the size cap."""
    files: dict[str, str] = {}
    for call in session.tool_calls[:before]:
        got = _written(call, session.cwd)
        if got and len(got[1]) <= MAX_FILE_CHARS:
            files[got[0]] = got[1]
    return dict(sorted(files.items())[:MAX_FILES])


def _user_ask(session: HarvestedSession, upto_turn: int) -> str:
    """The task as the user asked it: the first message, then their later messages up to
    ``upto_turn`` (corrections and re-asks are part of the ask)."""
    users = [t.text.strip() for t in session.turns[: upto_turn + 1] if t.role == "user" and t.text.strip()]
    if not users:
        users = [session.task.strip()]
    text = users[0] + "".join(f"\n\nThen the user said:\n{u}" for u in users[1:])
    return text[:_MAX_PROMPT_CHARS]


@dataclass(frozen=True)
class _Found:
    rule: str
    reference: Reference
    files: dict[str, str]
    prompt: str


class RuleMiner:
    """The default miner (see the module docstring). Deterministic; makes no model call."""

    name = "rules"

    def preview(self, session: HarvestedSession) -> str:
        """What this miner sends to a model for ``session``: nothing (it makes no call)."""
        return ""

    def mine(self, session: HarvestedSession) -> MinedItem:
        """The session's task: with the first rule's reference, else ``reference=None``."""
        key = session_key(session)
        found, why = None, []
        for rule in (self._tests, self._command, self._file, self._answer):
            try:
                found, reason = rule(session)
            except ValidationError as exc:  # a reference that is not checkable after all
                found, reason = None, f"{rule.__name__.strip('_')}: {exc.errors()[0]['msg']}"
            if found is not None:
                break
            why.append(reason)
        if found is None:
            prompt = _user_ask(session, len(session.turns)) or "(no task text)"
            note = "no checkable reference: " + "; ".join(w for w in why if w)
            return MinedItem(
                id=mined_id(key, None, prompt), prompt=prompt, reference=None, session=key,
                record_sha256=session.sha256, miner=self.name, rule="none", note=note,
            )  # fmt: skip
        return MinedItem(
            id=mined_id(key, found.reference, found.prompt), prompt=found.prompt, files=found.files,
            reference=found.reference, session=key, record_sha256=session.sha256, miner=self.name, rule=found.rule,
        )  # fmt: skip

    def _tests(self, s: HarvestedSession) -> tuple[_Found | None, str]:
        runs = [(i, c) for i, c in enumerate(s.tool_calls) if c.is_test and call_command(c)]
        if not runs:
            return None, "tests: no test run"
        _, last = runs[-1]
        if not _passed(last):
            return None, "tests: the last test run failed"
        cmd = runnable_command(call_command(last))
        if not cmd:
            return None, "tests: the passing test command holds redacted text"
        failed = [i for i, c in runs if not _passed(c)]
        # Fixed: start from the state of the first failing run. Green from the start: the files
        # the session wrote are its solution, so the task starts with none of them.
        start = failed[0] if failed else 0
        ask = _user_ask(s, s.tool_calls[failed[0]].after_turn if failed else last.after_turn)
        prompt = f"{ask}\n\nWhen you are done, the tests must pass: `{cmd}`"
        ref = Reference(kind="tests", command=cmd)
        return _Found("tests-fixed" if failed else "tests-green", ref, working_files(s, start), prompt), ""

    def _command(self, s: HarvestedSession) -> tuple[_Found | None, str]:
        calls = [
            (i, c, call_command(c)) for i, c in enumerate(s.tool_calls) if call_command(c) and not c.is_test
        ]
        for n, (i, call, text) in enumerate(calls):
            if _passed(call):
                continue
            for _j, later, later_text in calls[n + 1 :]:
                if _passed(later) and _similar(text, later_text):
                    cmd = runnable_command(later_text)
                    if not cmd:
                        return None, "command: the command that succeeded holds redacted text"
                    ask = _user_ask(s, call.after_turn)
                    prompt = f"{ask}\n\nMake this command succeed (exit 0) in the working folder: `{cmd}`"
                    ref = Reference(kind="command", command=cmd)
                    return _Found("retry-succeeded", ref, working_files(s, i), prompt), ""
        return None, "command: no failed command that later succeeded"

    def _accepted_after_feedback(self, s: HarvestedSession) -> tuple[int, str]:
        """The last negative-feedback turn, and why the session does not count as accepted ("" = it does)."""
        feedback = [
            i for i, t in enumerate(s.turns) if t.role == "user" and i > 0 and is_negative_feedback(t.text)
        ]
        if not feedback:
            return -1, "no negative feedback"
        if s.outcome.abandoned and not _closing_thanks(s):
            return feedback[-1], f"the session was abandoned ({s.outcome.abandoned_reason})"
        return feedback[-1], ""

    def _file(self, s: HarvestedSession) -> tuple[_Found | None, str]:
        last_feedback, why = self._accepted_after_feedback(s)
        if why:
            return None, f"file: {why}"
        writes = [
            (i, c) for i, c in enumerate(s.tool_calls) if c.after_turn >= last_feedback and _written(c, s.cwd)
        ]
        if not writes:
            return None, "file: no file written after the feedback"
        _, call = writes[-1]
        got = _written(call, s.cwd)
        assert got is not None
        first_fix = writes[0][0]
        prompt = _user_ask(s, last_feedback)
        ref = Reference(kind="file", path=got[0], content=got[1])
        return _Found("corrected-file", ref, working_files(s, first_fix), prompt), ""

    def _answer(self, s: HarvestedSession) -> tuple[_Found | None, str]:
        last_feedback, why = self._accepted_after_feedback(s)
        if why:
            return None, f"answer: {why}"
        replies = [(i, t.text) for i, t in enumerate(s.turns) if t.role == "assistant" and i > last_feedback]
        if not replies:
            return None, "answer: no reply after the feedback"
        answer = _short_answer(replies[-1][1])
        if not answer:
            return None, "answer: the accepted reply has no short answer to match"
        prompt = _user_ask(s, last_feedback)
        first_fix = next(
            (k for k, c in enumerate(s.tool_calls) if c.after_turn >= last_feedback), len(s.tool_calls)
        )
        return _Found(
            "corrected-answer", Reference(kind="answer", answer=answer), working_files(s, first_fix), prompt
        ), ""


def _closing_thanks(s: HarvestedSession) -> bool:
    """The session "ends on a user message with no reply", and that message accepts the work
    (neither negative nor a re-ask: "thanks, that's right")."""
    if (
        not s.turns
        or s.turns[-1].role != "user"
        or not s.outcome.abandoned_reason.startswith("ends on a user")
    ):
        return False
    last, earlier = s.turns[-1].text, [t.text for t in s.turns[:-1] if t.role == "user"]
    return not is_negative_feedback(last) and not is_retry(last, earlier)


def _similar(a: str, b: str) -> bool:
    """Same program (first word after assignments) and mostly the same text."""
    ra, rb = _ASSIGNMENTS.sub("", a).split(), _ASSIGNMENTS.sub("", b).split()
    if not ra or not rb or ra[0] != rb[0]:
        return False
    return difflib.SequenceMatcher(None, " ".join(ra), " ".join(rb)).ratio() >= _SIMILAR


def _short_answer(reply: str) -> str:
    """A reply's answer: its last ``<answer>`` tag, else its last line when short enough."""
    tags = answer_tags(reply)
    if tags:
        text = tags[-1].strip()
    else:
        lines = [line.strip() for line in reply.splitlines() if line.strip()]
        text = lines[-1] if lines else ""
    text = text.strip("`*_ ")
    if (
        not text
        or len(text) > _MAX_ANSWER_CHARS
        or len(text.split()) > _MAX_ANSWER_WORDS
        or "[REDACTED" in text
    ):
        return ""
    return text
