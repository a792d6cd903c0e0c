"""Question-answering agents: the in-service QA agent (single-turn by default, reference §5.1)
and the adapter that lets an agent CLI answer the same question inside a container.

The env supplies a :class:`QATask` per rollout: its prompts, the files an agent CLI gets, and
the trusted-side :meth:`QATask.grade` of a response. The QA agent calls the model from the
service and runs no code, so its env declares it ``sandbox="none"`` and no container is leased.

Turns (``limits.max_turns``, 1 by default in the QA configs): the first turn asks the question;
every further turn resends the question with the previous answer and a request to review it
(no history), and the loop ends at the first later reply that holds an answer.

Usage (an env composes it)::

    qa = QAAgent(make_task=lambda ctx: MyQATask(ctx))
    codex = ExecAgent("codex_exec", make_task=lambda ctx, st: QAExecTask(ctx, st, MyQATask(ctx)), skill_md=...)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from skillopt.agents.common import GuardedAgent, RolloutState, model_request
from skillopt.agents.context import AgentContext, ProgressEvent
from skillopt.agents.exec_cli import CliRun
from skillopt.types import Message, RolloutResult

__all__ = ["QAAgent", "QAExecTask", "QATask", "Verdict", "has_answer_tag", "qa_row"]

_ANSWER_OPEN = "<answer>"


def has_answer_tag(text: str) -> bool:
    """Whether a reply holds an ``<answer>`` tag (any case)."""
    return _ANSWER_OPEN in text.lower()


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """A response graded by the env's trusted evaluator.

    Attributes:
        hard: the strict score (exact match, accuracy), 0 or 1.
        soft: the partial score in [0, 1] (token F1; equal to ``hard`` where there is none).
        answer: the answer extracted from the response ("" when none was found).
        fail_reason: ``""`` when right, else why (``"EM=0: predicted ... but expected ..."``).
        metrics: the env's metrics (``em``, ``f1``, ``sub_em``, ``gold``...) for the row.
        report: the evaluation result with the gold answer, for the analyst only (appended to
            the trace as a system message; never shown to the agent).
    """

    hard: float
    soft: float
    answer: str
    fail_reason: str = ""
    metrics: Mapping[str, Any] = field(default_factory=dict)
    report: str = ""


class QATask(Protocol):
    """The env's side of a question-answering rollout (one instance per rollout)."""

    def prompts(self) -> tuple[str, str]:
        """``(system, user)`` of the first turn (the skill is in the system prompt)."""
        ...

    def review_prompt(self, previous: str) -> str:
        """The user turn of a review turn, given the previous reply."""
        ...

    def grade(self, response: str) -> Verdict:
        """Grade a response against the gold answer (trusted side only)."""
        ...

    def workspace_files(self) -> Mapping[str, bytes]:
        """Files an agent CLI gets in its workspace (question, context...; never gold)."""
        ...

    def exec_prompt(self, cli: str) -> str:
        """The agent CLI's prompt (it reads the skill and the files, answers in tags)."""
        ...


def qa_row(
    ctx: AgentContext,
    st: RolloutState,
    verdict: Verdict | None,
    *,
    response: str,
    metrics: Mapping[str, Any] | None = None,
    fail_reason: str = "",
) -> RolloutResult:
    """The result row of a QA rollout: scores, the extracted answer and the env's metrics; the
    conversation gets the ``[EVALUATION RESULT]`` (with gold, for the analyst) appended.

    ``verdict`` is ``None`` when there was nothing to grade (``fail_reason`` says why).
    """
    req = ctx.request
    messages = list(st.messages)
    row_metrics: dict[str, Any] = {"task_type": str(req.task.attributes.get("task_type", ""))}
    if verdict is not None:
        row_metrics.update(dict(verdict.metrics))
        row_metrics["predicted_answer"] = verdict.answer
        if verdict.report:
            messages.append(Message(role="system", content=verdict.report))
        fail_reason = verdict.fail_reason
    row_metrics.update(dict(metrics or {}))
    hard = verdict.hard if verdict is not None else 0.0
    st.notes.setdefault("response", response)
    return RolloutResult(
        id=req.task.id,
        rollout_id=req.rollout_id,
        hard=hard,
        soft=verdict.soft if verdict is not None else 0.0,
        fail_reason="" if hard >= 1.0 else fail_reason,
        phase="done" if hard >= 1.0 else ("eval" if verdict is not None else st.phase),
        agent_ok=st.agent_ok,
        n_turns=st.turns,
        metrics=row_metrics,
        trace=st.trace(messages=messages),
        usage=st.usage,
        timings_s=dict(st.timings),
    )


