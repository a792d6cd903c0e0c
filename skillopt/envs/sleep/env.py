"""The sleep env as the sandbox service runs it: tasks mined from the user's own sessions.

Agents, and why: the mined tasks are mostly the work the user's coding agent did (make a
command succeed, make tests pass, write a file), so the ``sleep_cli`` config (what a sleep run
trains with) uses that agent itself, ``claude_code_exec`` (``codex_exec`` for Codex users): the
CLI works in a container on the task's working files, and afterwards the reference is checked
in that workspace on the trusted side (:mod:`skillopt.envs.sleep.checks`). Answer tasks are
graded on the final message by the QA machinery (normalised exact match). The spec's default
agent (an empty ``env.agent``) is the in-service ``qa`` agent: it needs no container, gateway
or CLI image, plays the vendored sample (answer tasks) and the offline demo, and takes answer
tasks only: it is refused any other kind with a message naming ``env.options.kinds=[answer]``
and the CLI agents.

The task text comes from a transcript: it is untrusted data. The prompt quotes it as the user's
request (``prompts/rollout_user.md``), the payload carries ``from_transcript``, and the
reference never enters the container before the agent is done.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skillopt.agents.common import RolloutState
from skillopt.agents.context import Agent, AgentContext
from skillopt.agents.exec_cli import CLIS, CliRun, ExecAgent
from skillopt.agents.qa import QAExecTask, Verdict, qa_row
from skillopt.envs._qa.env import PromptedQATask, QAEnv
from skillopt.envs.sleep.checks import check_answer, check_workspace
from skillopt.envs.sleep.items import SleepGold, SleepTask
from skillopt.envs.sleep.spec import SPEC
from skillopt.errors import InvalidRequest
from skillopt.types import RolloutRequest, RolloutResult

__all__ = ["SleepEnv", "SleepExecTask"]

#: Longest a reference command may run (bounded by the rollout's own deadline).
_COMMAND_TIMEOUT_S = 120.0
_PROMPT_FILE_CHARS = 8000
_NO_FILES = "(none: work in the folder as it is)"


def render_files(files: Mapping[str, str]) -> str:
    """The working files for the prompt: each one's path and text, fenced (they are in the
    container's folder too); their text is clipped after :data:`_PROMPT_FILE_CHARS` in all."""
    if not files:
        return _NO_FILES
    parts, left = [], _PROMPT_FILE_CHARS
    for name in sorted(files):
        text = files[name][: max(left, 0)]
        left -= len(text)
        more = "" if len(text) == len(files[name]) else "\n[... clipped; the whole file is in the folder]"
        parts.append(f"`{name}`:\n~~~~\n{text.rstrip()}{more}\n~~~~")
    return "\n\n".join(parts)


class SleepEnv(QAEnv):
    """Mined tasks, checked by their reference."""

    spec = SPEC
    task_model = SleepTask
    gold_model = SleepGold
    prompts_dir = Path(__file__).parent / "prompts"
    skill_description = "Rules for doing the user's everyday coding tasks well; read it before starting."
    skill_preamble = (
        "These tasks come from your user's own earlier sessions. Do the work in the current folder; "
        "when the task asks a question, put the final answer inside <answer></answer>."
    )

    def prompt_fields(self, task: SleepTask) -> dict[str, str]:
        return {"prompt": task.prompt.strip(), "files": render_files(task.files)}

    def grade(self, response: str, task: SleepTask, gold: SleepGold) -> Verdict:
        if gold.kind != "answer":  # refused in check_request; kept as a clear row if it slips by
            return Verdict(
                hard=0.0, soft=0.0, answer="", fail_reason=f"a {gold.kind} task needs a container agent"
            )
        return check_answer(response, gold)

    def workspace_files(self, task: SleepTask) -> dict[str, bytes]:
        return {name: text.encode("utf-8") for name, text in task.files.items()}

    def check_request(self, request: RolloutRequest) -> None:
        super().check_request(request)
        kind = request.grading.attributes.get("kind")
        if request.agent == "qa" and kind != "answer":
            raise InvalidRequest(
                f"{self.name}: the qa agent grades answer tasks only, and this is a {kind} task; use "
                "env.agent=claude_code_exec or codex_exec, or load answer tasks only with env.options.kinds=[answer]"
            )

    def build_agents(self) -> Mapping[str, Agent]:
        agents = dict(super().build_agents())
        for name in self.spec.agent_names:
            if name in CLIS:
                agents[name] = ExecAgent(
                    name,
                    make_task=lambda ctx, st: SleepExecTask(ctx, st, self.task_class(self, ctx)),
                    skill_md=self.skill_md,
                )
        return agents


class SleepExecTask(QAExecTask):
    """A CLI's rollout of a mined task: answer tasks graded on the final message, the others
    by checking the reference in the CLI's workspace after it exited."""

    task: PromptedQATask

    def finish(self, run: CliRun) -> RolloutResult:
        gold: Any = self.task.gold
        if gold.kind == "answer":
            return super().finish(run)
        st: RolloutState = self.st
        st.notes.update(run.notes())
        st.phase = "eval"
        t0 = time.monotonic()
        ctx: AgentContext = self.ctx
        timeout = max(1.0, min(_COMMAND_TIMEOUT_S, ctx.remaining_s()))
        verdict = check_workspace(ctx.require_sandbox(), gold, response=run.final, timeout_s=timeout)
        st.add_time("grade", t0)
        return qa_row(ctx, st, verdict, response=run.final, metrics=run.metrics())
