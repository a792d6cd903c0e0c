"""SpreadsheetBench's agents, composed from the env-independent blocks of :mod:`skillopt.agents`
with this env's prompts, workbook preview, case runner and trusted grader (:mod:`.cases`).

* ``codegen_single`` / ``codegen_multi``: :class:`~skillopt.agents.codegen.CodegenAgent` over
  :class:`SheetCodeTask` (runs the script on case 1 for feedback, then on every case).
* ``react``: :class:`~skillopt.agents.react.ReactAgent` over :class:`SheetReactTask`
  (``input.xlsx`` in the workspace, an auto-verify block after running ``solution.py``, then
  ``solution.py`` graded on every case in a folder the model never saw).
* ``codex_exec`` / ``claude_code_exec``: :class:`~skillopt.agents.exec_cli.ExecAgent` over
  :class:`SheetExecTask`.

Workspace of the exec agents::

    task.md            instruction, preview and the harness notes
    input.xlsx         case 1's input
    run_solution.py    runs solution.py on input.xlsx -> output.xlsx (for the agent to check)
    solution.py        what the agent writes; graded per case under cases/<n>/ afterwards
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping
from functools import cache
from pathlib import Path

from skillopt.agents.codegen import Attempt, CodegenAgent, extract_code
from skillopt.agents.common import RolloutState, skill_section, skill_text
from skillopt.agents.context import Agent, AgentContext, ProgressEvent
from skillopt.agents.exec_cli import CliRun, ExecAgent, render_skill_md
from skillopt.agents.react import ReactAgent, ReactTools
from skillopt.agents.sandbox import read_output
from skillopt.envs.spreadsheetbench.cases import (
    WORKSPACE,
    CaseRunner,
    Grades,
    build_row,
    error_text,
    load_prompt,
    task_prompt,
)
from skillopt.envs.spreadsheetbench.evaluator import feedback_report
from skillopt.envs.spreadsheetbench.preview import preview_workbook
from skillopt.errors import OutputLimitExceeded
from skillopt.types import RolloutResult

__all__ = ["SheetCodeTask", "SheetExecTask", "SheetReactTask", "build_agents", "sheet_skill_md"]

VERIFY_TIMEOUT_S = 30.0
_VERIFY_KEEP = 3000
_MAX_SOLUTION_BYTES = 1024 * 1024
_BASH_DESCRIPTION = (
    "Run a shell command (bash) in the working directory, which holds input.xlsx. python3 with "
    "openpyxl and pandas is available; there is no network. Returns the exit code and the output "
    "(stdout then stderr, cut after about 4000 characters). Running solution.py also returns an "
    "automatic check of output.xlsx."
)
_RUN_SOLUTION = """\
# Runs solution.py on input.xlsx and saves output.xlsx (the harness defines the two paths).
import re, runpy, sys
src = open("solution.py", encoding="utf-8").read()
src = re.sub(r"^([ \\t]*)(?:INPUT_PATH|OUTPUT_PATH)[ \\t]*=(?!=).*$", r"\\1pass", src, flags=re.M)
namespace = {"__name__": "__main__", "INPUT_PATH": "input.xlsx", "OUTPUT_PATH": "output.xlsx"}
exec(compile("INPUT_PATH = 'input.xlsx'\\nOUTPUT_PATH = 'output.xlsx'\\n" + src, "solution.py", "exec"), namespace)
print("saved output.xlsx")
"""


def _task_metrics(ctx: AgentContext) -> dict[str, str]:
    attrs = ctx.request.task.attributes
    return {
        "instruction_type": str(attrs.get("instruction_type", "")),
        "task_type": str(attrs.get("task_type", "")),
    }


def sheet_skill_md(skill: str) -> str:
    """SKILL.md for the agent CLIs: front matter and the skill body."""
    return render_skill_md(
        skill,
        description=(
            "Rules and workflow for spreadsheet manipulation tasks with openpyxl/pandas; read it "
            "before writing solution.py."
        ),
        title="Spreadsheet task skill",
    )


class SheetCodeTask:
    """Codegen on a SpreadsheetBench task: preview in the prompt, case 1 for feedback."""

    def __init__(self, ctx: AgentContext, st: RolloutState) -> None:
        self.ctx = ctx
        self.st = st
        self.runner = CaseRunner(ctx, st)

    def prompts(self) -> tuple[str, str]:
        req = self.ctx.request
        self.runner.write_inputs()
        preview = preview_workbook(self.runner.inputs[self.runner.first])
        self.st.notes["spreadsheet_preview"] = preview.strip()
        base = load_prompt("codegen_system").strip()
        section = skill_section(skill_text(req.skill))
        system = f"{base}\n\n{section}" if section else base + "\n"
        user = task_prompt(
            "codegen_user",
            req.task.instruction,
            dict(req.task.attributes),
            preview,
            req.diagnostic_instruction,
        )
        return system, user

    def no_code_feedback(self) -> str:
        return load_prompt("codegen_retry_no_code").strip()

    def attempt(self, code: str, turn: int) -> Attempt:
        first = self.runner.first
        outcome, output = self.runner.run(first, code, turn)
        self.st.outputs = {first: (outcome, output)}
        if not outcome.ok:
            text = load_prompt("codegen_retry_error").format(
                error=error_text(outcome, self.runner.exec_timeout)
            )
            return Attempt(done=False, feedback=text)
        if output is None:
            return Attempt(done=False, feedback=load_prompt("codegen_retry_no_output").strip())
        if self.ctx.request.use_eval_feedback:
            verdict = self.runner.grade(first, output)
            return (
                Attempt(done=True) if verdict.ok else Attempt(done=False, feedback=feedback_report(verdict))
            )
        return Attempt(done=True)

    def finish(self) -> RolloutResult:
        st = self.st
        if not st.code:
            grades = Grades()
            fail_reason = "empty-code-block" if st.agent_ok else "no-model-reply"
            phase = "extract" if st.agent_ok else "llm"
        else:
            grades = self.runner.grade_all(st.code, st.turns)
            fail_reason, phase = grades.fail_reason, "eval"
        return build_row(
            self.ctx,
            st,
            grades,
            fail_reason=fail_reason,
            phase=phase,
            metrics={"code_ok": bool(st.code), **_task_metrics(self.ctx)},
            notes={},
        )


@cache
def _verify_source() -> str:
    return (Path(__file__).with_name("react_verify.py")).read_text(encoding="utf-8")


class SheetReactTask:
    """ReAct on a SpreadsheetBench task: ``input.xlsx`` in the workspace, auto-verify after
    running ``solution.py``, then ``solution.py`` graded on every case."""

    bash_description = _BASH_DESCRIPTION

    def __init__(self, ctx: AgentContext, st: RolloutState, tools: ReactTools) -> None:
        self.ctx = ctx
        self.st = st
        self.tools = tools
        # The final runs use a folder created after the loop, so nothing the model left in the
        # workspace (a stale output.xlsx, an edited input) can stand in for a case's output.
        self.runner = CaseRunner(
            ctx, st, root=f"grading-{secrets.token_hex(4)}", env={"PYTHONPATH": WORKSPACE}
        )

    def prompts(self) -> tuple[str, str]:
        req = self.ctx.request
        first_input = self.runner.inputs[self.runner.first]
        self.ctx.require_sandbox().write_file("input.xlsx", first_input)
        preview = preview_workbook(first_input)
        self.st.notes["spreadsheet_preview"] = preview.strip()
        text = load_prompt("react_system").replace("{critical_rules}", load_prompt("react_rules").strip())
        system = text.replace("{skill_section}", skill_section(skill_text(req.skill))).strip() + "\n"
        user = task_prompt(
            "react_user", req.task.instruction, dict(req.task.attributes), preview, req.diagnostic_instruction
        )
        return system, user

    def after_bash(self, cmd: str, tools: ReactTools, turn: int) -> str:
        return self._verify() if "solution.py" in cmd else ""

    def _verify(self) -> str:
        """The auto-verify block, computed inside the container."""
        timeout = self.tools.budget(VERIFY_TIMEOUT_S)
        if timeout is None:
            return "[auto-verify] skipped: the rollout's wall time is used up"
        t0 = time.monotonic()
        outcome = self.ctx.require_sandbox().run_command(
            ["python3", "-c", _verify_source()], timeout_s=timeout
        )
        self.st.add_time("exec", t0)
        text = outcome.stdout_tail.strip()
        if not outcome.ok:
            problem = (
                "timed out"
                if outcome.timed_out
                else (outcome.stderr_tail.strip() or f"exit {outcome.exit_code}")
            )
            text = f"{text}\n[auto-verify] the check itself failed: {problem[-500:]}".strip()
        if len(text) > _VERIFY_KEEP:
            text = text[:_VERIFY_KEEP] + "\n... [auto-verify output truncated]"
        return text

    def after_write(self, path: str, content: str) -> str:
        if path == "solution.py" and ("INPUT_PATH" not in content or "OUTPUT_PATH" not in content):
            return (
                "\nNote: solution.py should read INPUT_PATH and save to OUTPUT_PATH; the grader sets both "
                "to other files, so a script that does not use them fails on the other test cases."
            )
        return ""

    def finish(self, *, model_calls: int, stopped: str) -> RolloutResult:
        ctx, st, runner = self.ctx, self.st, self.runner
        grades = Grades()
        fail_reason, phase = "", "eval"
        code = ""
        try:
            raw = (
                read_output(ctx.require_sandbox(), "solution.py", max_bytes=_MAX_SOLUTION_BYTES)
                if st.agent_ok
                else None
            )
        except OutputLimitExceeded:
            raw, fail_reason, phase = (
                None,
                f"solution-too-large: more than {_MAX_SOLUTION_BYTES} bytes",
                "agent",
            )
        if raw is not None:
            code = raw.decode("utf-8", "replace")
        st.code = code
        if not st.agent_ok:
            fail_reason, phase = "no-model-reply", "llm"
        elif not code.strip() and not fail_reason:
            fail_reason, phase = "no-solution", "agent"
        elif code.strip():
            ctx.emit(ProgressEvent(phase="grading", turn=model_calls, detail=f"{len(runner.cases)} case(s)"))
            runner.write_inputs()
            grades = runner.grade_all(code, model_calls)
            fail_reason = grades.fail_reason
        return build_row(
            ctx,
            st,
            grades,
            fail_reason=fail_reason,
            phase=phase,
            metrics={
                "n_model_calls": model_calls,
                "n_tool_calls": st.turns,
                "stopped": stopped,
                **_task_metrics(ctx),
            },
            notes={},
        )


class SheetExecTask:
    """An agent CLI on a SpreadsheetBench task: it writes ``solution.py``, graded on every case."""

    def __init__(self, ctx: AgentContext, st: RolloutState) -> None:
        self.ctx = ctx
        self.st = st
        self.runner = CaseRunner(ctx, st)

    def prepare(self, cli: str) -> tuple[str, str]:
        req = self.ctx.request
        sandbox = self.ctx.require_sandbox()
        first_input = self.runner.inputs[self.runner.first]
        preview = preview_workbook(first_input)
        self.st.notes["spreadsheet_preview"] = preview
        task_md = task_prompt(
            "codegen_user",
            req.task.instruction,
            dict(req.task.attributes),
            preview,
            req.diagnostic_instruction,
        )
        task_md += load_prompt("exec_task")
        sandbox.write_file("task.md", task_md.encode())
        sandbox.write_file("input.xlsx", first_input)
        sandbox.write_file("run_solution.py", _RUN_SOLUTION.encode())
        prompt = load_prompt(f"exec_prompt_{cli}").format(instruction=req.task.instruction.strip()).strip()
        return task_md, prompt

    def finish(self, run: CliRun) -> RolloutResult:
        ctx, st = self.ctx, self.st
        solution = read_output(ctx.require_sandbox(), "solution.py", max_bytes=1 << 20)
        st.code = solution.decode("utf-8", "replace") if solution else extract_code(run.final)
        notes = run.notes()
        metrics = {**run.metrics(), **_task_metrics(ctx)}
        if not st.code.strip():
            reason = (
                "agent-timeout"
                if run.outcome.timed_out
                else ("no-model-reply" if not st.agent_ok else "no-solution")
            )
            st.phase = "extract"
            return build_row(
                ctx, st, Grades(), fail_reason=reason, phase="extract", metrics=metrics, notes=notes
            )
        st.phase = "eval"
        self.runner.write_inputs()
        grades = self.runner.grade_all(st.code, turn=1)
        return build_row(
            ctx, st, grades, fail_reason=grades.fail_reason, phase="eval", metrics=metrics, notes=notes
        )


def build_agents() -> Mapping[str, Agent]:
    """Every SpreadsheetBench agent, by kind."""
    return {
        "codegen_single": CodegenAgent(SheetCodeTask, multi_turn=False),
        "codegen_multi": CodegenAgent(SheetCodeTask, multi_turn=True),
        "react": ReactAgent(SheetReactTask),
        "codex_exec": ExecAgent("codex_exec", make_task=SheetExecTask, skill_md=sheet_skill_md),
        "claude_code_exec": ExecAgent("claude_code_exec", make_task=SheetExecTask, skill_md=sheet_skill_md),
    }
