"""OfficeQA as the sandbox service runs it: the ``tools`` agent (glob/read/grep run in the
rollout container over the question's bulletins under ``docs/``), the ``qa`` agent (the cited
pages in the prompt, no container) and the agent CLIs (the bulletins under ``docs/``, the
question in ``task.md``). Grading is :mod:`skillopt.envs.officeqa.evaluator`, on the trusted side.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from skillopt.agents.context import Agent, AgentContext
from skillopt.agents.corpus_tools import CORPUS_DIR, CorpusToolsAgent
from skillopt.agents.qa import Verdict
from skillopt.envs._qa.env import PromptedQATask, QAEnv, fill
from skillopt.envs.base import EARLIER_ATTEMPT
from skillopt.envs.officeqa import evaluator
from skillopt.envs.officeqa.items import CORPUS_CASE, OfficeQAGold, OfficeQATask
from skillopt.envs.officeqa.spec import SPEC
from skillopt.errors import InvalidRequest
from skillopt.files import check_relative_name
from skillopt.types import RolloutRequest

__all__ = ["OfficeQAEnv"]


def _corpus(ctx: AgentContext) -> dict[str, bytes]:
    cases = ctx.request.task.cases
    return {f.name: f.content for f in cases[0].files} if cases else {}


class OfficeQACorpusTask(PromptedQATask):
    """One OfficeQA rollout (every agent): the cited bulletins go under ``docs/``."""

    def corpus_files(self) -> Mapping[str, bytes]:
        return _corpus(self.ctx)

    def max_tool_turns(self) -> int:
        payload = self.payload
        assert isinstance(payload, OfficeQATask)  # what this env's parse_task builds
        return int(payload.max_tool_turns)

    def workspace_files(self) -> Mapping[str, bytes]:
        files = dict(super().workspace_files())
        files.update({f"{CORPUS_DIR}/{name}": data for name, data in _corpus(self.ctx).items()})
        return files


class OfficeQAEnv(QAEnv):
    """Questions about U.S. Treasury Bulletins, graded by EM / token F1 or numerically."""

    spec = SPEC
    task_class = OfficeQACorpusTask
    task_model = OfficeQATask
    gold_model = OfficeQAGold
    prompts_dir = Path(__file__).parent / "prompts"
    skill_description = (
        "Rules for answering questions about U.S. Treasury Bulletins from their text and tables; "
        "read it before answering."
    )
    skill_preamble = (
        "You answer questions about U.S. Treasury Bulletins. The question is in `task.md`, the "
        "bulletins are text files under `docs/` (pages separated by form feeds). Answer with the "
        "value alone, inside <answer></answer>."
    )

    def check_request(self, request: RolloutRequest) -> None:
        cases = request.task.cases
        if request.grading.cases or len(cases) > 1 or (cases and cases[0].name != CORPUS_CASE):
            raise InvalidRequest(
                f"{self.name}: the task carries at most one case, {CORPUS_CASE!r} (the cited bulletins); "
                "grading.cases must be empty"
            )
        for f in cases[0].files if cases else ():
            check_relative_name(f.name, what=f"task.cases[{CORPUS_CASE}] file name")
        earlier = request.task.attributes.get(EARLIER_ATTEMPT, "")
        if not isinstance(earlier, str):
            raise InvalidRequest(f"{self.name}: task.attributes.{EARLIER_ATTEMPT} must be a string")
        self.parse_task(request.task.attributes)
        self.parse_gold(request.grading.attributes)

    def prompt_fields(self, task: OfficeQATask) -> dict[str, str]:
        files = "\n".join(f"- `{CORPUS_DIR}/{n}`" for n in task.source_files) or "(none listed)"
        pages = ""
        if task.oracle_pages.strip():
            pages = fill(self.prompt("oracle_pages"), pages=task.oracle_pages.strip()).strip()
        return {"question": task.question.strip(), "files": files, "pages": pages}

    def grade(self, response: str, task: OfficeQATask, gold: OfficeQAGold) -> Verdict:
        return evaluator.grade(response, gold.answer, mode=gold.grading, tolerance=gold.numeric_tolerance)

    def workspace_files(self, task: OfficeQATask) -> dict[str, bytes]:
        return {
            "task.md": (fill(self.prompt("exec_task"), **self.prompt_fields(task)).strip() + "\n").encode()
        }

    def build_agents(self) -> Mapping[str, Agent]:
        agents = dict(super().build_agents())
        agents["tools"] = CorpusToolsAgent(lambda ctx: OfficeQACorpusTask(self, ctx))
        return agents
