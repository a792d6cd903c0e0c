"""A small synthetic corpus of agent sessions in Claude Code's and Codex's real on-disk formats.

For the tests of ``skillopt sleep harvest`` (and a later ``--simulate``)::

    corpus = write_corpus(tmp_path)        # tmp_path/claude (CLAUDE_CONFIG_DIR), tmp_path/codex (CODEX_HOME)
    corpus.session("cc-correction").expect.negative_feedback    # 1
    corpus.secrets                         # every secret planted, (kind, text)

The record shapes copy what the real CLIs wrote on 2026-12-07, run on the host against
``skillopt.testing.scripted_server`` (``tests/skillopt/sleep/test_real_clis.py`` does it again):
**Claude Code 2.1.332** (``claude -p``, ``--resume``) and **Codex 0.171.0** (``codex exec``,
``codex exec resume``). The CLI's own noise records are kept in a few of each kind (Claude
Code's ``queue-operation``, ``attachment``, ``api-request``, ``last-prompt``, ``cost-state``;
Codex's developer message, ``<environment_context>``, ``world_state``, ``turn_context``,
``token_usage_record``), so a reader that trips on them fails here first.

The sessions (each one's :class:`Expect` says what a harvest must find):

- ``cc-skill``: a ``Skill`` tool call, passing tests; secrets in the prompt and in a reply.
- ``cc-correction``: a failing pytest, "no, that's wrong", a retry, a sub-agent's records.
- ``cc-abandoned``: ends on a failed command with no reply; a PEM key in a Write call.
- ``cc-damaged``: a corrupt line in the middle and a last line cut off mid-write.
- ``cc-future``: written by a Claude Code major version this reader does not know.
- ``cc-huge``: 300 exchanges and a 12,000-character message (the caps must cut it).
- ``cx-skill-retry``: reads ``.agents/skills/release-notes/SKILL.md``, a failing ``npm
  test``, "that didn't work", "try again", then success.
- ``cx-abandoned``: a failed command, then the user aborts the turn; a random token.
- ``cx-future``: a Codex ``cli_version`` this reader does not know.
- ``cx-legacy``: the rollout layout from before the ``{timestamp, type, payload}`` envelope.

With ``mining=True`` three more sessions give ``skillopt sleep mine`` the kinds the others lack:
``cc-build-retry`` (a ``command`` task), ``cc-file-fix`` (``file``), ``cx-answer`` (``answer``).
"""

from __future__ import annotations

import json
import os
import random
import string
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from skillopt.sleep.sources import claude_slug
from skillopt.testing.fake_secrets import fake

__all__ = [
    "CLAUDE_VERSION",
    "CODEX_VERSION",
    "SECRETS",
    "CorpusSession",
    "Expect",
    "SleepCorpus",
    "grow",
    "write_corpus",
]

CLAUDE_VERSION = "2.1.332"
CODEX_VERSION = "0.171.0"

_RNG_SEED = 20261207
_HIGH_ENTROPY = "".join(random.Random(_RNG_SEED).choices(string.ascii_letters + string.digits, k=40))
_PEM_BODY = "MIIEpAIBAAKCAQEAp1antedKeyMaterialZ0123456789abcdefABCDEFghij"
_PEM = fake("-----BEGIN RSA PRI", "VATE KEY-----\n", _PEM_BODY, "\n-----END RSA PRI", "VATE KEY-----")
_OPENAI = fake("sk-", "proj-Q3tR8vLm2NxWp7Ks9YbZc4Hd6Fj1Ga5E")
_ANTHROPIC = fake("sk-", "ant-api03-Zx8Kq2Lm9Vn4Bt7Rw1Ys6Pd3Hf5Jg0C")
_GITHUB = fake("gh", "p_R4nd0mT0k3nV4lu3F0rT3st1ngAbCdEfGh12")
_GITHUB_PAT = fake("github", "_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz")
_AWS = fake("AK", "IAQ7EXAMPLE4TESTKY")
_SLACK = fake("xo", "xb-2048-4096-Sl4ckT0k3nPl4nt3d")
_JWT = fake(
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9",
    ".eyJzdWIiOiJwbGFudGVkLXVzZXIiLCJpYXQiOjE3MDAwMDAwMDB9.c2lnbmF0dXJlLXBsYW50ZWQtZm9yLXRlc3Q",
)
_BEARER = "tok9f8e7d6c5b4a3928plant"
_PASSWORD = "Sup3rS3cretPlanted!"
_API_KEY = "plantedApiKeyValue77"
_URL_PASSWORD = "Pl4ntedUrlPass"

