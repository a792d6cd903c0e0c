"""Service side of the code-generation envs (HumanEval, MBPP): payload checks, prompts, agents,
trusted grading.

Agents (composed from :mod:`skillopt.agents`):

* ``codegen_single``: one model call, the fenced program graded (the official setting);
* ``codegen_multi``: the program is loaded in the agent's own container (no tests there) and a
  load error (syntax error, exception at import, missing function) is fed back, up to
  ``limits.max_turns``;
* ``codex_exec`` / ``claude_code_exec``: the CLI works in its container (``task.md``; it may run
  Python there) and leaves ``solution.py`` (else the final message's code block is taken).

Whatever the agent, the program is graded by :func:`~skillopt.envs._code.grading.grade_program`
in fresh grading containers (``ctx.grading_sandbox``), never in the agent's container, with the
values compared here on the trusted side.

Workspace of the exec agents::

    task.md        the problem and the harness notes
    solution.py    what the agent writes (graded elsewhere afterwards)
"""

from __future__ import annotations

import ast
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ValidationError

from skillopt.agents.codegen import Attempt, CodegenAgent, extract_code
from skillopt.agents.common import (
    RolloutState,
    exec_record,
    read_prompt,
    skill_section,
    skill_text,
    with_diagnostic,
)
from skillopt.agents.context import Agent, AgentContext, ProgressEvent
from skillopt.agents.exec_cli import CliRun, ExecAgent, render_skill_md
from skillopt.agents.sandbox import read_output
from skillopt.envs._code.grading import GradingError, grade_program
from skillopt.envs._code.items import CodeGold, CodeTaskPayload
from skillopt.envs._code.plan import TestPlan, plan_tests
from skillopt.envs._qa.env import fill
from skillopt.envs.base import EARLIER_ATTEMPT, ComposedEnv, options_error
from skillopt.errors import InvalidRequest, OutputLimitExceeded
from skillopt.types import InfraErrorKind, InfraFailure, Message, RolloutRequest, RolloutResult

__all__ = ["SHARED_PROMPTS", "CodeEnv", "assemble_program"]

SHARED_PROMPTS = Path(__file__).parent / "prompts"
_GRADE_TIMEOUT_S = 60.0
_LOAD_CHECK_S = 20.0
_MAX_SOLUTION_BYTES = 1024 * 1024
_LOADER = """\
import runpy, sys
ns = runpy.run_path("solution.py", run_name="solution")
name = sys.argv[1]
if not callable(ns.get(name)):
    raise SystemExit(f"solution.py defines no function {name!r}")
print(f"solution.py loads and defines {name}()")
"""


def _imports_of(prompt: str) -> str:
    """The top-level import statements of a HumanEval prompt (``from typing import List``)."""
    try:
        tree = ast.parse(prompt)
    except SyntaxError:
        return ""
    return "\n".join(ast.unparse(n) for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom))


def assemble_program(code: str, task: CodeTaskPayload) -> str:
    """The module graded for a reply's code: the code itself when it defines the entry point
    (HumanEval: with the prompt's imports first, which a rewritten function often drops), else,
    for HumanEval, the prompt followed by the code (a body completion)."""
    defines = f"def {task.entry_point}(" in code
    if task.benchmark == "humaneval":
        if defines:
            imports = _imports_of(task.prompt)
            return f"{imports}\n\n{code}\n" if imports else code + "\n"
        return task.prompt + code + "\n"
    return code + "\n"


