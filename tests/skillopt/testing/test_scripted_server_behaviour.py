"""Scripted model server: errors and retries, concurrency, auth, responders, recording,
delays, scenario files and the turn-index definitions."""

from __future__ import annotations

import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from skillopt.testing.scripted import anthropic_messages, openai_chat, openai_responses
from skillopt.testing.scripted_server import (
    Rule,
    Scenario,
    ScenarioError,
    ScriptedModelServer,
    ScriptedReply,
    ScriptedRequest,
    ToolCall,
)

FAST_RETRY = 0.01  # retry-after the SDKs honour, so retry tests take milliseconds


def chat(server: ScriptedModelServer, text: str, *, retries: int = 0, key: str = "sk-test", **kw: Any) -> Any:
    with openai.OpenAI(base_url=server.base_url, api_key=key, max_retries=retries, **kw) as c:
        return c.chat.completions.create(model="m", messages=[{"role": "user", "content": text}])


# ---------------------------------------------------------------------------- errors & retries


def test_429_then_success_with_sdk_retries() -> None:
    scenario = {
        "rules": [
            {
                "name": "flaky",
                "match": {"contains": "flaky"},
                "replies": [
                    {
                        "error": {
                            "status": 429,
                            "message": "slow down",
                            "times": 1,
                            "retry_after_s": FAST_RETRY,
                        }
                    },
                    {"text": "finally"},
                ],
            }
        ]
    }
    with ScriptedModelServer(scenario) as srv:
        r = chat(srv, "flaky call", retries=2)
        assert r.choices[0].message.content == "finally"
        assert [(q.status, q.reply_index) for q in srv.requests] == [(429, 0), (200, 1)]
        assert srv.requests[0].error == "slow down"


def test_500_once_then_retry_works_for_both_sdks() -> None:
    scenario = [
        {
            "name": "boom",
            "match": {"contains": "boom"},
            "replies": [
                {"error": {"status": 500, "times": 1, "retry_after_s": FAST_RETRY}},
                {"text": "recovered"},
            ],
        }
    ]
    with ScriptedModelServer(scenario) as srv:
        assert chat(srv, "boom", retries=2).choices[0].message.content == "recovered"
        srv.reset()  # counters too: the next client sees the 500 again
        with anthropic.Anthropic(base_url=srv.anthropic_base_url, api_key="k", max_retries=2) as a:
            m = a.messages.create(model="c", max_tokens=5, messages=[{"role": "user", "content": "boom"}])
        assert m.content[0].text == "recovered"  # type: ignore[union-attr]
        assert [q.status for q in srv.requests] == [500, 200]


def test_error_times_semantics() -> None:
    scenario = [
        {
            "name": "r",
            "match": {"contains": "x"},
            "replies": [
                {"error": {"status": 429, "times": 2, "code": "rate_limit_exceeded"}},
                {"text": "ok"},
            ],
        }
    ]
    with ScriptedModelServer(scenario) as srv:
        for _ in range(2):
            with pytest.raises(openai.RateLimitError) as info:
                chat(srv, "x")
            assert info.value.code == "rate_limit_exceeded"
        assert chat(srv, "x").choices[0].message.content == "ok"
        assert chat(srv, "x").choices[0].message.content == "ok"  # exhausted for good
        srv.reset()
        with pytest.raises(openai.RateLimitError):
            chat(srv, "x")


def test_transient_error_guards_its_turn_slot_only() -> None:
    """[shell-less tool call, error×1, text]: turn 0 → call; turn 1 → 503 once, then text."""
    rule = Rule(
        name="slots",
        replies=(
            ScriptedReply(tool_calls=(ToolCall(name="f", arguments={}),)),
            ScriptedReply(error={"status": 503, "times": 1}),
            ScriptedReply(text="done at {{turn}}"),
        ),
    )
    assert rule.slot_count == 2
    with (
        ScriptedModelServer(Scenario(rules=(rule,))) as srv,
        openai.OpenAI(base_url=srv.base_url, api_key="k", max_retries=0) as c,
    ):
        first = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "go"}])
        assert first.choices[0].message.tool_calls
        convo: list[Any] = [
            {"role": "user", "content": "go"},
            first.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": first.choices[0].message.tool_calls[0].id, "content": "r"},
        ]
        with pytest.raises(openai.InternalServerError):
            c.chat.completions.create(model="m", messages=convo)
        assert c.chat.completions.create(model="m", messages=convo).choices[0].message.content == "done at 1"
        convo += [{"role": "assistant", "content": "done at 1"}, {"role": "user", "content": "again"}]
        # turn 2 clamps to the last slot
        assert c.chat.completions.create(model="m", messages=convo).choices[0].message.content == "done at 2"
        assert [q.reply_index for q in srv.requests] == [0, 1, 2, 2]