#: Every secret the corpus plants: (kind, the text that must never reach a harvest's output).
SECRETS: tuple[tuple[str, str], ...] = (
    ("openai_key", _OPENAI),
    ("anthropic_key", _ANTHROPIC),
    ("github_token", _GITHUB),
    ("github_token", _GITHUB_PAT),
    ("aws_access_key", _AWS),
    ("slack_token", _SLACK),
    ("jwt", _JWT),
    ("bearer", _BEARER),
    ("private_key", _PEM_BODY),
    ("secret_assignment", _PASSWORD),
    ("secret_assignment", _API_KEY),
    ("url_credentials", _URL_PASSWORD),
    ("high_entropy", _HIGH_ENTROPY),
)


@dataclass(frozen=True)
class Expect:
    """What a harvest must find in one session (``usable=False``: skipped, for ``skip_reason``)."""

    usable: bool = True
    skip_reason: str = ""
    task_start: str = ""
    skills: tuple[str, ...] = ()
    negative_feedback: int = 0
    retries: int = 0
    failed_tool_calls: int = 0
    failed_tests: int = 0
    abandoned: bool = False
    lines_skipped: int = 0
    truncated: bool = False


@dataclass(frozen=True)
class CorpusSession:
    """One session file of the corpus."""

    name: str
    source: str
    session_id: str
    path: Path
    cwd: str
    ended_at: datetime
    expect: Expect


@dataclass(frozen=True)
class SleepCorpus:
    """The corpus on disk: the two CLI homes and what is in them."""

    claude_dir: Path
    codex_dir: Path
    sessions: tuple[CorpusSession, ...]
    secrets: tuple[tuple[str, str], ...] = SECRETS

    def session(self, name: str) -> CorpusSession:
        return next(s for s in self.sessions if s.name == name)


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


@dataclass
class _Writer:
    """Lines of one transcript and a clock that moves a second per record."""

    session_id: str
    cwd: str
    at: datetime
    rng: random.Random
    lines: list[str] = field(default_factory=list)

    def uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def tick(self) -> str:
        self.at += timedelta(seconds=1)
        return _iso(self.at)

    def put(self, record: dict[str, Any]) -> None:
        self.lines.append(json.dumps(record, ensure_ascii=False))


@dataclass
class _Claude(_Writer):
    """Claude Code records, shaped as 2.1.332 writes them."""

    version: str = CLAUDE_VERSION
    parent: str | None = None
    sidechain: bool = False

    def _rec(self, kind: str, **fields: Any) -> dict[str, Any]:
        me = self.uid()
        rec = {"parentUuid": self.parent, "isSidechain": self.sidechain, "type": kind, **fields}
        rec.update(uuid=me, timestamp=self.tick(), userType="external", entrypoint="sdk-cli")
        rec.update(cwd=self.cwd, sessionId=self.session_id, version=self.version, gitBranch="main")
        self.parent = me
        return rec

    def prompt(self, text: str) -> None:
        at = self.tick()
        self.put(
            {
                "type": "queue-operation",
                "operation": "enqueue",
                "timestamp": at,
                "sessionId": self.session_id,
                "content": text,
            }
        )
        self.put(
            {"type": "queue-operation", "operation": "dequeue", "timestamp": at, "sessionId": self.session_id}
        )
        self.put(
            self._rec(
                "user",
                promptId=self.uid(),
                message={"role": "user", "content": text},
                permissionMode="default",
            )
        )
        env = {
            "type": "environment",
            "snapshot": {"workingDirectory": self.cwd, "isGitRepo": True, "platform": "linux"},
        }
        self.put(
            self._rec(
                "attachment",
                attachment=env,
                rendered=[{"content": "<system-reminder>\n# Environment\n</system-reminder>"}],
            )
        )

    def tool(self, name: str, args: dict[str, Any], result: str, *, error: bool = False) -> str:
        call = f"toolu_{self.rng.getrandbits(96):024x}"
        block = {"type": "tool_use", "id": call, "name": name, "input": args}
        msg = {
            "id": f"msg_{self.rng.getrandbits(96):024x}",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-6",
        }
        self.put(
            self._rec(
                "assistant", message={**msg, "content": [block], "stop_reason": "tool_use"}, requestId="req_1"
            )
        )
        out: dict[str, Any] = {"type": "tool_result", "tool_use_id": call, "content": result}
        if error:
            out["is_error"] = True
        use = f"Error: {result}" if error else {"stdout": result, "stderr": "", "interrupted": False}
        self.put(
            self._rec(
                "user",
                message={"role": "user", "content": [out]},
                toolUseResult=use,
                sourceToolAssistantUUID=self.parent,
            )
        )
        self.put({"type": "tools-used", "tools": [name], "sessionId": self.session_id})
        return call

    def skill(self, name: str, body: str) -> None:
        call = self.tool("Skill", {"skill": name}, f"Launching skill: {name}")
        text = f"Base directory for this skill: {self.cwd}/.claude/skills/{name}\n\n{body}"
        meta = {"role": "user", "content": [{"type": "text", "text": text}]}
        self.put(self._rec("user", message=meta, isMeta=True, sourceToolUseID=call))

    def reply(self, text: str) -> None:
        msg = {
            "id": f"msg_{self.rng.getrandbits(96):024x}",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-6",
        }
        self.put(
            self._rec(
                "assistant",
                message={**msg, "content": [{"type": "text", "text": text}], "stop_reason": "end_turn"},
            )
        )
        self.put(
            {
                "type": "last-prompt",
                "lastPrompt": "...",
                "leafUuid": self.parent,
                "sessionId": self.session_id,
            }
        )

    def close(self) -> None:
        self.put(
            {
                "type": "cost-state",
                "sessionId": self.session_id,
                "totalCostUSD": 0.04,
                "startTime": 1796684189046,
            }
        )


