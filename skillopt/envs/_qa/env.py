"""Service side of the question-answering envs: payload checks, prompts, agents.

A QA env is a :class:`QAEnv` subclass that declares

* :attr:`QAEnv.task_model` / :attr:`QAEnv.gold_model`: pydantic models of ``task.attributes``
  (what the agent sees) and ``grading.attributes`` (gold, trusted side only); a request whose
  payload does not validate is refused with ``InvalidRequest`` naming the field;
* :attr:`QAEnv.prompts_dir`: ``rollout_system.md`` (with ``{skill_section}``) and
  ``rollout_user.md`` (with the fields of :meth:`QAEnv.prompt_fields`); the review and agent-CLI
  prompts default to the shared ones in ``_qa/prompts/``;
* :meth:`QAEnv.grade`: the trusted evaluator, a response → :class:`~skillopt.agents.qa.Verdict`.

The ``qa`` agent (:class:`~skillopt.agents.qa.QAAgent`, no container) is built for every QA
env; ``codex_exec``/``claude_code_exec`` (:class:`~skillopt.agents.exec_cli.ExecAgent` over
:class:`~skillopt.agents.qa.QAExecTask`) when the env's spec lists them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ValidationError

from skillopt.agents.common import read_prompt, skill_section, skill_text, with_diagnostic
from skillopt.agents.context import Agent, AgentContext
from skillopt.agents.exec_cli import CLIS, ExecAgent, render_skill_md
from skillopt.agents.qa import QAAgent, QAExecTask, QATask, Verdict
from skillopt.envs._qa.text import extract_answer
from skillopt.envs.base import EARLIER_ATTEMPT, ComposedEnv, options_error
from skillopt.errors import InvalidRequest
from skillopt.types import RolloutRequest

__all__ = ["SHARED_PROMPTS", "PromptedQATask", "QAEnv", "fill"]

SHARED_PROMPTS = Path(__file__).parent / "prompts"


def fill(template: str, **fields: str) -> str:
    """``template`` with each ``{name}`` replaced by ``fields[name]`` (other braces, e.g.
    LaTeX's ``\\boxed{}``, are left alone)."""
    for name, value in fields.items():
        template = template.replace("{" + name + "}", value)
    return template


class QAEnv(ComposedEnv):
    """Base of the question-answering envs (see the module docstring)."""

    task_model: ClassVar[type[BaseModel]]
    gold_model: ClassVar[type[BaseModel]]
    prompts_dir: ClassVar[Path]
    #: One line for the agent CLIs' SKILL.md front matter.
    skill_description: ClassVar[str] = (
        "Rules for answering the questions of this benchmark; read it before answering."
    )
    #: Shown before the learned rules in the CLIs' SKILL.md.
    skill_preamble: ClassVar[str] = ""
    #: The per-rollout task the agents get (a subclass adds what an env's agents need).
    task_class: ClassVar[type[PromptedQATask]]

    # -- payload -------------------------------------------------------------------------------

    def parse_task(self, attributes: Mapping[str, Any]) -> BaseModel:
        """The validated task payload.

        Raises:
            InvalidRequest: naming ``task.attributes.<field>``.
        """
        return self._parse(self.task_model, attributes, "task.attributes")

    def parse_gold(self, attributes: Mapping[str, Any]) -> BaseModel:
        """The validated grading payload.

        Raises:
            InvalidRequest: naming ``grading.attributes.<field>``.
        """
        return self._parse(self.gold_model, attributes, "grading.attributes")

    def _parse(self, model: type[BaseModel], attributes: Mapping[str, Any], where: str) -> BaseModel:
        try:
            return model.model_validate(dict(attributes))
        except ValidationError as exc:
            raise InvalidRequest(
                f"{self.name}: {options_error(self.name, exc, model=model, prefix=where)}"
            ) from None

    def check_request(self, request: RolloutRequest) -> None:
        if request.task.cases or request.grading.cases:
            raise InvalidRequest(
                f"{self.name}: tasks carry no files (task.cases and grading.cases must be empty)"
            )
        earlier = request.task.attributes.get(EARLIER_ATTEMPT, "")
        if not isinstance(earlier, str):
            raise InvalidRequest(f"{self.name}: task.attributes.{EARLIER_ATTEMPT} must be a string")
        self.parse_task(request.task.attributes)
        self.parse_gold(request.grading.attributes)

    # -- prompts and grading (env-specific) ------------------------------------------------------

    def prompt_fields(self, task: Any) -> dict[str, str]:
        """The ``{name}`` fields of ``rollout_user.md`` for one task payload."""
        raise NotImplementedError

    def grade(self, response: str, task: Any, gold: Any) -> Verdict:
        """Grade ``response`` (trusted side)."""
        raise NotImplementedError

    def workspace_files(self, task: Any) -> dict[str, bytes]:
        """Files an agent CLI gets: ``task.md`` (the user prompt) unless the env says more."""
        return {}

    def user_prompt(self, task: Any) -> str:
        """``rollout_user.md`` filled in for one task payload (without the deep-reflect parts)."""
        return fill(self.prompt("rollout_user"), **self.prompt_fields(task)).strip()

    def prompt(self, name: str) -> str:
        """Prompt ``name`` from the env's folder, else the shared QA one."""
        try:
            return read_prompt(self.prompts_dir, name)
        except FileNotFoundError:
            return read_prompt(SHARED_PROMPTS, name)

    # -- agents ----------------------------------------------------------------------------------

    def skill_md(self, skill: str) -> str:
        """SKILL.md for the agent CLIs."""
        return render_skill_md(
            skill,
            description=self.skill_description,
            title=f"{self.name} skill",
            preamble=self.skill_preamble,
        )

    def build_agents(self) -> Mapping[str, Agent]:
        agents: dict[str, Agent] = {"qa": QAAgent(lambda ctx: self.task_class(self, ctx))}
        for name in self.spec.agent_names:
            if name in CLIS:
                agents[name] = ExecAgent(
                    name,
                    make_task=lambda ctx, st: QAExecTask(ctx, st, self.task_class(self, ctx)),
                    skill_md=self.skill_md,
                )
        return agents


class PromptedQATask(QATask):
    """A QA task built from the env's prompt files and payload models (one per rollout)."""

    def __init__(self, env: QAEnv, ctx: AgentContext) -> None:
        self.env = env
        self.ctx = ctx
        req = ctx.request
        self.payload = env.parse_task(req.task.attributes)
        self.gold = env.parse_gold(req.grading.attributes)
        self.earlier = str(req.task.attributes.get(EARLIER_ATTEMPT, "") or "")

    def _user(self) -> str:
        text = self.env.user_prompt(self.payload)
        return with_diagnostic(text, self.ctx.request.diagnostic_instruction, earlier=self.earlier)

    def prompts(self) -> tuple[str, str]:
        section = skill_section(skill_text(self.ctx.request.skill))
        system = fill(self.env.prompt("rollout_system"), skill_section=section + "\n" if section else "")
        return system.strip() + "\n", self._user() + "\n"

    def review_prompt(self, previous: str) -> str:
        review = fill(self.env.prompt("review"), previous=extract_answer(previous)).strip()
        return f"{self._user()}\n\n{review}\n"

    def grade(self, response: str) -> Verdict:
        return self.env.grade(response, self.payload, self.gold)

    def workspace_files(self) -> Mapping[str, bytes]:
        files = dict(self.env.workspace_files(self.payload))
        files.setdefault("task.md", (self._user() + "\n").encode("utf-8"))
        return files

    def exec_prompt(self, cli: str) -> str:
        folder = ".agents/skills" if cli == "codex" else ".claude/skills"
        name = self.ctx.request.skill.name or "skillopt-target"
        return fill(self.env.prompt("exec_prompt"), skill_path=f"{folder}/{name}/SKILL.md").strip()


QAEnv.task_class = PromptedQATask