def test_permanent_error_and_raw_body_and_headers() -> None:
    scenario = [
        {
            "name": "down",
            "reply": {
                "error": {"status": 503, "body": {"custom": True}, "headers": {"x-should-retry": "false"}}
            },
        }
    ]
    with ScriptedModelServer(scenario) as srv, httpx.Client() as http:
        for _ in range(2):
            r = http.post(f"{srv.base_url}/chat/completions", json={"model": "m", "messages": []})
            assert r.status_code == 503 and r.json() == {"custom": True}
            assert r.headers["x-should-retry"] == "false"


def test_unmatched_request_is_a_clear_400_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    with ScriptedModelServer(
        [{"name": "only", "match": {"contains": "something else"}, "reply": "x"}]
    ) as srv:
        with (
            caplog.at_level(logging.WARNING, logger="skillopt.testing.scripted"),
            pytest.raises(openai.BadRequestError) as info,
        ):
            chat(srv, "an unscripted question MARKER-42")
        message = info.value.message
        assert "no scenario rule matched" in message
        assert "MARKER-42" in message  # the snippet
        assert "api=chat" in message
        assert any("MARKER-42" in r.getMessage() for r in caplog.records)
        (rec,) = srv.requests
        assert (rec.status, rec.rule) == (400, None)


def test_default_rule_answers_unmatched() -> None:
    scenario = {
        "rules": [{"match": {"contains": "zzz"}, "reply": "z"}],
        "default": {"reply": "fallback {{api}}"},
    }
    with ScriptedModelServer(scenario) as srv:
        assert chat(srv, "hello").choices[0].message.content == "fallback chat"
        assert srv.requests[0].rule == "default"


def test_shell_without_shell_tool_is_a_clear_error() -> None:
    with (
        ScriptedModelServer([{"name": "sh", "reply": {"shell": "ls"}}]) as srv,
        pytest.raises(openai.BadRequestError, match="offers no shell tool"),
    ):
        chat(srv, "anything")


def test_unknown_route_and_bad_json() -> None:
    with ScriptedModelServer() as srv, httpx.Client() as http:
        r = http.post(f"{srv.base_url}/embeddings", json={})
        assert r.status_code == 404 and "no route" in r.json()["error"]["message"]
        r = http.post(
            f"{srv.base_url}/chat/completions",
            content=b"{not json",
            headers={"content-type": "application/json"},
        )
        assert r.status_code == 400 and "not JSON" in r.json()["error"]["message"]


# ---------------------------------------------------------------------------- concurrency


def test_sixteen_concurrent_chat_calls() -> None:
    n = 16
    barrier = threading.Barrier(n, timeout=20)

    def rendezvous(req: ScriptedRequest) -> None:
        # Releases only when all n requests are inside the server at once: proves concurrency.
        barrier.wait()
        return None

    scenario = [{"name": "echo", "match": {"regex": r"MARKER-(?P<id>\d+)"}, "reply": "answer {{id}}"}]
    with (
        ScriptedModelServer(scenario, responders=[rendezvous]) as srv,
        openai.OpenAI(base_url=srv.base_url, api_key="k", max_retries=0) as c,
    ):

        def call(i: int) -> str:
            r = c.chat.completions.create(model="m", messages=[{"role": "user", "content": f"MARKER-{i}"}])
            return r.choices[0].message.content or ""

        with ThreadPoolExecutor(n) as pool:
            answers = list(pool.map(call, range(n)))
        assert answers == [f"answer {i}" for i in range(n)]
        assert len(srv.requests) == n and {q.status for q in srv.requests} == {200}


