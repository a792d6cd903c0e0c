"""SpreadsheetBench codegen agents: single-turn (the official setting) and multi-turn.

The model is called from the trusted side; every line of code it writes runs inside the
rollout sandbox; every test case is graded here, outside the sandbox, against gold files the
sandbox never sees.

Workspace layout inside the sandbox::

    cases/<name>/input.xlsx      the case's input (written before the first model call)
    cases/<name>/solution.py     the current script with INPUT_PATH/OUTPUT_PATH prepended
    cases/<name>/output.xlsx     what the script saved
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

from skillopt.envs.base import AgentContext, ProgressEvent
from skillopt.envs.spreadsheetbench.evaluator import (
    CaseVerdict,
    case_result,
    feedback_report,
    grade_case,
    score_cases,
    verification_report,
)
from skillopt.envs.spreadsheetbench.preview import preview_workbook
from skillopt.errors import InfraError, ModelError
from skillopt.executor import ExecOutcome
from skillopt.models.base import ChatRequest
from skillopt.types import ExecRecord, File, InfraErrorKind, Message, RolloutResult, Trace, Usage
from skillopt.types import InfraError as InfraError_

__all__ = ["extract_code", "prepare_script", "run_codegen"]

PROMPTS = Path(__file__).parent / "prompts"
_FENCE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)```", re.S | re.I)
_PATH_ASSIGN = re.compile(r"^([ \t]*)(?:INPUT_PATH|OUTPUT_PATH)[ \t]*(?::[^=\n]*)?=(?!=).*$", re.M)
# Stop asking the model for another turn when less than this is left of the wall time.
_MIN_TURN_S = 10.0
_MAX_OUTPUT_XLSX = 64 * 1024 * 1024
_ERROR_FEEDBACK_CHARS = 3000


@cache
def _prompt(name: str) -> str:
    return (PROMPTS / f"{name}.md").read_text(encoding="utf-8")


def extract_code(text: str) -> str:
    """The first fenced Python block of a reply; the whole reply when it has no fence."""
    match = _FENCE.search(text)
    if match:
        return match.group(1).strip("\n")
    stripped = text.strip()
    return "" if stripped.startswith("```") else stripped


def prepare_script(code: str, input_path: str, output_path: str) -> str:
    """The script as run for one case: path assignments neutralised, the paths defined first.

    Assignments are replaced by ``pass`` at the same indentation rather than deleted, so a
    script that assigned them inside a block stays syntactically valid.
    """
    body = _PATH_ASSIGN.sub(lambda m: f"{m.group(1)}pass  # path provided by the harness", code)
    return f"INPUT_PATH = {input_path!r}\nOUTPUT_PATH = {output_path!r}\n{body}\n"


def system_prompt(skill: str) -> str:
    base = _prompt("codegen_system").strip()
    return f"{base}\n\n## Skill\n{skill.strip()}\n" if skill.strip() else base + "\n"


def user_prompt(instruction: str, attributes: dict, preview: str, diagnostic: str = "") -> str:
    text = _prompt("codegen_user").format(
        instruction=instruction.strip(),
        instruction_type=attributes.get("instruction_type", "") or "unknown",
        answer_position=attributes.get("answer_position", "") or "unknown",
        preview=preview.strip(),
    )
    if diagnostic.strip():
        text += f"\n\n# Diagnostic instruction\n{diagnostic.strip()}\n"
    return text


@dataclass
class _State:
    """Mutable bookkeeping of one rollout (local to the agent run)."""

    messages: list[Message] = field(default_factory=list)
    executions: list[ExecRecord] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    timings: dict[str, float] = field(default_factory=lambda: {"model": 0.0, "exec": 0.0, "grade": 0.0})
    turns: int = 0
    agent_ok: bool = False
    code: str = ""
    phase: str = "setup"
    preview: str = ""
    # Output of the final code on a case, when the multi-turn loop already ran it.
    outputs: dict[str, tuple[ExecOutcome, bytes | None]] = field(default_factory=dict)

    def add_time(self, key: str, t0: float) -> None:
        self.timings[key] += time.monotonic() - t0


def _error_text(outcome: ExecOutcome, timeout_s: float) -> str:
    if outcome.oom_killed:
        return "the process was killed: out of memory (the container's memory limit was exceeded)"
    if outcome.timed_out:
        return f"timeout: the script did not finish within {timeout_s:.0f} s"
    text = (outcome.stderr_tail or outcome.stdout_tail).strip()
    if outcome.signal:
        text = f"killed by signal {outcome.signal}\n{text}".strip()
    return text[-_ERROR_FEEDBACK_CHARS:] or f"exit code {outcome.exit_code}"


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip()[:200] if lines else ""


def run_codegen(ctx: AgentContext, *, multi_turn: bool) -> RolloutResult:
    """Run the codegen agent on every test case of ``ctx.request.task`` and grade it.

    An infrastructure or model-endpoint failure part-way through yields a row with
    ``infra_error`` set that keeps what happened so far (trace, ``agent_ok``, usage).
    """
    st = _State()
    try:
        return _run_codegen(ctx, st, multi_turn=multi_turn)
    except InfraError as exc:
        return _interrupted(ctx, st, exc.info())
    except ModelError as exc:
        # The SDK already retried: the model side is unavailable, not the skill's fault.
        info = InfraError_(kind=InfraErrorKind.MODEL_UNAVAILABLE, message=exc.message, retryable=True)
        return _interrupted(ctx, st, info)


def _interrupted(ctx: AgentContext, st: _State, info: InfraError_) -> RolloutResult:
    req = ctx.request
    return RolloutResult(
        id=req.task.id,
        rollout_id=req.rollout_id,
        phase=st.phase,
        fail_reason=f"infra-{info.kind.value}: {info.message}",
        agent_ok=st.agent_ok,
        n_turns=st.turns,
        trace=Trace(
            messages=tuple(st.messages),
            executions=tuple(st.executions),
            system_prompt=st.messages[0].content if st.messages else "",
            user_prompt=st.messages[1].content if len(st.messages) > 1 else "",
            code=st.code,
            notes={"spreadsheet_preview": st.preview} if st.preview else {},
        ),
        usage=st.usage,
        timings_s=dict(st.timings),
        infra_error=info,
    )


def _run_codegen(ctx: AgentContext, st: _State, *, multi_turn: bool) -> RolloutResult:
    req = ctx.request
    task = req.task
    attrs = dict(task.attributes)
    gold = {c.name: c for c in req.grading.cases}
    answer_position = str(req.grading.attributes.get("answer_position") or attrs.get("answer_position", ""))
    answer_sheet = str(req.grading.attributes.get("answer_sheet") or attrs.get("answer_sheet") or "") or None
    sandbox = ctx.sandbox
    exec_timeout = float(ctx.limits.exec_timeout_s or 120.0)
    max_turns = int(ctx.limits.max_turns or 30) if multi_turn else 1

    cases = list(task.cases)
    inputs = {c.name: next(f.content for f in c.files if f.name == "input.xlsx") for c in cases}
    for name, data in inputs.items():
        sandbox.write_file(f"cases/{name}/input.xlsx", data)
    preview = st.preview = preview_workbook(inputs[cases[0].name])
    system = system_prompt(req.skill.content)
    user = user_prompt(task.instruction, attrs, preview, req.diagnostic_instruction)
    st.messages = [Message(role="system", content=system), Message(role="user", content=user)]

    def run_case(name: str, code: str, turn: int) -> tuple[ExecOutcome, bytes | None]:
        base = f"/workspace/cases/{name}"
        sandbox.write_file(
            f"cases/{name}/solution.py",
            prepare_script(code, f"{base}/input.xlsx", f"{base}/output.xlsx").encode(),
        )
        t0 = time.monotonic()
        ctx.emit(ProgressEvent(phase="exec", turn=turn, detail=f"case {name}"))
        outcome = sandbox.run_python(f"cases/{name}/solution.py", timeout_s=exec_timeout)
        st.add_time("exec", t0)
        st.executions.append(
            ExecRecord(
                turn=turn,
                case=name,
                code=code if name == cases[0].name else "",
                exit_code=outcome.exit_code,
                stdout_tail=outcome.stdout_tail,
                stderr_tail=outcome.stderr_tail,
                duration_s=outcome.duration_s,
                timed_out=outcome.timed_out,
                oom_killed=outcome.oom_killed,
            )
        )
        output = (
            sandbox.read_file(f"cases/{name}/output.xlsx", max_bytes=_MAX_OUTPUT_XLSX) if outcome.ok else None
        )
        return outcome, output

    def grade(name: str, output: bytes | None) -> CaseVerdict:
        if output is None:
            return CaseVerdict(ok=False, reason="output-not-found", stage="output")
        t0 = time.monotonic()
        verdict = grade_case(output, gold[name].files[0].content, answer_position, answer_sheet)
        st.add_time("grade", t0)
        return verdict

    first = cases[0].name
    for turn in range(1, max_turns + 1):
        if multi_turn and turn > 1 and ctx.remaining_s() < _MIN_TURN_S:
            break
        st.phase = "llm"
        ctx.emit(ProgressEvent(phase="model_call", turn=turn))
        t0 = time.monotonic()
        reply = ctx.model.complete(
            ChatRequest(
                model=req.model.model,
                messages=tuple(st.messages),
                temperature=req.model.temperature,
                max_output_tokens=req.model.max_output_tokens,
                reasoning_effort=req.model.reasoning_effort,
                timeout_s=min(120.0, max(1.0, ctx.remaining_s())),
                stage="rollout",
                extra=req.model.extra,
            )
        )
        st.add_time("model", t0)
        st.turns = turn
        st.usage = st.usage + reply.usage
        st.agent_ok = True
        st.messages.append(Message(role="assistant", content=reply.text))
        ctx.emit(
            ProgressEvent(phase="model_reply", turn=turn, detail=f"{reply.usage.completion_tokens} tokens")
        )
        code = extract_code(reply.text)
        st.phase = "extract"
        if not code:
            if not multi_turn:
                break
            st.messages.append(Message(role="user", content=_prompt("codegen_retry_no_code").strip()))
            continue
        st.code = code
        st.phase = "exec"
        outcome, output = run_case(first, code, turn)
        st.outputs = {first: (outcome, output)}
        if not multi_turn:
            break
        if not outcome.ok:
            st.messages.append(
                Message(
                    role="user",
                    content=_prompt("codegen_retry_error").format(error=_error_text(outcome, exec_timeout)),
                )
            )
            continue
        if output is None:
            st.messages.append(Message(role="user", content=_prompt("codegen_retry_no_output").strip()))
            continue
        if req.use_eval_feedback:
            verdict = grade(first, output)
            if verdict.ok:
                break
            st.messages.append(Message(role="user", content=feedback_report(verdict)))
            continue
        break

    return _finish(ctx, st, cases=[c.name for c in cases], run_case=run_case, grade=grade)


def _finish(ctx: AgentContext, st: _State, *, cases: list[str], run_case, grade) -> RolloutResult:
    """Run the final code on every case, grade each, and build the row."""
    req = ctx.request
    attrs = dict(req.task.attributes)
    results = []
    verdicts: list[CaseVerdict] = []
    reports: list[str] = []
    artifacts: list[File] = []
    fail_reason = ""
    exec_pass = 0
    oom = False
    if not st.code:
        fail_reason = "empty-code-block" if st.agent_ok else "no-model-reply"
        phase = "extract" if st.agent_ok else "llm"
    else:
        phase = "eval"
        for name in cases:
            outcome, output = st.outputs.get(name) or run_case(name, st.code, st.turns)
            oom = oom or outcome.oom_killed
            if outcome.ok:
                exec_pass += 1
            if not outcome.ok:
                verdict = CaseVerdict(
                    ok=False,
                    reason=f"exec-error: {_last_line(_error_text(outcome, float(ctx.limits.exec_timeout_s or 120)))}",
                    stage="exec",
                )
            else:
                verdict = grade(name, output)
                if output is not None:
                    artifacts.append(File(name=f"cases/{name}/output.xlsx", content=output))
            verdicts.append(verdict)
            report = (
                verification_report(verdict)
                if verdict.stage == "eval"
                else f"[verification] FAIL: {verdict.reason}"
            )
            reports.append(f"## Test case {name}\n{report}")
            results.append(case_result(name, verdict, report=report))
            if not verdict.ok and not fail_reason:
                if verdict.stage == "exec":
                    fail_reason = verdict.reason
                elif verdict.reason == "output-not-found":
                    fail_reason = "output-not-found"
                else:
                    fail_reason = f"eval-mismatch: {verdict.reason[:200]}"
        if st.code:
            artifacts.append(File(name="solution.py", content=st.code.encode()))
    hard, soft = score_cases(verdicts)
    if hard >= 1.0:
        fail_reason, phase = "", "done"
    messages = list(st.messages)
    if reports:
        messages.append(
            Message(role="system", content="[POST-EXECUTION VERIFICATION]\n" + "\n\n".join(reports))
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
        cases=tuple(results),
        metrics={
            "n_cases": len(cases),
            "n_pass": sum(1 for v in verdicts if v.ok),
            "n_exec_pass": exec_pass,
            "code_ok": bool(st.code),
            "instruction_type": attrs.get("instruction_type", ""),
            "task_type": attrs.get("task_type", ""),
        },
        trace=Trace(
            messages=tuple(messages),
            executions=tuple(st.executions),
            system_prompt=st.messages[0].content,
            user_prompt=st.messages[1].content,
            code=st.code,
            notes={
                "spreadsheet_preview": st.messages[1]
                .content.split("# Input spreadsheet preview", 1)[-1]
                .split("# Task", 1)[0]
                .strip()
            },
        ),
        artifacts=tuple(artifacts),
        usage=st.usage,
        timings_s=dict(st.timings),
    )
    if oom and hard < 1.0:
        # DESIGN §3: an OOM kill is a typed infrastructure error, kept apart from model failure
        # (and out of every score), with the trace kept for whoever looks into it.
        mib = (ctx.limits.memory_bytes or 0) // 2**20
        row = replace(
            row,
            infra_error=InfraError_(
                kind=InfraErrorKind.OOM_KILLED,
                message=f"generated code exceeded the {mib} MiB memory limit ({fail_reason})",
                retryable=False,
            ),
        )
    return row
