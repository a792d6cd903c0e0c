"""The sleep env's trusted checks of a mined task's reference, on a stand-in workspace (the
container path is the CLI agents'; here a fake sandbox answers ``run_command``/``read_file``)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from skillopt.agents.sandbox import ExecOutcome
from skillopt.envs.registry import get_env
from skillopt.envs.sleep.checks import check_answer, check_workspace
from skillopt.envs.sleep.items import SleepGold, item_from_raw
from skillopt.errors import InvalidRequest, SandboxFileMissing
from skillopt.types import ModelSpec, RolloutRequest, SkillVersion


class FolderSandbox:
    """A workspace that is a local folder (for these tests only: it runs the trusted reference
    command on the host, never anything an agent wrote)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def read_file(self, path: str, *, max_bytes: int) -> bytes:
        target = self.root / path
        if not target.is_file():
            raise SandboxFileMissing(path)
        return target.read_bytes()[:max_bytes]

    def run_command(self, argv, *, timeout_s, env=None, stdin=None, output_limit_bytes=None) -> ExecOutcome:
        done = subprocess.run(
            argv, cwd=self.root, capture_output=True, text=True, timeout=timeout_s, check=False
        )
        return ExecOutcome(
            exit_code=done.returncode, stdout_tail=done.stdout, stderr_tail=done.stderr,
            stdout_bytes=len(done.stdout), stderr_bytes=len(done.stderr), duration_s=0.0,
        )  # fmt: skip


def test_a_command_reference_passes_on_exit_0_only(tmp_path):
    box = FolderSandbox(tmp_path)
    gold = SleepGold(kind="command", command="sh build.sh")
    (tmp_path / "build.sh").write_text("echo building\nexit 1\n")
    bad = check_workspace(box, gold, response="done", timeout_s=10)  # type: ignore[arg-type]
    assert bad.hard == 0.0 and "exited 1" in bad.fail_reason and "building" in bad.report
    (tmp_path / "build.sh").write_text("echo building\n")
    good = check_workspace(box, gold, response="done", timeout_s=10)  # type: ignore[arg-type]
    assert good.hard == 1.0 and good.fail_reason == "" and good.metrics["reference_exit"] == "0"


def test_a_file_reference_compares_normalised_text(tmp_path):
    box = FolderSandbox(tmp_path)
    gold = SleepGold(kind="file", path=".gitignore", content="build/\ndist/\n*.pyc\n")
    assert "is missing" in check_workspace(box, gold, response="", timeout_s=5).fail_reason  # type: ignore[arg-type]
    (tmp_path / ".gitignore").write_text("build/\r\ndist/  \n*.pyc\n\n")
    assert check_workspace(box, gold, response="", timeout_s=5).hard == 1.0  # type: ignore[arg-type]
    (tmp_path / ".gitignore").write_text("build/\n")
    assert "differs" in check_workspace(box, gold, response="", timeout_s=5).fail_reason  # type: ignore[arg-type]


def test_an_answer_reference_is_a_normalised_match():
    gold = SleepGold(kind="answer", answer="3000")
    assert check_answer("It is port\n<answer>3000</answer>", gold).hard == 1.0
    wrong = check_answer("<answer>8080</answer>", gold)
    assert wrong.hard == 0.0 and "3000" in wrong.report and "8080" in wrong.fail_reason


def _request(agent: str, raw: dict) -> RolloutRequest:
    item = item_from_raw(raw)
    return RolloutRequest(
        rollout_id=f"t/{item.id}", env="sleep", agent=agent, task=item.task, grading=item.grading,
        skill=SkillVersion(), model=ModelSpec(provider="p", model="m"),
    )  # fmt: skip


def test_the_qa_agent_takes_answer_tasks_only_and_says_what_to_set():
    command = {"id": "c1", "prompt": "make it build", "reference": {"kind": "command", "command": "make"}}
    answer = {"id": "a1", "prompt": "which port?", "reference": {"kind": "answer", "answer": "3000"}}
    env = get_env("sleep")
    env.validate(_request("qa", answer))
    env.validate(_request("claude_code_exec", command))
    with pytest.raises(InvalidRequest, match=r"env\.options\.kinds=\[answer\]"):
        env.validate(_request("qa", command))


def test_the_cli_agents_get_the_working_files_and_never_the_reference():
    raw = {
        "id": "c2",
        "prompt": "make build.sh work",
        "files": {"build.sh": "exit 1\n"},
        "reference": {"kind": "command", "command": "sh build.sh --secret-reference-check"},
    }
    env = get_env("sleep")
    task = env.parse_task(item_from_raw(raw).task.attributes)
    assert env.workspace_files(task) == {"build.sh": b"exit 1\n"}
    assert "--secret-reference-check" not in env.user_prompt(task) and "exit 1" in env.user_prompt(task)


def test_a_cli_rollout_of_a_command_task_is_scored_by_the_reference_run_afterwards(tmp_path):
    import time

    from skillopt.agents.common import RolloutState
    from skillopt.agents.context import AgentContext
    from skillopt.agents.exec_cli import CliRun
    from skillopt.envs.sleep.env import SleepExecTask
    from skillopt.types import Limits

    raw = {
        "id": "c3",
        "prompt": "make build.sh work",
        "reference": {"kind": "command", "command": "sh build.sh"},
    }
    req = _request("claude_code_exec", raw)
    box = FolderSandbox(tmp_path)
    ctx = AgentContext(
        request=req, sandbox=box, model=None, limits=Limits(wall_time_s=60), emit=lambda e: None,  # type: ignore[arg-type]
        deadline=time.monotonic() + 60,
    )  # fmt: skip
    env = get_env("sleep")
    outcome = ExecOutcome(
        exit_code=0, stdout_tail="", stderr_tail="", stdout_bytes=0, stderr_bytes=0, duration_s=1
    )
    (tmp_path / "build.sh").write_text("echo ok\n")  # what the agent left behind
    task = SleepExecTask(ctx, RolloutState(agent_ok=True), env.task_class(env, ctx))  # type: ignore[attr-defined]
    row = task.finish(CliRun(cli="claude", outcome=outcome, final="Fixed it.", calls=3))
    assert row.hard == 1.0 and row.metrics["kind"] == "command" and row.metrics["task_type"] == "command"
    assert row.trace.messages[-1].content.startswith("[EVALUATION RESULT]\nReference command: sh build.sh")