def test_concurrent_streams_do_not_mix() -> None:
    scenario = [{"name": "echo", "match": {"regex": r"id=(\d+)"}, "reply": "stream number {{1}} " * 5}]
    with ScriptedModelServer(scenario) as srv, openai.OpenAI(base_url=srv.base_url, api_key="k") as c:

        def call(i: int) -> str:
            s = c.chat.completions.create(
                model="m", messages=[{"role": "user", "content": f"id={i}"}], stream=True
            )
            return "".join(ch.choices[0].delta.content or "" for ch in s if ch.choices)

        with ThreadPoolExecutor(16) as pool:
            out = list(pool.map(call, range(16)))
        assert out == [f"stream number {i} " * 5 for i in range(16)]


# ---------------------------------------------------------------------------- auth


def test_expect_auth() -> None:
    with ScriptedModelServer({"default": {"reply": "ok"}}, expect_auth="right-key") as srv:
        with pytest.raises(openai.AuthenticationError):
            chat(srv, "hi", key="wrong-key")
        assert chat(srv, "hi", key="right-key").choices[0].message.content == "ok"
        with (
            anthropic.Anthropic(base_url=srv.anthropic_base_url, api_key="wrong-key", max_retries=0) as a,
            pytest.raises(anthropic.AuthenticationError),
        ):
            a.messages.create(model="c", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
        with httpx.Client() as http:
            body = {"model": "c", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
            ok = http.post(f"{srv.url}/v1/messages", json=body, headers={"x-api-key": "right-key"})
            assert ok.status_code == 200
            assert http.post(f"{srv.url}/v1/messages", json=body).status_code == 401
            assert http.head(f"{srv.url}/api/hello").status_code == 200  # probes are exempt
        assert [q.status for q in srv.requests] == [401, 200, 401, 200, 401, 200]
        assert all("right-key" not in json.dumps(q.to_dict()) for q in srv.requests)


# ---------------------------------------------------------------------------- responders


def test_responders_before_and_after_rules() -> None:
    seen: list[str] = []

    def by_system_prompt(req: ScriptedRequest) -> ScriptedReply | None:
        seen.append(req.system)
        if "SKILL: answer 42" in req.system:
            return ScriptedReply(text="42")
        return None

    def fallback(req: ScriptedRequest) -> str:
        return f"after-rules turn {req.turn}"

    scenario = [{"name": "rule", "match": {"contains": "ruled"}, "reply": "from rule"}]
    with (
        ScriptedModelServer(scenario, responders=[by_system_prompt]) as srv,
        openai.OpenAI(base_url=srv.base_url, api_key="k", max_retries=0) as c,
    ):
        srv.add_responder(fallback, when="after")

        def ask(system: str, user: str) -> str:
            msgs: Any = [{"role": "system", "content": system}, {"role": "user", "content": user}]
            return c.chat.completions.create(model="m", messages=msgs).choices[0].message.content or ""

        assert ask("SKILL: answer 42", "ruled") == "42"  # before-responder wins over the rule
        assert ask("other skill", "ruled") == "from rule"
        assert ask("other skill", "free") == "after-rules turn 0"
        assert seen == ["SKILL: answer 42", "other skill", "other skill"]
        assert [q.rule for q in srv.requests] == ["responder:by_system_prompt", "rule", "responder:fallback"]


def test_responder_exception_is_a_500() -> None:
    def broken(req: ScriptedRequest) -> None:
        raise RuntimeError("kaboom")

    with (
        ScriptedModelServer(responders=[broken]) as srv,
        pytest.raises(openai.InternalServerError, match="kaboom"),
    ):
        chat(srv, "x")


# ---------------------------------------------------------------------------- recording


def test_recording_redaction_log_file_and_bound(tmp_path: Path) -> None:
    log_path = tmp_path / "requests.jsonl"
    with ScriptedModelServer({"default": {"reply": "ok"}}, log_path=log_path, max_records=3) as srv:
        for i in range(5):
            chat(srv, f"message {i}", key="sk-secret-abcdefgh")
        recs = srv.requests
        assert len(recs) == 3  # bounded
        assert recs[-1].body["messages"][0]["content"] == "message 4"
        assert recs[-1].headers["authorization"] == "Bearer sk-s…[redacted]"
        assert recs[-1].method == "POST" and recs[-1].path == "/v1/chat/completions"
        lines = log_path.read_text().splitlines()
        assert len(lines) == 5  # the file keeps everything
        assert "sk-secret-abcdefgh" not in log_path.read_text()
        first = json.loads(lines[0])
        assert first["api"] == "chat" and first["status"] == 200 and first["rule"] == "default"
        srv.reset()
        assert srv.requests == []


def test_wait_for_requests() -> None:
    with ScriptedModelServer({"default": {"reply": "ok"}}) as srv:
        t = threading.Thread(target=chat, args=(srv, "bg"))
        t.start()
        (rec,) = srv.wait_for_requests(1, timeout_s=10, api="chat")
        t.join()
        assert rec.body["messages"][0]["content"] == "bg"
        with pytest.raises(TimeoutError):
            srv.wait_for_requests(2, timeout_s=0.05)


# ---------------------------------------------------------------------------- delays


def test_delay_reply_times_out_the_client_and_stop_cuts_it_short() -> None:
    srv = ScriptedModelServer([{"name": "slow", "reply": {"text": "late", "delay_s": 30}}]).start()
    try:
        with pytest.raises(openai.APITimeoutError):
            chat(srv, "x", timeout=0.3)
        assert srv.requests[0].rule == "slow"  # recorded on arrival, before the delay
    finally:
        t0 = time.monotonic()
        srv.stop()
        assert time.monotonic() - t0 < 10  # the 30 s delay did not hold stop()


# ---------------------------------------------------------------------------- scenarios


def test_scenario_yaml_and_json_files(tmp_path: Path) -> None:
    yml = tmp_path / "s.yaml"
    yml.write_text(
        """
name: files
rules:
  - name: greet
    match: {contains: hello, api: [chat, responses], model: "gpt-*"}
    replies:
      - "hi from {{model}} on {{api}}"
"""
    )
    js = tmp_path / "s.json"
    js.write_text(json.dumps([{"name": "j", "match": {"path": "/v1/chat/*"}, "reply": {"text": "json"}}]))
    with (
        ScriptedModelServer(yml) as srv,
        openai.OpenAI(base_url=srv.base_url, api_key="k", max_retries=0) as c,
    ):
        r = c.chat.completions.create(model="gpt-4", messages=[{"role": "user", "content": "hello"}])
        assert r.choices[0].message.content == "hi from gpt-4 on chat"
        with pytest.raises(openai.BadRequestError):  # model glob does not fit
            c.chat.completions.create(model="claude", messages=[{"role": "user", "content": "hello"}])
        srv.set_scenario(js)
        r = c.chat.completions.create(model="x", messages=[{"role": "user", "content": "anything"}])
        assert r.choices[0].message.content == "json"


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ([{"match": {"contians": "x"}, "reply": "y"}], "unknown key"),
        ([{"match": {"api": "embeddings"}, "reply": "y"}], "match.api"),
        ([{"replies": []}], "no replies"),
        ([{"replies": [{"text": "a"}, {"error": {"status": 429, "times": 1}}]}], "falls through"),
        ([{"name": "a", "reply": "x"}, {"name": "a", "reply": "y"}], "duplicate rule names"),
        ([{"reply": {"txt": "x"}}], "unknown key"),
        ([{"reply": {"delay_s": 1}}], "needs text"),
        ([{"reply": {"error": {"status": 200}}}], "4xx/5xx"),
        ([{"match": {"regex": "("}, "reply": "x"}], "bad match.regex"),
        ({"rules": [], "responses_sse": "weird"}, "responses_sse"),
    ],
)
def test_scenario_validation(obj: Any, message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        Scenario.from_obj(obj)


def test_templates_and_regex_groups() -> None:
    scenario = [
        {
            "name": "tpl",
            "match": {"regex": r"task-(\d+) for (?P<who>\w+)"},
            "reply": {"text": "{{match}} | {{1}} | {{who}} | {{rule}} | {{unknown}}"},
        }
    ]
    with ScriptedModelServer(scenario) as srv:
        text = chat(srv, "do task-7 for alice").choices[0].message.content
    assert text == "task-7 for alice | 7 | alice | tpl | {{unknown}}"


# ---------------------------------------------------------------------------- turn index


def test_turn_index_chat_counts_assistant_runs() -> None:
    body = {
        "messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "u"},
            {
                "role": "assistant",
                "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "1", "content": "r1"},
            {"role": "assistant", "content": "a"},
            {"role": "user", "content": "u2"},
        ]
    }
    parsed = openai_chat.parse(body)
    assert parsed.turn == 2
    assert parsed.system == "s"
    assert [m.role for m in parsed.messages] == ["system", "user", "assistant", "tool", "assistant", "user"]


def test_turn_index_responses_counts_model_output_runs() -> None:
    body = {
        "instructions": "inst",
        "input": [
            {"role": "developer", "content": [{"type": "input_text", "text": "dev"}]},
            {"role": "user", "content": "u"},
            # one model turn: reasoning + two parallel calls, then both outputs
            {"type": "reasoning", "summary": [], "encrypted_content": "x"},
            {"type": "function_call", "call_id": "a", "name": "exec_command", "arguments": "{}"},
            {"type": "function_call", "call_id": "b", "name": "exec_command", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "a", "output": "A"},
            {"type": "function_call_output", "call_id": "b", "output": "B"},
            {"type": "custom_tool_call", "call_id": "c", "name": "apply_patch", "input": "*** Begin Patch"},
            {"type": "custom_tool_call_output", "call_id": "c", "output": "ok"},
        ],
    }
    parsed = openai_responses.parse(body)
    assert parsed.turn == 2
    assert parsed.system == "inst\n\ndev"
    assert [m.text for m in parsed.messages if m.role == "tool"] == ["A", "B", "ok"]
    assert openai_responses.parse({"input": "just text"}).turn == 0


def test_turn_index_messages_counts_assistant_runs() -> None:
    body = {
        "system": [{"type": "text", "text": "sys"}],
        "messages": [
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": [{"type": "text", "text": "thinking aloud"}]},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t", "name": "Bash", "input": {"command": "ls"}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t",
                        "content": [{"type": "text", "text": "files"}],
                    },
                    {"type": "text", "text": "Base directory for this skill"},
                ],
            },
            {"role": "system", "content": "skills list"},
        ],
    }
    parsed = anthropic_messages.parse(body)
    assert parsed.turn == 1  # split assistant messages are one turn
    assert parsed.system == "sys\n\nskills list"
    roles = [(m.role, m.text) for m in parsed.messages]
    assert ("tool", "files") in roles and ("user", "Base directory for this skill") in roles
    assert ("assistant", 'Bash {"command": "ls"}') in roles


def test_scripted_request_views_for_responders() -> None:
    seen: list[ScriptedRequest] = []

    def spy(req: ScriptedRequest) -> str:
        seen.append(req)
        return "ok"

    tools: Any = [{"type": "function", "function": {"name": "run", "parameters": {"type": "object"}}}]
    msgs: Any = [
        {"role": "system", "content": "SYS"},
        {"role": "user", "content": "first"},
        {
            "role": "assistant",
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "run", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c", "content": "RESULT"},
    ]
    with ScriptedModelServer(responders=[spy]) as srv, openai.OpenAI(base_url=srv.base_url, api_key="k") as c:
        c.chat.completions.create(model="m", messages=msgs, tools=tools)
    (req,) = seen
    assert (req.api, req.model, req.turn, req.stream) == ("chat", "m", 1, False)
    assert req.system == "SYS" and req.last_user_text == "first" and req.tool_results == ("RESULT",)
    assert req.has_tool("run") and not req.has_tool("exec_command")
    assert req.text == "SYS\n\nfirst\n\nrun {}\n\nRESULT"
    assert req.headers["authorization"].endswith("[redacted]")
