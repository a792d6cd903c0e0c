"""The real Codex CLI and the real Claude Code, run on this host against the scripted model
server, each for a session and a resumed follow-up; then ``skillopt sleep harvest`` reads what
they wrote. This is what keeps the corpus (``skillopt.testing.sleep_corpus``) honest: the
readers must understand the files the pinned CLIs write today.

The CLIs are the native binaries of the runtime image (``/opt/codex``, ``/opt/claude``: the
versions in ``docker/agents/versions.env``), copied out of it once, so the test runs what the
sandbox runs, on any machine the suite's setup built the image on (the host's own npm staging
under ``docker/.build`` exists only where that machine built the image). Each run takes 0.5-3 s.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
from pathlib import Path

import docker
import pytest

from controller.cli import main
from sandbox.runtime.spec import DEFAULT_IMAGE
from skillopt.sleep import HarvestedSession, HarvestIndex
from skillopt.sleep.sources import claude_slug
from skillopt.testing.fake_secrets import fake
from skillopt.testing.scripted import ScriptedModelServer
from skillopt.testing.sleep_corpus import CLAUDE_VERSION, CODEX_VERSION

GITHUB = fake("gh", "p_R3alCl1T0k3nN0tF0rSh4r1ngAbCdEfGh99")
PASSWORD = "R3alCl1Passw0rdPlanted"
SKILL = "---\nname: demo\ndescription: Demo skill.\n---\n# Demo\nSay hi.\n"

SCENARIO = {
    "rules": [
        {
            "name": "codex",
            "match": {"contains": "fix the greeting"},
            "replies": [
                {"shell": "cat .agents/skills/demo/SKILL.md"},
                {"shell": "sh -c 'echo boom; exit 3'"},
                {"text": "Done: fixed the greeting."},
            ],
        },
        {
            "name": "claude",
            "match": {"contains": "use the demo skill"},
            "replies": [
                {"tool_calls": [{"name": "Skill", "arguments": {"skill": "demo"}}]},
                {"shell": "ls /nonexistent-dir"},
                {"text": "Used the skill."},
            ],
        },
    ],
    "default": {"replies": [{"text": "ok"}]},
}

CODEX_CONFIG = """model = "gpt-5.5"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "danger-full-access"

[model_providers.fake]
name = "scripted"
base_url = "{base_url}"
env_key = "FAKE_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[features]
plugins = false
remote_plugin = false
apps = false

[analytics]
enabled = false
"""


def run(cmd: list[str], cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(
        cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, (cmd, done.stdout[-2000:], done.stderr[-2000:])
    return done.stdout


def copy_out(client: docker.DockerClient, image: str, paths: list[str], dest: Path) -> None:
    """``paths`` of ``image`` into ``dest`` (from a created, never started container)."""
    container = client.containers.create(image, command=["true"], network_disabled=True)
    try:
        for path in paths:
            stream, _ = container.get_archive(path)
            with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
                tar.extractall(dest, filter="data")
    finally:
        container.remove(force=True)


@pytest.fixture(scope="module")
def homes(tmp_path_factory, docker_client) -> dict[str, Path]:
    """Run each CLI twice (a task, then a correction in the same session); their homes."""
    root = tmp_path_factory.mktemp("real")
    copy_out(docker_client, DEFAULT_IMAGE, ["/opt/codex", "/opt/claude"], root / "bin")
    codex_bin, claude_bin = root / "bin" / "codex" / "bin" / "codex", root / "bin" / "claude" / "claude"
    ws = root / "my_app.v2"  # '_' and '.' in the folder: Claude Code's slug replaces them
    for skills in (".agents/skills/demo", ".claude/skills/demo"):
        (ws / skills).mkdir(parents=True)
        (ws / skills / "SKILL.md").write_text(SKILL)
    base = {"PATH": os.environ["PATH"], "HOME": str(root / "home"), "LANG": "C.UTF-8"}
    with ScriptedModelServer(SCENARIO) as srv:
        codex_home = root / "codex"
        codex_home.mkdir()
        (codex_home / "config.toml").write_text(CODEX_CONFIG.format(base_url=srv.base_url))
        env = {**base, "CODEX_HOME": str(codex_home), "FAKE_API_KEY": "dummy"}
        codex = [
            str(codex_bin),
            "exec",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
        ]
        run([*codex, f"please fix the greeting, my token is {GITHUB}"], ws, env)
        run([*codex, "resume", "--last", "no, that's wrong, it is still failing"], ws, env)

        claude_home = root / "claude"
        env = {**base, "CLAUDE_CONFIG_DIR": str(claude_home), "ANTHROPIC_BASE_URL": srv.anthropic_base_url}
        env.update(ANTHROPIC_API_KEY="dummy", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
        claude = [str(claude_bin), "--output-format", "json", "--allowedTools", "Bash Write Skill"]
        claude += ["--model", "claude-sonnet-4-6"]
        first = json.loads(run([*claude, "-p", f"please use the demo skill; password={PASSWORD}"], ws, env))
        run([*claude, "-p", "that didn't work, try again", "--resume", first["session_id"]], ws, env)
    return {"codex": codex_home, "claude": claude_home, "ws": ws}


def test_harvest_reads_what_the_real_clis_wrote(homes, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("CODEX_HOME", str(homes["codex"]))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(homes["claude"]))
    out = tmp_path / "harvest"
    assert main(["sleep", "harvest", "--out", str(out), "--include-tool-output"]) == 0
    summary = capsys.readouterr().out
    assert "sessions seen: 2" in summary and "  harvested: 2" in summary, summary
    index = HarvestIndex.model_validate_json((out / "index.json").read_bytes())
    records = {
        e.source: HarvestedSession.model_validate_json((out / e.record).read_bytes()) for e in index.sessions
    }

    cx = records["codex"]
    assert cx.cli_version == CODEX_VERSION, (
        "the staged Codex changed: re-check skillopt/testing/sleep_corpus.py"
    )
    assert cx.format == "codex-rollout/envelope" and cx.cwd == str(homes["ws"])
    assert cx.task == "please fix the greeting, my token is [REDACTED:github_token]"
    assert [t.role for t in cx.turns] == ["user", "assistant", "user", "assistant"]
    assert [(c.name, c.exit_code) for c in cx.tool_calls] == [("exec_command", 0), ("exec_command", 3)]
    assert cx.tool_calls[1].output == "boom\n"
    assert cx.skills_used == ("demo",)
    assert (cx.outcome.negative_feedback, cx.outcome.failed_tool_calls, cx.outcome.abandoned) == (1, 1, False)

    cc = records["claude-code"]
    assert cc.cli_version == CLAUDE_VERSION, (
        "the staged Claude Code changed: re-check skillopt/testing/sleep_corpus.py"
    )
    assert cc.format == "claude-code-jsonl/2" and cc.cwd == str(homes["ws"])
    assert Path(cc.source_path).parent.name == claude_slug(str(homes["ws"]))
    assert cc.task == "please use the demo skill; password=[REDACTED:secret_assignment]"
    assert [t.role for t in cc.turns] == ["user", "assistant", "user", "assistant"]
    assert [c.name for c in cc.tool_calls] == ["Skill", "Bash"]
    assert cc.tool_calls[1].failed and cc.tool_calls[1].exit_code == 2
    assert cc.skills_used == ("demo",)
    assert (cc.outcome.negative_feedback, cc.outcome.retries, cc.outcome.failed_tool_calls) == (1, 1, 1)

    written = b"".join(p.read_bytes() for p in out.rglob("*.json"))
    assert GITHUB.encode() not in written and PASSWORD.encode() not in written