@dataclass
class _Codex(_Writer):
    """Codex rollout lines, shaped as 0.171.0 writes them."""

    version: str = CODEX_VERSION

    def put_item(self, kind: str, payload: dict[str, Any]) -> None:
        self.put({"timestamp": self.tick(), "ordinal": len(self.lines), "type": kind, "payload": payload})

    def start(self) -> None:
        meta: dict[str, Any] = {
            "session_id": self.session_id,
            "id": self.session_id,
            "timestamp": _iso(self.at),
            "cwd": self.cwd,
        }
        meta.update(originator="codex_exec", cli_version=self.version, source="exec", model_provider="openai")
        meta["base_instructions"] = {"text": "You are Codex, a coding agent based on GPT-5."}
        self.put_item("session_meta", meta)
        dev = [{"type": "input_text", "text": "<skills_instructions>\n## Skills\n</skills_instructions>"}]
        self.put_item("response_item", {"type": "message", "role": "developer", "content": dev})
        env = f"<environment_context>\n  <cwd>{self.cwd}</cwd>\n  <shell>bash</shell>\n</environment_context>"
        self.put_item(
            "response_item",
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": env}]},
        )
        self.put_item("world_state", {"full": True, "state": {"model": "gpt-5.5"}})

    def prompt(self, text: str) -> None:
        turn = self.uid()
        self.put_item("event_msg", {"type": "task_started", "turn_id": turn, "model_context_window": 258400})
        self.put_item(
            "turn_context", {"turn_id": turn, "cwd": self.cwd, "approval_policy": "never", "model": "gpt-5.5"}
        )
        self.put_item(
            "response_item",
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]},
        )
        item = {
            "type": "UserMessage",
            "id": self.uid(),
            "content": [{"type": "text", "text": text, "text_elements": []}],
        }
        self.put_item("event_msg", {"type": "item_completed", "thread_id": self.session_id, "item": item})

    def exec(self, cmd: str, code: int, output: str) -> None:
        call = f"call_{self.rng.getrandbits(96):024x}"
        args = json.dumps({"cmd": cmd})
        self.put_item(
            "response_item",
            {
                "type": "function_call",
                "status": "completed",
                "name": "exec_command",
                "arguments": args,
                "call_id": call,
            },
        )
        self.put_item(
            "token_usage_record",
            {"session_id": self.session_id, "usage": {"input_tokens": 6745, "output_tokens": 11}},
        )
        item: dict[str, Any] = {
            "type": "CommandExecution",
            "id": call,
            "command": ["/usr/bin/bash", "-lc", cmd],
            "aggregated_output": output,
        }
        item.update(status="completed" if code == 0 else "failed", exit_code=code)
        self.put_item("event_msg", {"type": "item_completed", "thread_id": self.session_id, "item": item})
        text = f"Chunk ID: 3718d8\nWall time: 0.3588 seconds\nProcess exited with code {code}\nOriginal token count: 15\nOutput:\n{output}"
        self.put_item("response_item", {"type": "function_call_output", "call_id": call, "output": text})

    def reply(self, text: str) -> None:
        item = {"type": "AgentMessage", "id": self.uid(), "content": [{"type": "Text", "text": text}]}
        self.put_item("event_msg", {"type": "item_completed", "thread_id": self.session_id, "item": item})
        content = [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
        self.put_item(
            "response_item",
            {"type": "message", "status": "completed", "role": "assistant", "content": content},
        )
        self.put_item("event_msg", {"type": "task_complete", "last_agent_message": text, "duration_ms": 1723})


def _claude_sessions(w: dict[str, _Claude]) -> Iterator[tuple[str, Expect]]:
    c = w["cc-skill"]
    c.prompt(f"Add a dark mode toggle to the settings page. My OpenAI key is {_OPENAI}")
    c.skill("frontend-design", "# Frontend design\nUse CSS variables for themes.\n")
    c.tool("Bash", {"command": "npm test", "description": "Run tests"}, "Tests: 12 passed")
    c.reply(f"Done: the toggle is in Settings and the tests pass. (Use the key {_ANTHROPIC} for prod.)")
    c.close()
    yield "cc-skill", Expect(task_start="Add a dark mode toggle", skills=("frontend-design",))

    c = w["cc-correction"]
    c.prompt("Fix the failing login test in tests/test_login.py")
    c.tool(
        "Bash",
        {"command": "pytest tests/test_login.py"},
        "Exit code 1\nFAILED tests/test_login.py::test_login - AssertionError",
        error=True,
    )
    c.reply("Fixed the login handler; the test should pass now.")
    c.prompt("no, that's wrong, the login test is still failing")
    c.prompt("Please try again: fix the failing login test")
    c.sidechain = True  # a sub-agent's turns, in the same file: not the user's conversation
    c.prompt("Sub-agent: search for login handlers")
    c.reply("Found auth/login.py")
    c.sidechain = False
    c.tool(
        "Bash",
        {
            "command": f"export GITHUB_TOKEN={_GITHUB} && curl -H 'Authorization: Bearer {_BEARER}' https://api.example.com"
        },
        f"AWS key in env: {_AWS}",
    )
    c.tool("Bash", {"command": "pytest tests/test_login.py"}, "1 passed")
    c.reply(f"Now it passes. The session token was {_JWT}.")
    c.close()
    yield (
        "cc-correction",
        Expect(
            task_start="Fix the failing login test",
            negative_feedback=1,
            retries=1,
            failed_tool_calls=1,
            failed_tests=1,
        ),
    )

    c = w["cc-abandoned"]
    c.prompt(
        f'Deploy the service; the db password="{_PASSWORD}" and clone https://deploy:{_URL_PASSWORD}@git.example.com/repo.git'
    )
    c.tool("Write", {"file_path": f"{c.cwd}/deploy/key.pem", "content": _PEM}, "File created successfully")
    c.tool("Bash", {"command": "./deploy.sh"}, "Exit code 127\n./deploy.sh: not found", error=True)
    yield "cc-abandoned", Expect(task_start="Deploy the service", failed_tool_calls=1, abandoned=True)

    c = w["cc-damaged"]
    c.prompt("Rename the config module")
    c.lines.append('{"type": "user", "message": {"role": "user", "content": "oops" ')  # corrupt
    c.tool("Bash", {"command": "git mv config.py settings.py"}, "")
    c.reply("Renamed config.py to settings.py.")
    c.prompt("thanks, now update the imports")
    c.lines.append(
        json.dumps({"type": "assistant", "message": {"content": [{"type": "text", "text": "Updating"}]}})[:40]
    )
    yield "cc-damaged", Expect(task_start="Rename the config module", lines_skipped=2, abandoned=True)

    c = w["cc-future"]
    c.version = "9.0.0"
    c.prompt("Refactor the parser")
    c.reply("Done.")
    yield "cc-future", Expect(usable=False, skip_reason="unknown format version")

    c = w["cc-huge"]
    c.prompt(
        "Walk through every module and summarise it. " + "Context: " + "lorem ipsum dolor sit amet " * 450
    )
    for i in range(300):
        c.reply(f"Module {i}: summarised.")
        c.prompt(f"continue with module {i + 1}")
    c.reply("All modules summarised.")
    yield "cc-huge", Expect(task_start="Walk through every module", truncated=True)


def _codex_sessions(w: dict[str, _Codex]) -> Iterator[tuple[str, Expect]]:
    c = w["cx-skill-retry"]
    c.start()
    c.prompt(f"Write the release notes for v2.3 and run the tests. Slack: {_SLACK}")
    c.exec("cat .agents/skills/release-notes/SKILL.md", 0, "---\nname: release-notes\n---\n# Release notes\n")
    c.exec("npm test", 1, "FAIL src/notes.test.js\n  expected 3 entries, got 2")
    c.reply("Release notes written in CHANGELOG.md.")
    c.prompt("that didn't work, the notes test is still failing")
    c.prompt("try again and run npm test until it passes")
    c.exec(f"GITHUB_TOKEN={_GITHUB_PAT} npm test", 0, "Tests: 3 passed")
    c.reply(f"Fixed: all 3 tests pass. api_key: {_API_KEY}")
    yield (
        "cx-skill-retry",
        Expect(
            task_start="Write the release notes",
            skills=("release-notes",),
            negative_feedback=1,
            retries=1,
            failed_tool_calls=1,
            failed_tests=1,
        ),
    )

    c = w["cx-abandoned"]
    c.start()
    c.prompt(f"Migrate the database. Use the service token {_HIGH_ENTROPY} for staging.")
    c.exec("alembic upgrade head", 2, "ERROR: relation users does not exist")
    c.put_item("event_msg", {"type": "turn_aborted", "reason": "interrupted"})
    yield "cx-abandoned", Expect(task_start="Migrate the database", failed_tool_calls=1, abandoned=True)

    c = w["cx-future"]
    c.version = "9.0.0"
    c.start()
    c.prompt("Add logging")
    c.reply("Done.")
    yield "cx-future", Expect(usable=False, skip_reason="unknown format version")

    c = w["cx-legacy"]
    c.put({"id": c.session_id, "timestamp": _iso(c.at), "instructions": None})
    c.put({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Add a README"}]})
    c.put({"record_type": "state"})
    yield "cx-legacy", Expect(usable=False, skip_reason="unknown format version")


#: Each session: its source, folder, and days before ``now`` that it ended.
_LAYOUT = {
    "cc-skill": ("claude-code", "/home/dev/webapp", 1),
    "cc-correction": ("claude-code", "/home/dev/api", 2),
    "cc-abandoned": ("claude-code", "/home/dev/infra", 12),
    "cc-damaged": ("claude-code", "/home/dev/webapp/backend", 3),
    "cc-future": ("claude-code", "/home/dev/api", 1),
    "cc-huge": ("claude-code", "/home/dev/docs", 4),
    "cx-skill-retry": ("codex", "/home/dev/webapp", 1),
    "cx-abandoned": ("codex", "/home/dev/api", 20),
    "cx-future": ("codex", "/home/dev/webapp", 2),
    "cx-legacy": ("codex", "/home/dev/old", 30),
}


def _mining_sessions(cc: dict[str, _Claude], x: _Codex) -> Iterator[tuple[str, Expect]]:
    c = cc["cc-build-retry"]
    c.prompt("The release build is broken: make build.sh work")
    broken = f"#!/bin/sh\nexport GITHUB_TOKEN={_GITHUB}\necho building\nexit 1\n"
    c.tool("Write", {"file_path": f"{c.cwd}/build.sh", "content": broken}, "File created successfully")
    c.tool("Bash", {"command": "sh build.sh"}, "Exit code 1\nbuilding", error=True)
    fixed = "#!/bin/sh\necho building\n"
    c.tool("Write", {"file_path": f"{c.cwd}/build.sh", "content": fixed}, "File updated")
    c.tool("Bash", {"command": "sh build.sh"}, "building")
    c.reply("Fixed: build.sh no longer exits 1.")
    c.close()
    yield "cc-build-retry", Expect(task_start="The release build is broken", failed_tool_calls=1)

    c = cc["cc-file-fix"]
    c.prompt("Write a .gitignore for this Python project that ignores build outputs")
    c.tool("Write", {"file_path": f"{c.cwd}/.gitignore", "content": "build/\n"}, "File created successfully")
    c.reply("Added .gitignore with build/.")
    c.prompt("no, that's wrong, it must also ignore dist/ and *.pyc files")
    c.tool("Write", {"file_path": f"{c.cwd}/.gitignore", "content": "build/\ndist/\n*.pyc\n"}, "File updated")
    c.reply("Updated .gitignore: build/, dist/ and *.pyc.")
    c.prompt("perfect, thanks")
    c.close()
    yield "cc-file-fix", Expect(task_start="Write a .gitignore", negative_feedback=1, abandoned=True)

    x.start()
    x.prompt("What port does the dev server listen on? It is set in config/dev.toml")
    x.exec("cat config/dev.toml", 0, "[server]\nport = 3000\n[metrics]\nport = 8080\n")
    x.reply("It listens on 8080.")
    x.prompt("no, that's wrong, 8080 is the metrics port; I asked about the server")
    x.reply("You're right, the [server] section sets it.\n<answer>3000</answer>")
    x.prompt("thanks, that's right")
    yield "cx-answer", Expect(task_start="What port does the dev server", negative_feedback=1, abandoned=True)


_MINING_LAYOUT = {
    "cc-build-retry": ("claude-code", "/home/dev/release", 2),
    "cc-file-fix": ("claude-code", "/home/dev/pyproj", 3),
    "cx-answer": ("codex", "/home/dev/server", 1),
}


def write_corpus(root: Path, *, now: datetime | None = None, mining: bool = False) -> SleepCorpus:
    """Write the corpus under ``root`` (``claude/`` and ``codex/``, the two CLI homes) and
    return what is in it. Each file's modification time is its session's last timestamp.
    ``mining`` adds the sessions that give ``skillopt sleep mine`` one task of each kind."""
    now = now or datetime.now(UTC)
    rng = random.Random(_RNG_SEED)
    writers: dict[str, _Writer] = {}
    layout = _LAYOUT | (_MINING_LAYOUT if mining else {})
    for name, (source, cwd, days) in layout.items():
        start = now - timedelta(days=days, hours=1)
        sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        writers[name] = (_Claude if source == "claude-code" else _Codex)(
            session_id=sid, cwd=cwd, at=start, rng=rng
        )
    claude = {k: w for k, w in writers.items() if isinstance(w, _Claude)}
    codex = {k: w for k, w in writers.items() if isinstance(w, _Codex)}
    expects = dict(_claude_sessions(claude)) | dict(_codex_sessions(codex))
    if mining:
        expects |= dict(_mining_sessions(claude, codex["cx-answer"]))
    sessions = []
    for name, w in writers.items():
        source, cwd, _ = layout[name]
        if source == "claude-code":
            path = root / "claude" / "projects" / claude_slug(cwd) / f"{w.session_id}.jsonl"
        else:
            day = w.at.strftime("%Y/%m/%d")
            path = (
                root / "codex" / "sessions" / day / f"rollout-{w.at:%Y-%m-%dT%H-%M-%S}-{w.session_id}.jsonl"
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        cut = name == "cc-damaged"  # its last line was cut off mid-write: no newline after it
        path.write_text("\n".join(w.lines) + ("" if cut else "\n"), encoding="utf-8")
        os.utime(path, (w.at.timestamp(), w.at.timestamp()))
        sessions.append(CorpusSession(name, source, w.session_id, path, cwd, w.at, expects[name]))
    return SleepCorpus(claude_dir=root / "claude", codex_dir=root / "codex", sessions=tuple(sessions))


def grow(session: CorpusSession, user: str, reply: str) -> None:
    """Append one exchange to a session's file, as its CLI does when the session is resumed
    (``claude --resume``, ``codex exec resume``): the file grows, its hash changes."""
    at = session.ended_at + timedelta(minutes=5)
    rng = random.Random(len(user) + len(reply))
    kind = _Claude if session.source == "claude-code" else _Codex
    w = kind(session_id=session.session_id, cwd=session.cwd, at=at, rng=rng)
    w.prompt(user)
    w.reply(reply)
    with session.path.open("a", encoding="utf-8") as fh:
        fh.write("\n".join(w.lines) + "\n")
