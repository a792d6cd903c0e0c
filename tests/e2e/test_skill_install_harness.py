"""``skillopt skill install`` proven with the real agent CLIs: the worked package of
docs/skills.md is installed by the real ``skillopt`` process (project scope) next to a second
package (user scope), then the real Claude Code and the real Codex CLI of the runtime image run
in a container against the scripted model server. Each must offer both skills to the model
(their names and descriptions in its first request, not their bodies), load the package when
the model asks, and run its script from the installed folder (executable bit kept).

The container joins an internal Docker network whose only reachable address is the scripted
server (the exec agents' :class:`GatewayNetwork`, firewalled to its port), as a rollout's would.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from sandbox.runtime.docker.network import GatewayNetwork, remove_host_network
from sandbox.runtime.spec import DEFAULT_IMAGE
from skillopt.testing.scripted import ScriptedModelServer

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "docs" / "examples" / "sheet-totals"
DESCRIPTION = "Add or fix a totals row in an .xlsx worksheet."
BODY = "Before writing anything, read `references/conventions.md`"
USER_SKILL = (
    "---\nname: house-style\ndescription: House style for reports MARKER-USER-SCOPE-SKILL.\n---\n\n"
    "# House style\nBODY-MARKER-HOUSE-STYLE: short sentences.\n"
)
SELF_TEST = "scripts/check_totals.py --self-test"
UID = "1000:1000"  # the runtime image's user, as for rollouts

SCENARIO = {
    "rules": [
        {
            "name": "claude",
            "match": {"contains": ["MARKER-CC-TASK"], "api": ["messages"]},
            "replies": [
                {"tool_calls": [{"name": "Skill", "arguments": {"skill": "sheet-totals"}}]},
                {"shell": f".claude/skills/sheet-totals/{SELF_TEST}"},
                {"text": "Done."},
            ],
        },
        {
            "name": "codex",
            "match": {"contains": ["MARKER-CODEX-TASK"], "api": ["responses"]},
            "replies": [
                {
                    "tool_calls": [
                        {
                            "name": "exec_command",
                            "arguments": {
                                "cmd": f".agents/skills/sheet-totals/{SELF_TEST} && "
                                "cat .agents/skills/sheet-totals/references/conventions.md",
                                "yield_time_ms": 60000,
                            },
                        }
                    ]
                },
                {"text": "Done."},
            ],
        },
    ],
    "default": {"reply": "ok"},
}


CLAUDE_ARGV = [
    "claude", "-p", "MARKER-CC-TASK: add the totals row to sales.xlsx",
    "--output-format", "stream-json", "--verbose",
    "--model", "claude-sonnet-4-6",
    "--permission-mode", "bypassPermissions",
    "--allowedTools", "Bash Read Skill",
]  # fmt: skip


def codex_argv(base_url: str) -> list[str]:
    """``codex exec`` as the codex_exec agent runs it (skillopt.agents.exec_cli)."""
    provider = (
        f'{{name="scripted",base_url="{base_url}",env_key="SCRIPTED_API_KEY",'
        'wire_api="responses",request_max_retries=0,stream_max_retries=0}'
    )
    argv = [
        "codex", "exec",
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        "--ephemeral",
        "--json",
        "-C", "/workspace",
        "-m", "gpt-5.5",
        "-c", "model_provider=scripted",
        "-c", f"model_providers.scripted={provider}",
        "-c", "analytics.enabled=false",
        "--disable", "plugins",
        "--disable", "remote_plugin",
        "--disable", "apps",
        "MARKER-CODEX-TASK: add the totals row to sales.xlsx",
    ]  # fmt: skip
    return argv


def install(*args: str, home: Path) -> str:
    """``skillopt skill install ARGS`` as a real process with ``HOME=home``."""
    env = {**os.environ, "HOME": str(home)}
    env.pop("CLAUDE_CONFIG_DIR", None)
    res = subprocess.run(
        [sys.executable, "-m", "controller.cli", "skill", "install", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    return res.stdout


def hand_over(*trees: Path) -> None:
    """Give the folders to the container's user (it writes its config under HOME)."""
    uid, gid = (int(x) for x in UID.split(":"))
    for tree in trees:
        for dirpath, dirnames, filenames in os.walk(tree):
            for name in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
                os.chown(name, uid, gid, follow_symlinks=False)


@pytest.fixture(scope="module")
def gateway(docker_client) -> Iterator[tuple[GatewayNetwork, ScriptedModelServer]]:
    host_id = f"skilltest-{secrets.token_hex(4)}"
    net = GatewayNetwork(docker_client, host_id)
    try:
        with ScriptedModelServer(SCENARIO, host=net.gateway_ip) as server:
            net.firewall(server.port)
            yield net, server
    finally:
        net.close()
        remove_host_network(docker_client, host_id)