class QAAgent(GuardedAgent):
    """The in-service QA agent over any :class:`QATask` (runs no code; needs no sandbox).

    Args:
        make_task: builds the env's task for one rollout from the context.
    """

    def __init__(self, make_task: Callable[[AgentContext], QATask]) -> None:
        self.make_task = make_task

    def _run(self, ctx: AgentContext, st: RolloutState) -> RolloutResult:
        assert ctx.model is not None
        task = self.make_task(ctx)
        system, user = task.prompts()
        st.messages = [Message(role="system", content=system), Message(role="user", content=user)]
        max_turns = max(1, int(ctx.limits.max_turns or 1))
        response = ""
        for turn in range(1, max_turns + 1):
            if turn == 1:
                request_messages = st.messages[:2]
            else:
                review = Message(role="user", content=task.review_prompt(response))
                st.messages.append(review)
                request_messages = [st.messages[0], review]  # no history: question + previous answer
            st.phase = "llm"
            ctx.emit(ProgressEvent(phase="model_call", turn=turn))
            t0 = time.monotonic()
            reply = ctx.model.complete(model_request(ctx, request_messages))
            st.add_time("model", t0)
            st.turns = turn
            st.usage = st.usage + reply.usage
            st.agent_ok = True
            st.messages.append(Message(role="assistant", content=reply.text))
            ctx.emit(
                ProgressEvent(
                    phase="model_reply", turn=turn, detail=f"{reply.usage.completion_tokens} tokens"
                )
            )
            if turn == 1 or has_answer_tag(reply.text) or not has_answer_tag(response):
                response = reply.text
            if turn > 1 and has_answer_tag(reply.text):
                break
        st.phase = "eval"
        t0 = time.monotonic()
        verdict = task.grade(response)
        st.add_time("grade", t0)
        return qa_row(ctx, st, verdict, response=response)


class QAExecTask:
    """A :class:`QATask` as an agent CLI's task: the question's files in the workspace, the
    answer read from the CLI's final message and graded like the in-service agent's.

    Workspace::

        task.md        what to do, how to answer (the user prompt of the QA agent)
        <files>        the task's :meth:`QATask.workspace_files` (e.g. question.md, context.md)
    """

    def __init__(self, ctx: AgentContext, st: RolloutState, task: QATask) -> None:
        self.ctx = ctx
        self.st = st
        self.task = task

    def prepare(self, cli: str) -> tuple[str, str]:
        """Write the files; return ``(task.md, the CLI's prompt)``."""
        sandbox = self.ctx.require_sandbox()
        _, user = self.task.prompts()
        files = dict(self.task.workspace_files())
        files.setdefault("task.md", user.encode("utf-8"))
        for name, data in files.items():
            sandbox.write_file(name, data)
        return files["task.md"].decode("utf-8", "replace"), self.task.exec_prompt(cli)

    def finish(self, run: CliRun) -> RolloutResult:
        """Grade the final message; a CLI that never answered gets a reason, not a score."""
        st = self.st
        st.notes.update(run.notes())
        metrics = run.metrics()
        if not run.final.strip():
            reason = (
                "agent-timeout"
                if run.outcome.timed_out
                else ("no-model-reply" if not st.agent_ok else "no-final-message")
            )
            st.phase = "extract"
            return qa_row(self.ctx, st, None, response="", metrics=metrics, fail_reason=reason)
        st.phase = "eval"
        t0 = time.monotonic()
        verdict = self.task.grade(run.final)
        st.add_time("grade", t0)
        return qa_row(self.ctx, st, verdict, response=run.final, metrics=metrics)
