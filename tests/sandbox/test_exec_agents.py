"""The real Codex CLI and the real Claude Code, each in a rollout container on the gateway
network, scripted through the gateway by the scripted model server; graded on the trusted side."""

from __future__ import annotations

import dataclasses
import json

import pytest

from skillopt.testing.fixtures.spreadsheetbench import solution_code
from skillopt.types import Limits, ModelSpec, SkillFile, SkillVersion
from tests.sandbox.conftest import request_for

TASK = "32255"


def heredoc(code: str) -> str:
    return f"cat > solution.py <<'SKILLOPT_EOF'\n{code}\nSKILLOPT_EOF"


def script(code: str, final: str = "Done: solution.py written and checked.") -> list[dict]:
    return [
        {
            "shell": "cat .agents/skills/skillopt-target/SKILL.md .claude/skills/skillopt-target/SKILL.md task.md"
        },
        {"shell": heredoc(code)},
        {"shell": "python3 run_solution.py"},
        {"text": final},
    ]


def exec_request(sample, agent: str, provider: str, **kw):
    req = request_for(sample, TASK, agent=agent, skill="# Rule\nAlways MARKER-EXEC-SKILL.\n", **kw)
    return dataclasses.replace(
        req,
        model=ModelSpec(
            provider=provider, model="gpt-5.5" if provider == "scripted" else "claude-sonnet-4-6"
        ),
        limits=Limits(wall_time_s=180, exec_timeout_s=60),
    )


@pytest.mark.parametrize(
    ("agent", "provider"), [("codex_exec", "scripted"), ("claude_code_exec", "scripted-anthropic")]
)
def test_real_cli_solves_a_real_task_in_its_container(service, scripts, sample, agent, provider):
    marker = sample.task(TASK).instruction[:120]
    scripts.scripts[marker] = script(solution_code(TASK))
    before = len(service.model.requests)
    try:
        row = service.client.run(exec_request(sample, agent, provider), timeout_s=240)
    finally:
        del scripts.scripts[marker]
    assert row.infra_error is None, (row.fail_reason, row.trace.notes)
    assert row.hard == 1.0, (
        row.fail_reason,
        row.metrics,
        row.trace.notes,
        [m.content[:300] for m in row.trace.messages],
    )
    assert row.agent_ok and row.n_turns >= 3
    calls = [r for r in service.model.requests[before:] if r.api in ("responses", "messages")]
    assert len(calls) >= 4
    # The CLI discovered the skill where it looks for skills, and read it.
    first = json.dumps(calls[0].body)
    assert "skillopt-target" in first
    tool_outputs = json.dumps(calls[1].body)
    assert "MARKER-EXEC-SKILL" in tool_outputs
    # The gateway recorded every exchange into the trace.
    exchanges = json.loads(row.trace.notes["model_exchanges"])
    assert len(exchanges) == len(calls) and all(e["status"] == 200 for e in exchanges)


@pytest.mark.parametrize(
    ("agent", "provider"), [("codex_exec", "scripted"), ("claude_code_exec", "scripted-anthropic")]
)
def test_real_cli_finds_a_skill_package_and_runs_its_script(service, scripts, sample, agent, provider):
    """A package (SKILL.md, a reference, an executable script) is where each CLI looks,
    ``<workspace>/.agents/skills/<name>/`` and ``.claude/skills/<name>/``; the CLI reads it and
    runs its script from the read-only mount."""
    name = "xlsx-helper"
    skill = SkillVersion(
        name=name,
        content=f"---\nname: {name}\ndescription: Spreadsheet helper.\n---\n# Helper\nMARKER-PKG-BODY\n",
        files=(
            SkillFile(path="references/rules.md", data=b"MARKER-PKG-REFERENCE\n"),
            SkillFile(
                path="scripts/hello.sh",
                data=b'#!/bin/sh\necho "MARKER-PKG-SCRIPT $(id -u)"\n',
                executable=True,
            ),
        ),
    )
    home = ".agents/skills" if agent == "codex_exec" else ".claude/skills"
    marker = sample.task(TASK).instruction[:120]
    scripts.scripts[marker] = [
        {
            "shell": f"cat {home}/{name}/SKILL.md {home}/{name}/references/rules.md task.md; {home}/{name}/scripts/hello.sh"
        },
        {"shell": heredoc(solution_code(TASK))},
        {"shell": "python3 run_solution.py"},
        {"text": "Done."},
    ]
    before = len(service.model.requests)
    try:
        req = dataclasses.replace(exec_request(sample, agent, provider), skill=skill)
        row = service.client.run(req, timeout_s=240)
    finally:
        del scripts.scripts[marker]
    assert row.infra_error is None and row.hard == 1.0, (row.fail_reason, row.trace.notes)
    calls = [r for r in service.model.requests[before:] if r.api in ("responses", "messages")]
    if agent == "codex_exec":  # Codex lists each skill with its file: the package's folder
        assert f"{name}/SKILL.md" in json.dumps(calls[0].body)
    tool_outputs = json.dumps(calls[1].body)
    for seen in ("MARKER-PKG-BODY", "MARKER-PKG-REFERENCE", "MARKER-PKG-SCRIPT 1000"):
        assert seen in tool_outputs, seen


