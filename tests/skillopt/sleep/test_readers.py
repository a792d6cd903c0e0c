"""Each CLI's reader, on the corpus written in that CLI's real format: what a record holds, and
why a session is skipped."""

from __future__ import annotations

import pytest

from skillopt.sleep.claude_code import read_claude_code
from skillopt.sleep.codex import read_codex
from skillopt.sleep.record import HarvestedSession
from skillopt.sleep.signals import HarvestLimits, Skipped
from skillopt.sleep.sources import SessionFile, file_sha256
from skillopt.testing.sleep_corpus import CLAUDE_VERSION, CODEX_VERSION, write_corpus
from tests.skillopt.sleep.conftest import NOW

NAMES = [
    "cc-skill",
    "cc-correction",
    "cc-abandoned",
    "cc-damaged",
    "cc-future",
    "cc-huge",
    "cx-skill-retry",
    "cx-abandoned",
    "cx-future",
    "cx-legacy",
]


def read(session, **kw) -> HarvestedSession | Skipped:
    st = session.path.stat()
    file = SessionFile(session.source, session.path, st.st_size, st.st_mtime_ns)
    reader = read_claude_code if session.source == "claude-code" else read_codex
    return reader(
        file,
        sha256=file_sha256(session.path),
        limits=kw.get("limits", HarvestLimits()),
        include_tool_output=kw.get("include_tool_output", False),
    )


@pytest.fixture(scope="module")
def module_corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("homes"), now=NOW)


@pytest.mark.parametrize("name", NAMES)
def test_each_session_reads_as_the_corpus_says(module_corpus, name):
    session = module_corpus.session(name)
    want = session.expect
    got = read(session)
    if not want.usable:
        assert isinstance(got, Skipped) and got.reason == want.skip_reason, got
        return
    assert isinstance(got, HarvestedSession), got
    assert got.session_id == session.session_id
    assert got.cwd == session.cwd
    assert got.task.startswith(want.task_start)
    assert got.skills_used == want.skills
    o = got.outcome
    assert (o.negative_feedback, o.retries, o.failed_tool_calls, o.failed_tests, o.abandoned) == (
        want.negative_feedback,
        want.retries,
        want.failed_tool_calls,
        want.failed_tests,
        want.abandoned,
    ), o
    assert o.abandoned == bool(o.abandoned_reason)
    assert got.lines_skipped == want.lines_skipped
    assert bool(got.truncated) == want.truncated
    assert got.ended_at is not None and got.started_at is not None and got.started_at <= got.ended_at
    assert got.sha256 == file_sha256(session.path) and got.size_bytes == session.path.stat().st_size


def test_a_claude_code_record_names_its_format_and_the_turns_in_order(module_corpus):
    got = read(module_corpus.session("cc-correction"))
    assert got.format == "claude-code-jsonl/2" and got.cli_version == CLAUDE_VERSION
    assert [t.role for t in got.turns] == ["user", "assistant", "user", "user", "assistant"]
    # The sub-agent's records (isSidechain) are not the user's conversation.
    assert not any("Sub-agent" in t.text for t in got.turns)
    assert [c.name for c in got.tool_calls] == ["Bash", "Bash", "Bash"]
    first = got.tool_calls[0]
    assert first.failed and first.exit_code == 1 and first.is_test and first.after_turn == 0
    assert got.outcome.feedback_turns == (2,)


def test_a_skill_body_the_cli_injected_is_not_a_user_turn(module_corpus):
    got = read(module_corpus.session("cc-skill"))
    assert [t.role for t in got.turns] == ["user", "assistant"]
    assert got.tool_calls[0].name == "Skill" and got.tool_calls[0].arguments == '{"skill": "frontend-design"}'


def test_a_codex_record_leaves_out_what_the_cli_injected(module_corpus):
    got = read(module_corpus.session("cx-skill-retry"))
    assert got.format == "codex-rollout/envelope" and got.cli_version == CODEX_VERSION
    assert not any("<environment_context>" in t.text or "skills_instructions" in t.text for t in got.turns)
    assert [t.role for t in got.turns] == ["user", "assistant", "user", "user", "assistant"]
    assert [(c.name, c.exit_code, c.failed) for c in got.tool_calls] == [
        ("exec_command", 0, False),
        ("exec_command", 1, True),
        ("exec_command", 0, False),
    ]


def test_tool_outputs_are_dropped_unless_asked_for(module_corpus):
    session = module_corpus.session("cx-skill-retry")
    assert all(c.output is None for c in read(session).tool_calls)
    kept = read(session, include_tool_output=True)
    assert kept.tool_output_included
    # Codex's exec preamble (chunk id, wall time, token count) is not the command's output.
    assert kept.tool_calls[1].output == "FAIL src/notes.test.js\n  expected 3 entries, got 2"


def test_a_huge_session_is_cut_to_the_caps_and_says_so(module_corpus):
    limits = HarvestLimits(max_turns=40, max_text_chars=500)
    got = read(module_corpus.session("cc-huge"), limits=limits)
    assert len(got.turns) == 40
    assert got.turns[0].text.startswith("Walk through every module")  # the first half is kept
    assert got.turns[-1].text == "All modules summarised."  # and the last
    assert len(got.turns[0].text) < 600 and "more characters cut" in got.turns[0].text
    assert any("kept 40 of 602 turns" in note for note in got.truncated)
    assert len(got.task) < 600


def test_unknown_versions_say_what_wrote_them(module_corpus):
    cc = read(module_corpus.session("cc-future"))
    cx = read(module_corpus.session("cx-future"))
    legacy = read(module_corpus.session("cx-legacy"))
    assert "Claude Code 9.0.0" in cc.detail and "upgrade skillopt" in cc.detail
    assert "Codex 9.0.0" in cx.detail
    assert "session_meta" in legacy.detail


def test_a_sub_agent_only_transcript_is_skipped(tmp_path):
    path = tmp_path / "p" / "agent.jsonl"
    path.parent.mkdir()
    rec = '{"type": "user", "isSidechain": true, "version": "2.1.332", "message": {"role": "user", "content": "x"}}\n'
    path.write_text(rec)
    got = read_claude_code(
        SessionFile("claude-code", path, path.stat().st_size, 0),
        sha256="0",
        limits=HarvestLimits(),
        include_tool_output=False,
    )
    assert isinstance(got, Skipped) and got.reason == "sub-agent transcript"
