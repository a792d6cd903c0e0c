"""``skillopt models check``: each role's provider as this machine resolves it, whether its key
is here (never printed), one tiny real call per role through the official SDKs against the
scripted model server (OpenAI Chat Completions and Anthropic Messages), and each sandbox
host's profiles."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from controller.cli import main
from controller.embedded import spawn_service, wait_listening
from skillopt.testing.scripted_server import ScriptedModelServer

KEY = f"sk-check-{uuid.uuid4().hex}"  # the scripted server accepts only this key
SCENARIO = {"rules": [{"name": "check", "match": {"contains": "connectivity check"}, "reply": "ok"}]}


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(SCENARIO, expect_auth=KEY) as srv:
        yield srv


@pytest.fixture
def providers(tmp_path: Path, server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Profiles of every shape the docs show, keys from variables (set here, or not)."""
    server.reset()
    monkeypatch.setenv("LOCAL_KEY", KEY)
    monkeypatch.setenv("ANTH_KEY", KEY)
    monkeypatch.setenv("WRONG_KEY", "sk-wrong-0000000000")
    monkeypatch.delenv("UNSET_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    path = tmp_path / "providers.yaml"
    profiles = {
        "local": {"kind": "openai_compatible", "base_url": server.base_url, "api_key_env": "LOCAL_KEY"},
        "claude": {"kind": "anthropic", "base_url": server.anthropic_base_url, "api_key_env": "ANTH_KEY"},
        "wrong": {"kind": "openai_compatible", "base_url": server.base_url, "api_key_env": "WRONG_KEY"},
        "unset": {"kind": "openai", "api_key_env": "UNSET_KEY"},
    }
    path.write_text(yaml.safe_dump({"providers": profiles}))
    return path


def check(capsys: pytest.CaptureFixture[str], providers: Path, *args: str) -> tuple[int, str, str]:
    code = main(
        ["models", "check", "--config", "searchqa", "--set", f"model.providers_file={providers}", *args]
    )
    out, err = capsys.readouterr()
    return code, out, err


def roles(out: str) -> dict[str, dict]:
    return {r["role"]: r for r in json.loads(out)["roles"]}


def test_call_reaches_openai_chat_and_anthropic_messages_with_the_key(capsys, providers, server):
    code, out, err = check(
        capsys,
        providers,
        *("--set", "model.optimizer_provider=local", "--set", "model.optimizer=qwen-local"),
        *("--set", "model.target_provider=claude", "--set", "model.target=claude-test"),
        "--call",
        "--json",
    )
    assert code == 0, out + err
    by_role = roles(out)
    opt, tgt = by_role["optimizer"], by_role["target"]
    assert (opt["profile"]["kind"], opt["profile"]["api"], opt["profile"]["base_url"]) == (
        "openai_compatible",
        "chat",
        server.base_url,
    )
    assert (tgt["profile"]["kind"], tgt["profile"]["base_url"]) == ("anthropic", server.anthropic_base_url)
    assert opt["key"] == tgt["key"] == "set" and opt["profile"]["credential"] == "LOCAL_KEY"
    assert opt["call"]["ok"] and opt["call"]["reply"] == "ok" and tgt["call"]["reply"] == "ok"
    assert opt["model"] == "qwen-local" and "this machine" in opt["called_from"]
    assert "embedded sandbox" in tgt["called_from"]
    # One request per role, on each role's own API and model, marked as a check; the server
    # accepted them, so the key was sent; it is never printed.
    sent = {(r.api, r.model, r.headers.get("x-skillopt-stage"), r.status) for r in server.api_requests()}
    assert sent == {
        ("chat", "qwen-local", "models_check", 200),
        ("messages", "claude-test", "models_check", 200),
    }
    assert KEY not in out + err
    # The human listing says the same.
    code, out, err = check(
        capsys,
        providers,
        "--set",
        "model.optimizer_provider=local",
        "--set",
        "model.target_provider=local",
        "--call",
    )
    assert code == 0 and out.rstrip().endswith("models: ok") and "call: ok in" in out and KEY not in out + err


def test_a_role_that_cannot_work_exits_1_and_says_what_to_set(capsys, providers, server):
    # A key variable that is not set: named, nothing called.
    code, out, _ = check(
        capsys,
        providers,
        "--set",
        "model.optimizer_provider=unset",
        "--set",
        "model.target_provider=local",
        "--call",
    )
    assert code == 1
    assert "problem: optimizer: provider 'unset': environment variable UNSET_KEY" in out
    assert [r.model for r in server.api_requests()] == ["gpt-5.5"]  # the target's call only
    # A key the provider refuses: the call's error, not the key.
    code, out, err = check(
        capsys, providers, "--set", "model.optimizer_provider=wrong", "--set", "model.target_provider=local",
        "--call", "--json",
    )  # fmt: skip
    assert code == 1
    opt = roles(out)["optimizer"]
    assert opt["key"] == "set" and opt["call"]["ok"] is False and "WRONG_KEY" in opt["call"]["error"]
    assert "sk-wrong-0000000000" not in out + err
    # No profile of that name: the automatic profile's variable is named.
    code, out, _ = check(capsys, providers)  # both roles default to the automatic 'openai'
    assert code == 1 and out.count("set OPENAI_API_KEY for the automatic profile 'openai'") == 2


def test_an_exec_agent_needs_a_profile_of_its_api(capsys, providers):
    code, out, _ = main(
        [
            "models", "check", "--config", "spreadsheetbench", "--set", f"model.providers_file={providers}",
            "--set", "env.agent=claude_code_exec", "--set", "model.optimizer_provider=local",
            "--set", "model.target_provider=local", "--json",
        ]
    ), *capsys.readouterr()  # fmt: skip
    assert code == 1
    assert "agent claude_code_exec speaks the anthropic API" in roles(out)["target"]["problem"]


def test_a_bad_providers_file_is_a_usage_error(capsys, tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text("providers:\n  x:\n    kind: openai\n    api_key: sk-in-the-file\n")
    code = main(["models", "check", "--config", "searchqa", "--set", f"model.providers_file={bad}"])
    _, err = capsys.readouterr()
    assert code == 2 and "do not put secrets in the config" in err


def test_each_sandbox_host_says_whether_it_serves_the_targets_profile(
    capsys, providers, server, short_tmp, docker_client
):
    """A real sandbox host started with the target's profile (``--provider``), and an address
    where nothing listens: the first serves it (a host loads a profile only with its key), the
    second is named as unreachable; a target whose profile the host lacks is named too."""
    (short_tmp / "token").write_text(uuid.uuid4().hex)
    token = ("--set", f"sandbox.token_file={short_tmp / 'token'}")
    proc = spawn_service(
        [
            "--listen", "127.0.0.1:0", "--token-file", str(short_tmp / "token"),
            "--host-id", f"models-{uuid.uuid4().hex[:6]}", "--state-dir", str(short_tmp / "state"),
            "--capacity", "1", "--pool-size", "0", "--exec-agents", "off",
            "--provider", f"local=openai_compatible,base_url={server.base_url}",
        ]
    )  # fmt: skip
    try:
        live = f"127.0.0.1:{wait_listening(proc, 120)}"
        code, out, err = check(
            capsys, providers, "--set", "model.optimizer_provider=local", "--set", "model.target_provider=local",
            *token, "--endpoints", f"{live},127.0.0.1:9", "--json",
        )  # fmt: skip
        lacking = check(
            capsys, providers, "--set", "model.optimizer_provider=local", "--set", "model.target_provider=claude",
            *token, "--endpoints", live,
        )  # fmt: skip
    finally:
        proc.terminate()
        proc.wait(60)
    assert code == 1, out + err
    report = json.loads(out)
    hosts = {h["address"]: h for h in report["hosts"]}
    assert hosts[live]["ok"] and hosts[live]["health"] == "SERVING" and "local" in hosts[live]["providers"]
    assert not hosts["127.0.0.1:9"]["ok"] and "unreachable" in hosts["127.0.0.1:9"]["problem"]
    assert report["problems"] == [f"host 127.0.0.1:9: {hosts['127.0.0.1:9']['problem']}"]
    assert all(r["ok"] for r in report["roles"]) and live in roles(out)["target"]["called_from"]
    code, out, _ = lacking
    assert code == 1 and f"problem: host {live}: serves no provider profile 'claude' for the target" in out
    assert "skillopt serve --providers FILE" in out