@pytest.mark.parametrize(
    ("agent", "provider"), [("codex_exec", "scripted"), ("claude_code_exec", "scripted-anthropic")]
)
def test_a_wrong_solution_fails(service, scripts, sample, agent, provider):
    marker = sample.task(TASK).instruction[:120]
    scripts.scripts[marker] = script(solution_code(TASK, "wrong"))
    try:
        row = service.client.run(exec_request(sample, agent, provider), timeout_s=240)
    finally:
        del scripts.scripts[marker]
    assert row.infra_error is None and row.hard == 0.0
    assert row.fail_reason.startswith("eval-mismatch: value@"), row.fail_reason


PROBE = r"""
import base64, json, os, socket, urllib.request, urllib.error
# Built at run time: the command text itself (which the CLIs log) must not contain the key.
KEY = base64.b64decode("__KEY_B64__").decode()
report = {}
env_text = json.dumps(dict(os.environ))
procs = ""
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    try:
        procs += open(f"/proc/{pid}/environ", "rb").read().decode("utf-8", "replace")
    except OSError:
        pass
report["key_in_env"] = KEY in env_text or KEY in procs
hits = []
for root in ["/workspace", "/tmp", "/opt", "/etc", "/skill", "/usr/local"]:
    for dirpath, dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            try:
                if os.path.getsize(path) < 50_000_000 and KEY.encode() in open(path, "rb").read():
                    hits.append(path)
            except OSError:
                pass
report["key_in_files"] = hits
def reach(host, port):
    try:
        socket.create_connection((host, port), timeout=1).close()
        return True
    except OSError:
        return False
report["internet"] = reach("1.1.1.1", 443) or reach("8.8.8.8", 53)
try:
    socket.getaddrinfo("example.com", 443)
    report["dns"] = True
except OSError:
    report["dns"] = False
gw = os.environ.get("ANTHROPIC_BASE_URL") or "__GATEWAY__"
host = gw.split("//")[1].split(":")[0]
report["other_host_port"] = reach(host, __OTHER_PORT__)
report["docker0"] = reach("172.17.0.1", __OTHER_PORT__)
try:
    report["gateway_probe"] = urllib.request.urlopen(gw + "/", timeout=5).status
except Exception as exc:
    report["gateway_probe"] = repr(exc)
req = urllib.request.Request(gw + "/v1/chat/completions", data=b"{}", headers={"Authorization": "Bearer sk-stolen", "Content-Type": "application/json"})
try:
    urllib.request.urlopen(req, timeout=5)
    report["bad_token"] = 200
except urllib.error.HTTPError as exc:
    report["bad_token"] = exc.code
print("PROBE-REPORT " + json.dumps(report))
"""