@pytest.fixture
def project(tmp_path) -> tuple[Path, Path]:
    """An empty workspace and home, and a second skill (``house-style``, one file) beside them;
    each test installs into them for its harness."""
    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    home.mkdir()
    (tmp_path / "house-style").mkdir()
    (tmp_path / "house-style" / "SKILL.md").write_text(USER_SKILL)
    return ws, home


def run_cli(
    client: docker.DockerClient,
    net: GatewayNetwork,
    ws: Path,
    home: Path,
    argv: list[str],
    env: dict[str, str],
) -> tuple[int, str]:
    container = client.containers.run(
        DEFAULT_IMAGE,
        argv,
        detach=True,
        network=net.name,
        working_dir="/workspace",
        user=UID,
        environment={"HOME": "/home/agent", **env},
        volumes={
            str(ws): {"bind": "/workspace", "mode": "rw"},
            str(home): {"bind": "/home/agent", "mode": "rw"},
        },
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        mem_limit="2g",
        init=True,
        labels={"skillopt.test": "skill-install"},
    )
    try:
        status = container.wait(timeout=240)
        logs = container.logs(stdout=True, stderr=True).decode("utf-8", "replace")
    finally:
        container.remove(force=True)
    return int(status["StatusCode"]), logs


def bodies(server: ScriptedModelServer, api: str, marker: str) -> list[str]:
    return [json.dumps(r.body) for r in server.api_requests(api) if marker in json.dumps(r.body)]


def test_claude_code_offers_the_installed_skills_and_runs_the_packages_script(
    docker_client, gateway, project, tmp_path
):
    net, server = gateway
    ws, home = project
    out = install(str(EXAMPLE), "--harness", "claude-code", "--dir", str(ws), home=home)
    assert f"at {ws}/.claude/skills/sheet-totals/" in out
    install(str(tmp_path / "house-style"), "--harness", "claude-code", "--scope", "user", home=home)
    assert (home / ".claude" / "skills" / "house-style" / "SKILL.md").is_file()
    hand_over(ws, home)
    code, logs = run_cli(
        docker_client,
        net,
        ws,
        home,
        CLAUDE_ARGV,
        {
            "ANTHROPIC_BASE_URL": server.anthropic_base_url,
            "ANTHROPIC_API_KEY": "dummy",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
        },
    )
    assert code == 0, logs[-3000:]
    turns = bodies(server, "messages", "MARKER-CC-TASK")
    assert len(turns) >= 3, logs[-3000:]
    # Offered: both skills by name and description; neither body yet (progressive disclosure).
    first = turns[0]
    assert "sheet-totals" in first and DESCRIPTION in first
    assert "house-style" in first and "MARKER-USER-SCOPE-SKILL" in first
    assert BODY not in first and "BODY-MARKER-HOUSE-STYLE" not in first
    # The Skill tool loaded the installed package's SKILL.md ...
    loaded = next(t for t in turns if "Base directory for this skill" in t)
    assert BODY in loaded and "/workspace/.claude/skills/sheet-totals" in loaded
    # ... and its script ran from the installed folder, by its executable bit.
    assert any("check_totals self-test: ok" in t for t in turns), logs[-3000:]


def test_codex_offers_the_installed_skills_and_reads_the_package(docker_client, gateway, project, tmp_path):
    net, server = gateway
    ws, home = project
    out = install(str(EXAMPLE), "--harness", "codex", "--dir", str(ws), home=home)
    assert f"at {ws}/.agents/skills/sheet-totals/" in out
    install(str(tmp_path / "house-style"), "--harness", "codex", "--scope", "user", home=home)
    assert (home / ".agents" / "skills" / "house-style" / "SKILL.md").is_file()
    (home / ".codex").mkdir()
    hand_over(ws, home)
    code, logs = run_cli(
        docker_client,
        net,
        ws,
        home,
        codex_argv(server.base_url),
        {"CODEX_HOME": "/home/agent/.codex", "SCRIPTED_API_KEY": "dummy"},
    )
    assert code == 0, logs[-3000:]
    turns = bodies(server, "responses", "MARKER-CODEX-TASK")
    assert len(turns) >= 2, logs[-3000:]
    first = turns[0]
    assert "sheet-totals" in first and DESCRIPTION in first
    assert "house-style" in first and "MARKER-USER-SCOPE-SKILL" in first
    assert BODY not in first and "BODY-MARKER-HOUSE-STYLE" not in first
    # Codex lists skill roots, then each skill as `name: description (file: rN/name/SKILL.md)`.
    assert "/workspace/.agents/skills" in first and "/home/agent/.agents/skills" in first
    later = turns[-1]
    assert "check_totals self-test: ok" in later and "Totals conventions" in later, logs[-3000:]