class CodeEnv(ComposedEnv):
    """Base of the code-generation envs; subclasses set :attr:`spec`, :attr:`prompts_dir` and
    :attr:`skill_description`."""

    prompts_dir: ClassVar[Path]
    skill_description: ClassVar[str] = "Rules for writing Python functions that pass hidden tests."

    # -- payload ----------------------------------------------------------------------------------

    def _parse(self, model: type[BaseModel], attributes: Mapping[str, Any], where: str) -> Any:
        try:
            return model.model_validate(dict(attributes))
        except ValidationError as exc:
            raise InvalidRequest(
                f"{self.name}: {options_error(self.name, exc, model=model, prefix=where)}"
            ) from None

    def parse_task(self, attributes: Mapping[str, Any]) -> CodeTaskPayload:
        """The validated task payload.

        Raises:
            InvalidRequest: naming ``task.attributes.<field>``.
        """
        return self._parse(CodeTaskPayload, attributes, "task.attributes")

    def parse_gold(self, attributes: Mapping[str, Any]) -> CodeGold:
        """The validated grading payload.

        Raises:
            InvalidRequest: naming ``grading.attributes.<field>``.
        """
        return self._parse(CodeGold, attributes, "grading.attributes")

    def plan(self, task: CodeTaskPayload, gold: CodeGold) -> TestPlan:
        """The grading plan of the gold tests.

        Raises:
            InvalidRequest: the tests do not parse or assert nothing about the candidate.
        """
        try:
            return plan_tests(
                gold.test,
                entry_point=task.entry_point,
                check_function=gold.check_function,
                imports=gold.test_imports,
            )
        except (ValueError, SyntaxError) as exc:
            raise InvalidRequest(f"{self.name}: grading.attributes.test: {exc}") from None

    def check_request(self, request: RolloutRequest) -> None:
        if request.task.cases or request.grading.cases:
            raise InvalidRequest(
                f"{self.name}: tasks carry no files (task.cases and grading.cases must be empty)"
            )
        earlier = request.task.attributes.get(EARLIER_ATTEMPT, "")
        if not isinstance(earlier, str):
            raise InvalidRequest(f"{self.name}: task.attributes.{EARLIER_ATTEMPT} must be a string")
        task = self.parse_task(request.task.attributes)
        gold = self.parse_gold(request.grading.attributes)
        self.plan(task, gold)

    # -- prompts -------------------------------------------------------------------------------

    def prompt(self, name: str) -> str:
        """Prompt ``name`` from the env's folder, else the shared code-env one."""
        try:
            return read_prompt(self.prompts_dir, name)
        except FileNotFoundError:
            return read_prompt(SHARED_PROMPTS, name)

    def user_prompt(self, task: CodeTaskPayload) -> str:
        """``rollout_user.md`` filled in (without the deep-reflect parts)."""
        return fill(
            self.prompt("rollout_user"),
            prompt=task.prompt.rstrip(),
            entry_point=task.entry_point,
            signature=task.signature or f"def {task.entry_point}(...):",
        ).strip()

    def skill_md(self, skill: str) -> str:
        """SKILL.md for the agent CLIs."""
        return render_skill_md(skill, description=self.skill_description, title=f"{self.name} skill")

    # -- agents --------------------------------------------------------------------------------

    def build_agents(self) -> Mapping[str, Agent]:
        return {
            "codegen_single": CodegenAgent(lambda ctx, st: CodeRollout(self, ctx, st), multi_turn=False),
            "codegen_multi": CodegenAgent(lambda ctx, st: CodeRollout(self, ctx, st), multi_turn=True),
            "codex_exec": ExecAgent(
                "codex_exec", make_task=lambda ctx, st: CodeExecRollout(self, ctx, st), skill_md=self.skill_md
            ),
            "claude_code_exec": ExecAgent(
                "claude_code_exec",
                make_task=lambda ctx, st: CodeExecRollout(self, ctx, st),
                skill_md=self.skill_md,
            ),
        }

    # -- grading -------------------------------------------------------------------------------

    def grade_row(
        self, ctx: AgentContext, st: RolloutState, code: str, metrics: Mapping[str, Any]
    ) -> RolloutResult:
        """Grade ``code`` in fresh grading containers and build the row (trusted side)."""
        req = ctx.request
        task = self.parse_task(req.task.attributes)
        gold = self.parse_gold(req.grading.attributes)
        base = {"benchmark": task.benchmark, "entry_point": task.entry_point, **metrics}
        base["task_type"] = str(req.task.attributes.get("task_type", ""))
        if not code.strip():
            reason = "no-model-reply" if not st.agent_ok else "empty-code-block"
            return self._row(ctx, st, hard=0.0, soft=0.0, reason=reason, phase="extract", metrics=base)
        st.code = assemble_program(code, task)
        st.phase = "eval"
        ctx.emit(ProgressEvent(phase="grading", turn=st.turns, detail="fresh grading container"))
        timeout = max(1.0, min(float(ctx.limits.exec_timeout_s or _GRADE_TIMEOUT_S), _GRADE_TIMEOUT_S))
        timeout = max(1.0, min(timeout, ctx.remaining_s() - 5.0))
        t0 = time.monotonic()
        try:
            verdict = grade_program(
                ctx.fresh_grading_sandbox,
                st.code,
                self.plan(task, gold),
                entry_point=task.entry_point,
                reference=gold.reference,
                timeout_s=timeout,
            )
        except GradingError as exc:
            st.add_time("grade", t0)
            info = InfraFailure(kind=InfraErrorKind.INTERNAL, message=f"grader: {exc}")
            row = self._row(
                ctx, st, hard=0.0, soft=0.0, reason=f"grader-error: {exc}", phase="eval", metrics=base
            )
            return replace(row, infra_error=info)
        st.add_time("grade", t0)
        if verdict.exec_outcome is not None:
            st.executions.append(
                exec_record(verdict.exec_outcome, turn=st.turns, case="grading", code=st.code)
            )
        return self._row(
            ctx,
            st,
            hard=verdict.hard,
            soft=verdict.soft,
            reason=verdict.fail_reason,
            phase="done" if verdict.hard >= 1.0 else "eval",
            metrics={**base, **verdict.metrics},
            cases=verdict.cases,
            report=verdict.report,
        )

    def _row(
        self,
        ctx: AgentContext,
        st: RolloutState,
        *,
        hard: float,
        soft: float,
        reason: str,
        phase: str,
        metrics: Mapping[str, Any],
        cases: tuple = (),
        report: str = "",
    ) -> RolloutResult:
        req = ctx.request
        messages = list(st.messages)
        if report:
            messages.append(Message(role="system", content=report))
        return RolloutResult(
            id=req.task.id,
            rollout_id=req.rollout_id,
            hard=hard,
            soft=soft,
            fail_reason=reason,
            phase=phase,
            agent_ok=st.agent_ok,
            n_turns=st.turns,
            cases=tuple(cases),
            metrics={"code_ok": bool(st.code), **metrics},
            trace=st.trace(messages=messages),
            usage=st.usage,
            timings_s=dict(st.timings),
        )