@pytest.mark.parametrize(
    ("agent", "provider"), [("codex_exec", "scripted"), ("claude_code_exec", "scripted-anthropic")]
)
def test_no_key_no_internet_only_the_gateway(docker_client, sample, agent, provider):
    import base64
    import http.server
    import threading

    from skillopt.testing.scripted import ScriptedModelServer
    from tests.sandbox.conftest import TaskScripts, start_service

    key = "sk-real-provider-key-MARKER-7f3a9c"
    # A host service on every interface: the exec container must not reach it.
    other = http.server.ThreadingHTTPServer(("0.0.0.0", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        with ScriptedModelServer(expect_auth=key) as model:
            ts = TaskScripts()
            model.add_responder(ts)
            for svc in start_service(model, pool_size=1, provider_key=key):
                gateway = svc.running.service.gateway_url
                key_b64 = base64.b64encode(key.encode()).decode()
                probe = (
                    PROBE.replace("__KEY_B64__", key_b64)
                    .replace("__GATEWAY__", gateway)
                    .replace("__OTHER_PORT__", str(other.server_address[1]))
                )
                command = f"python3 - <<'SKILLOPT_EOF'\n{probe}\nSKILLOPT_EOF"
                # Codex returns early from commands slower than its yield time: wait for this one.
                first = (
                    {
                        "tool_calls": [
                            {"name": "exec_command", "arguments": {"cmd": command, "yield_time_ms": 60000}}
                        ]
                    }
                    if agent == "codex_exec"
                    else {"shell": command}
                )
                ts.scripts[sample.task(TASK).instruction[:120]] = [first, {"text": "probe done"}]
                row = svc.client.run(exec_request(sample, agent, provider), timeout_s=240)
                # The upstream saw the real key: the gateway injected it (expect_auth enforces it).
                statuses = [(r.status, r.error) for r in model.api_requests()]
                assert statuses and all(st == 200 for st, _ in statuses), statuses
    finally:
        other.shutdown()
    text = "\n".join(m.content for m in row.trace.messages)
    assert "PROBE-REPORT {" in text, text[-3000:]
    report, _ = json.JSONDecoder().raw_decode("{" + text.split("PROBE-REPORT {", 1)[1])
    assert report["key_in_env"] is False
    assert report["key_in_files"] == []
    assert report["internet"] is False and report["dns"] is False
    assert report["other_host_port"] is False and report["docker0"] is False
    assert report["gateway_probe"] == 200
    assert report["bad_token"] == 401


@pytest.mark.parametrize("agent", ["codex_exec", "claude_code_exec", "codegen_single"])
def test_a_recorded_rollout_replays_with_the_model_server_stopped(docker_client, sample, short_tmp, agent):
    from skillopt.testing.scripted import ScriptedModelServer
    from tests.sandbox.conftest import TaskScripts, fenced, start_service

    with ScriptedModelServer() as model:
        ts = TaskScripts()
        model.add_responder(ts)
        marker = sample.task(TASK).instruction[:120]
        ts.scripts[marker] = (
            [fenced(solution_code(TASK))] if agent == "codegen_single" else script(solution_code(TASK))
        )
        for svc in start_service(
            model, pool_size=1, server_kw={"gateway_cache_dir": str(short_tmp / "cache")}
        ):
            base = exec_request(
                sample, agent, "scripted-anthropic" if agent == "claude_code_exec" else "scripted"
            )
            recorded = svc.client.run(
                dataclasses.replace(base, rollout_id="rec/1", model_cache="record"), timeout_s=240
            )
            assert recorded.hard == 1.0, recorded.fail_reason
            n_calls = len(model.api_requests())
            model.stop()  # from here on nothing answers upstream
            replayed = svc.client.run(
                dataclasses.replace(base, rollout_id="rep/1", model_cache="replay"), timeout_s=240
            )
            assert replayed.infra_error is None, replayed.infra_error
            assert (replayed.hard, replayed.fail_reason, replayed.n_turns) == (
                recorded.hard,
                recorded.fail_reason,
                recorded.n_turns,
            )
            assert replayed.trace.code == recorded.trace.code
            assert [m.content for m in replayed.trace.messages] == [
                m.content for m in recorded.trace.messages
            ]
            exchanges = json.loads(replayed.trace.notes["model_exchanges"])
            assert len(exchanges) == n_calls and all(e["replayed"] for e in exchanges)
            # Something never recorded: a different skill changes what the agent sends.
            other = dataclasses.replace(
                base,
                rollout_id="rep/2",
                model_cache="replay",
                skill=dataclasses.replace(base.skill, content="# Another skill\n"),
            )
            missed = svc.client.run(other, timeout_s=240)
            assert missed.infra_error is not None and missed.infra_error.kind.value == "replay_miss", (
                missed.fail_reason,
                [(e["replayed"], e["status"]) for e in json.loads(missed.trace.notes["model_exchanges"])],
            )
