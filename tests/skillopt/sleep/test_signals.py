"""The outcome rules shared by both readers: negative feedback, retries, failures, abandonment,
skills, and the size caps."""

from __future__ import annotations

import pytest

from skillopt.sleep.signals import HarvestLimits, SessionBuilder, is_negative_feedback, is_retry, skill_paths


@pytest.mark.parametrize(
    "text",
    [
        "no, that's wrong",
        "No. Use the other file",
        "nope",
        "that didn't work",
        "It doesn't work on Safari",
        "the tests are still failing",
        "still broken after your change",
        "this is wrong: the header moved",
        "you broke the build",
        "not what I asked for",
        "please revert that",
    ],
)
def test_negative_feedback_is_recognised(text):
    assert is_negative_feedback(text)


@pytest.mark.parametrize(
    "text",
    [
        "now add a test for it",
        "notice the header",
        "nothing else, thanks",
        "looks good, ship it",
        "know what? great",
    ],
)
def test_ordinary_follow_ups_are_not_negative(text):
    assert not is_negative_feedback(text)


def test_a_retry_asks_again_or_repeats_the_request():
    task = "fix the failing login test in tests/test_login.py"
    assert is_retry("try again please", [task])
    assert is_retry("fix the failing login test in test_login.py", [task])
    assert not is_retry("now add a logout button", [task])
    assert not is_retry("continue with module 5", ["continue with module 4"])


def test_skill_paths_name_the_skill_folder():
    text = "cat .agents/skills/release-notes/SKILL.md; cat ~/.codex/skills/.system/imagegen/SKILL.md"
    assert skill_paths(text) == ["release-notes", "imagegen"]
    assert skill_paths("sed -n 1,5p .claude/skills/pdf/reference.md") == ["pdf"]
    assert skill_paths("ls skills/") == []


def builder(**kw) -> SessionBuilder:
    return SessionBuilder(limits=HarvestLimits(**kw))


def finish(b: SessionBuilder):
    return b.finish(source="codex", session_id="s", source_path="/x", sha256="0", size_bytes=1, format="f")


def test_a_session_ending_on_a_failed_command_is_abandoned():
    b = builder()
    b.user("deploy it")
    b.tool_call("c1", "exec_command", {"cmd": "./deploy.sh"})
    b.tool_result("c1", "Process exited with code 127", exit_code=127)
    o = finish(b).outcome
    assert o.abandoned and o.abandoned_reason == "ends on a failed tool call" and o.failed_tool_calls == 1


def test_a_failure_the_agent_recovered_from_is_not_abandonment():
    b = builder()
    b.user("run the tests")
    b.tool_call("c1", "exec_command", {"cmd": "pytest -x"})
    b.exit_code("c1", 1)  # the CLI's own record of the exit code wins over the output's
    b.tool_result("c1", "Process exited with code 0", exit_code=0)
    b.assistant("Two tests fail; fixed them.")
    s = finish(b)
    assert not s.outcome.abandoned
    assert (s.outcome.failed_tool_calls, s.outcome.failed_tests) == (1, 1)
    assert s.tool_calls[0].exit_code == 1


def test_an_interrupted_or_unanswered_session_is_abandoned():
    b = builder()
    b.user("refactor")
    b.assistant("On it")
    b.interrupted()
    assert finish(b).outcome.abandoned_reason == "the user interrupted the agent"
    b = builder()
    b.user("refactor")
    b.assistant("Done")
    b.user("and the docs?")
    assert finish(b).outcome.abandoned_reason == "ends on a user message with no reply"


def test_a_skill_read_or_invoked_by_a_call_that_failed_is_not_a_skill_used():
    b = builder()
    b.user("x")
    b.tool_call("c1", "exec_command", {"cmd": "cat .agents/skills/missing/SKILL.md"})
    b.tool_result("c1", "No such file", exit_code=1)
    b.tool_call("c2", "exec_command", {"cmd": "cat .agents/skills/found/SKILL.md"})
    b.tool_result("c2", "# Found", exit_code=0)
    b.tool_call("c3", "Skill", {"skill": "unknown"}, skill="unknown")
    b.tool_result("c3", "Unknown skill: unknown", is_error=True)
    b.tool_call("c4", "Skill", {"skill": "found"}, skill="found")
    b.assistant("done")
    assert finish(b).skills_used == ("found",)


def test_back_to_back_assistant_texts_are_one_turn():
    b = builder()
    b.user("x")
    b.assistant("first part")
    b.assistant("second part")
    assert [t.text for t in finish(b).turns] == ["x", "first part\n\nsecond part"]


def test_the_caps_keep_both_ends_and_remap_tool_calls_and_feedback():
    b = builder(max_turns=4, max_tool_calls=2)
    b.user("task")
    for i in range(5):
        b.tool_call(f"c{i}", "exec_command", {"cmd": f"step {i}"})
        b.tool_result(f"c{i}", "", exit_code=0)
        b.assistant(f"reply {i}")
        b.user("no, that's wrong" if i == 4 else f"go on {i}")
    b.assistant("end")
    s = finish(b)
    assert [t.text for t in s.turns] == ["task", "reply 0", "no, that's wrong", "end"]
    assert s.outcome.negative_feedback == 1 and s.outcome.feedback_turns == (2,)
    # A call whose turn before it was cut goes with it.
    assert [(c.arguments, c.after_turn) for c in s.tool_calls] == [('{"cmd": "step 0"}', 0)]
    assert s.truncated == ("kept 4 of 12 turns (the first 2 and the last 2)",)


def test_the_tool_call_cap_keeps_the_first_and_last_calls():
    b = builder(max_tool_calls=2)
    b.user("task")
    for i in range(5):
        b.tool_call(f"c{i}", "exec_command", {"cmd": f"step {i}"})
    s = finish(b)
    assert [c.arguments for c in s.tool_calls] == ['{"cmd": "step 0"}', '{"cmd": "step 4"}']
    assert s.truncated == ("kept 2 of 5 tool calls (the first 1 and the last 1)",)


def test_limits_refuse_a_cap_below_two():
    with pytest.raises(ValueError, match="max_turns"):
        HarvestLimits(max_turns=1)