class CodeRollout:
    """Codegen on a code task (one per rollout; a :class:`~skillopt.agents.codegen.CodeTask`)."""

    def __init__(self, env: CodeEnv, ctx: AgentContext, st: RolloutState) -> None:
        self.env = env
        self.ctx = ctx
        self.st = st
        self.task = env.parse_task(ctx.request.task.attributes)

    def _user(self) -> str:
        req = self.ctx.request
        earlier = str(req.task.attributes.get(EARLIER_ATTEMPT, "") or "")
        return with_diagnostic(self.env.user_prompt(self.task), req.diagnostic_instruction, earlier=earlier)

    def prompts(self) -> tuple[str, str]:
        section = skill_section(skill_text(self.ctx.request.skill))
        system = fill(self.env.prompt("rollout_system"), skill_section=section + "\n" if section else "")
        return system.strip() + "\n", self._user() + "\n"

    def no_code_feedback(self) -> str:
        return self.env.prompt("retry_no_code").strip()

    def attempt(self, code: str, turn: int) -> Attempt:
        """Load the program in the agent's own container (no tests there): a load error is fed
        back, a clean load ends the loop."""
        box = self.ctx.require_sandbox()
        program = assemble_program(code, self.task)
        box.write_file("solution.py", program.encode("utf-8"))
        box.write_file(".skillopt_load.py", _LOADER.encode("utf-8"))
        timeout = max(1.0, min(_LOAD_CHECK_S, self.ctx.remaining_s() - 10.0))
        t0 = time.monotonic()
        outcome = box.run_command(["python3", ".skillopt_load.py", self.task.entry_point], timeout_s=timeout)
        self.st.add_time("exec", t0)
        self.st.executions.append(exec_record(outcome, turn=turn, case="load", code=program))
        if outcome.ok:
            return Attempt(done=True)
        error = (
            "timed out while loading" if outcome.timed_out else (outcome.stderr_tail or outcome.stdout_tail)
        )
        return Attempt(
            done=False, feedback=fill(self.env.prompt("retry_load_error"), error=error.strip()[-3000:])
        )

    def finish(self) -> RolloutResult:
        return self.env.grade_row(self.ctx, self.st, self.st.code, {})


class CodeExecRollout:
    """An agent CLI on a code task (an :class:`~skillopt.agents.exec_cli.ExecTask`)."""

    def __init__(self, env: CodeEnv, ctx: AgentContext, st: RolloutState) -> None:
        self.env = env
        self.ctx = ctx
        self.st = st
        self.task = env.parse_task(ctx.request.task.attributes)

    def prepare(self, cli: str) -> tuple[str, str]:
        req = self.ctx.request
        earlier = str(req.task.attributes.get(EARLIER_ATTEMPT, "") or "")
        task_md = with_diagnostic(
            self.env.user_prompt(self.task), req.diagnostic_instruction, earlier=earlier
        )
        task_md = (
            task_md.rstrip() + "\n\n" + fill(self.env.prompt("exec_task"), entry_point=self.task.entry_point)
        )
        self.ctx.require_sandbox().write_file("task.md", task_md.encode("utf-8"))
        folder = ".agents/skills" if cli == "codex" else ".claude/skills"
        name = req.skill.name or "skillopt-target"
        prompt = fill(
            self.env.prompt("exec_prompt"),
            skill_path=f"{folder}/{name}/SKILL.md",
            entry_point=self.task.entry_point,
        ).strip()
        return task_md, prompt

    def finish(self, run: CliRun) -> RolloutResult:
        try:
            raw = read_output(self.ctx.require_sandbox(), "solution.py", max_bytes=_MAX_SOLUTION_BYTES)
        except OutputLimitExceeded:
            reason = f"solution-too-large: more than {_MAX_SOLUTION_BYTES} bytes"
            return self.env._row(
                self.ctx, self.st, hard=0.0, soft=0.0, reason=reason, phase="agent", metrics={}
            )
        code = raw.decode("utf-8", "replace") if raw else extract_code(run.final)
        metrics = {**run.metrics(), "solution_file": raw is not None}
        self.st.notes.update(run.notes())
        if not code.strip() and run.outcome.timed_out:
            return self.env._row(
                self.ctx,
                self.st,
                hard=0.0,
                soft=0.0,
                reason="agent-timeout",
                phase="extract",
                metrics=metrics,
            )
        return self.env.grade_row(self.ctx, self.st, code, metrics)
