"""What every SpreadsheetBench agent shares: prompts, running a script on the test cases inside
the sandbox, trusted grading, the verification reports and the result row.

The agents (:mod:`.agents`, composed from :mod:`skillopt.agents`) differ only in how they
obtain the final script; from there on this module runs it on every test case inside the rollout sandbox and grades each
output here, outside the sandbox, against gold files the sandbox never sees.

Case layout inside the sandbox (``root`` is ``cases`` unless an agent picks another)::

    <root>/<name>/input.xlsx      the case's input
    <root>/<name>/solution.py     the script with INPUT_PATH/OUTPUT_PATH prepended
    <root>/<name>/output.xlsx     what the script saved
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from skillopt.agents.common import RolloutState, exec_record, last_line, read_prompt, with_diagnostic
from skillopt.agents.context import AgentContext, ProgressEvent
from skillopt.agents.sandbox import ExecOutcome, read_output
from skillopt.envs.base import EARLIER_ATTEMPT
from skillopt.envs.spreadsheetbench.evaluator import (
    CaseVerdict,
    case_result,
    grade_case,
    score_cases,
    verification_report,
)
from skillopt.types import CaseResult, File, InfraErrorKind, InfraFailure, Message, RolloutResult

__all__ = [
    "CaseRunner",
    "Grades",
    "build_row",
    "error_text",
    "load_prompt",
    "prepare_script",
    "task_prompt",
]

PROMPTS = Path(__file__).parent / "prompts"
WORKSPACE = "/workspace"
_PATH_ASSIGN = re.compile(r"^([ \t]*)(?:INPUT_PATH|OUTPUT_PATH)[ \t]*(?::[^=\n]*)?=(?!=).*$", re.M)
MAX_OUTPUT_XLSX = 64 * 1024 * 1024
_ERROR_FEEDBACK_CHARS = 3000


def load_prompt(name: str) -> str:
    """The prompt template ``prompts/<name>.md``."""
    return read_prompt(PROMPTS, name)


def task_prompt(
    template: str, instruction: str, attributes: Mapping[str, Any], preview: str, diagnostic: str = ""
) -> str:
    """A user prompt from ``prompts/<template>.md`` (instruction, its attributes, the preview),
    plus the deep-reflect additions (the agent's earlier attempt, the diagnostic instruction)."""
    text = load_prompt(template).format(
        instruction=instruction.strip(),
        instruction_type=attributes.get("instruction_type", "") or "unknown",
        answer_position=attributes.get("answer_position", "") or "unknown",
        preview=preview.strip(),
    )
    return with_diagnostic(text, diagnostic, earlier=str(attributes.get(EARLIER_ATTEMPT, "") or ""))


def prepare_script(code: str, input_path: str, output_path: str) -> str:
    """The script as run for one case: path assignments neutralised, the paths defined first.

    Assignments are replaced by ``pass`` at the same indentation rather than deleted, so a
    script that assigned them inside a block stays syntactically valid.
    """
    body = _PATH_ASSIGN.sub(lambda m: f"{m.group(1)}pass  # path provided by the harness", code)
    return f"INPUT_PATH = {input_path!r}\nOUTPUT_PATH = {output_path!r}\n{body}\n"


def error_text(outcome: ExecOutcome, timeout_s: float) -> str:
    """What went wrong with an execution, for the model and for ``fail_reason``."""
    if outcome.oom_killed:
        return "the process was killed: out of memory (the container's memory limit was exceeded)"
    if outcome.timed_out:
        return f"timeout: the script did not finish within {timeout_s:.0f} s"
    text = (outcome.stderr_tail or outcome.stdout_tail).strip()
    if outcome.signal:
        text = f"killed by signal {outcome.signal}\n{text}".strip()
    return text[-_ERROR_FEEDBACK_CHARS:] or f"exit code {outcome.exit_code}"


@dataclass
class Grades:
    """The final code's outcome on every test case."""

    results: list[CaseResult] = field(default_factory=list)
    verdicts: list[CaseVerdict] = field(default_factory=list)
    reports: list[str] = field(default_factory=list)
    artifacts: list[File] = field(default_factory=list)
    fail_reason: str = ""
    exec_pass: int = 0
    oom: bool = False


class CaseRunner:
    """Runs a script on the task's test cases inside the sandbox and grades the outputs here.

    Args:
        ctx: the rollout's context.
        st: the rollout's bookkeeping (executions and timings are recorded into it).
        root: the workspace folder holding one sub-folder per case.
        env: extra environment variables for the case runs.
    """

    def __init__(
        self,
        ctx: AgentContext,
        st: RolloutState,
        *,
        root: str = "cases",
        env: Mapping[str, str] | None = None,
    ) -> None:
        req = ctx.request
        task = req.task
        attrs = dict(task.attributes)
        self.ctx = ctx
        self.st = st
        self.root = root
        self.env = dict(env) if env else None
        self.cases = [c.name for c in task.cases]
        self.first = self.cases[0]
        self.inputs = {c.name: next(f.content for f in c.files if f.name == "input.xlsx") for c in task.cases}
        self.gold = {c.name: c for c in req.grading.cases}
        self.answer_position = str(
            req.grading.attributes.get("answer_position") or attrs.get("answer_position", "")
        )
        self.answer_sheet = (
            str(req.grading.attributes.get("answer_sheet") or attrs.get("answer_sheet") or "") or None
        )
        self.exec_timeout = float(ctx.limits.exec_timeout_s or 120.0)
        #: ``corrected`` or ``official`` (env.options.grading.mode, checked by the env).
        self.grading_mode = str(req.grading.attributes.get("grading_mode") or "corrected")

    def write_inputs(self) -> None:
        """Place every case's input at ``<root>/<name>/input.xlsx``."""
        for name, data in self.inputs.items():
            self.ctx.require_sandbox().write_file(f"{self.root}/{name}/input.xlsx", data)

    def run(self, name: str, code: str, turn: int) -> tuple[ExecOutcome, bytes | None]:
        """Run ``code`` on case ``name``: the outcome and the saved workbook (``None`` when the
        script failed or saved nothing)."""
        sandbox = self.ctx.require_sandbox()
        folder = f"{self.root}/{name}"
        base = f"{WORKSPACE}/{folder}"
        sandbox.write_file(
            f"{folder}/solution.py",
            prepare_script(code, f"{base}/input.xlsx", f"{base}/output.xlsx").encode(),
        )
        t0 = time.monotonic()
        self.ctx.emit(ProgressEvent(phase="exec", turn=turn, detail=f"case {name}"))
        outcome = sandbox.run_python(f"{folder}/solution.py", timeout_s=self.exec_timeout, env=self.env)
        self.st.add_time("exec", t0)
        self.st.executions.append(
            exec_record(outcome, turn=turn, case=name, code=code if name == self.first else "")
        )
        output = (
            read_output(sandbox, f"{folder}/output.xlsx", max_bytes=MAX_OUTPUT_XLSX) if outcome.ok else None
        )
        return outcome, output

    def grade(self, name: str, output: bytes | None) -> CaseVerdict:
        """Grade one case's output against its gold file (on the trusted side)."""
        if output is None:
            return CaseVerdict(ok=False, reason="output-not-found", stage="output")
        t0 = time.monotonic()
        verdict = self.ctx.run_grader(
            grade_case,
            output,
            self.gold[name].files[0].content,
            self.answer_position,
            self.answer_sheet,
            mode=self.grading_mode,
        )
        self.st.add_time("grade", t0)
        return verdict

    def grade_all(self, code: str, turn: int) -> Grades:
        """Run ``code`` on every case (reusing ``st.outputs`` where the loop already ran it),
        grade each, and collect the reports and artifacts."""
        g = Grades()
        for name in self.cases:
            outcome, output = self.st.outputs.get(name) or self.run(name, code, turn)
            g.oom = g.oom or outcome.oom_killed
            if outcome.ok:
                g.exec_pass += 1
            if not outcome.ok:
                verdict = CaseVerdict(
                    ok=False,
                    reason=f"exec-error: {last_line(error_text(outcome, self.exec_timeout))}",
                    stage="exec",
                )
            else:
                verdict = self.grade(name, output)
                if output is not None:
                    g.artifacts.append(File(name=f"cases/{name}/output.xlsx", content=output))
            g.verdicts.append(verdict)
            report = (
                verification_report(verdict)
                if verdict.stage == "eval"
                else f"[verification] FAIL: {verdict.reason}"
            )
            g.reports.append(f"## Test case {name}\n{report}")
            g.results.append(case_result(name, verdict, report=report))
            if not verdict.ok and not g.fail_reason:
                if verdict.stage == "exec":
                    g.fail_reason = verdict.reason
                elif verdict.reason == "output-not-found":
                    g.fail_reason = "output-not-found"
                else:
                    g.fail_reason = f"eval-mismatch: {verdict.reason[:200]}"
        if code:
            g.artifacts.append(File(name="solution.py", content=code.encode()))
        return g


def build_row(
    ctx: AgentContext,
    st: RolloutState,
    grades: Grades,
    *,
    fail_reason: str,
    phase: str,
    metrics: Mapping[str, Any],
    notes: Mapping[str, str],
) -> RolloutResult:
    """The result row: scores over the graded cases, the conversation with the verification
    reports (including expected values, for the analyst) appended, and an OOM kill turned into
    a typed infrastructure error.

    ``fail_reason``/``phase`` describe a failure; both are cleared/``done`` when every case
    passes. ``metrics`` are added after the shared counts (``n_cases``, ``n_pass``,
    ``n_exec_pass``).
    """
    req = ctx.request
    n_cases = len(req.task.cases)
    hard, soft = score_cases(grades.verdicts)
    if hard >= 1.0:
        fail_reason, phase = "", "done"
    messages = list(st.messages)
    if grades.reports:
        messages.append(
            Message(role="system", content="[POST-EXECUTION VERIFICATION]\n" + "\n\n".join(grades.reports))
        )
    row = RolloutResult(
        id=req.task.id,
        rollout_id=req.rollout_id,
        hard=hard,
        soft=soft,
        fail_reason=fail_reason,
        phase=phase,
        agent_ok=st.agent_ok,
        n_turns=st.turns,
        cases=tuple(grades.results),
        metrics={
            "n_cases": n_cases,
            "n_pass": sum(1 for v in grades.verdicts if v.ok),
            "n_exec_pass": grades.exec_pass,
            "grading_mode": str(req.grading.attributes.get("grading_mode") or "corrected"),
            **metrics,
        },
        trace=st.trace(messages=messages, notes={**st.notes, **notes}),
        artifacts=tuple(grades.artifacts),
        usage=st.usage,
        timings_s=dict(st.timings),
    )
    if grades.oom and hard < 1.0:
        # DESIGN §3: an OOM kill is a typed infrastructure error, kept apart from model failure
        # (and out of every score), with the trace kept for whoever looks into it.
        mib = (ctx.limits.memory_bytes or 0) // 2**20
        row = replace(
            row,
            infra_error=InfraFailure(
                kind=InfraErrorKind.OOM_KILLED,
                message=f"generated code exceeded the {mib} MiB memory limit ({fail_reason})",
            ),
        )
    return row
