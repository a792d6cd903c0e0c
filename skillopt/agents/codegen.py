"""Codegen agent: the model writes one program; single-turn (the official SpreadsheetBench
setting) or multi-turn with execution (and, on training rollouts, grading) feedback.

The loop is env-independent. What the program is for, how it runs inside the sandbox and how it
is graded come from the env through a :class:`CodeTask` built per rollout::

    agent = CodegenAgent(make_task=lambda ctx, st: MyCodeTask(ctx, st), multi_turn=True)
    row = agent.run(ctx)

The model is called from the trusted side; every line of code it writes runs inside the rollout
sandbox (through the task); grading happens outside it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from skillopt.agents.common import GuardedAgent, RolloutState, model_request
from skillopt.agents.context import AgentContext, ProgressEvent
from skillopt.types import Message, RolloutResult

__all__ = ["Attempt", "CodeTask", "CodegenAgent", "extract_code"]

_FENCE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)```", re.S | re.I)
# Stop asking the model for another turn when less than this is left of the wall time.
_MIN_TURN_S = 10.0


def extract_code(text: str) -> str:
    """The first fenced Python block of a reply; the whole reply when it has no fence."""
    match = _FENCE.search(text)
    if match:
        return match.group(1).strip("\n")
    stripped = text.strip()
    return "" if stripped.startswith("```") else stripped


@dataclass(frozen=True, kw_only=True)
class Attempt:
    """What a multi-turn loop does after one program ran: stop, or send ``feedback``."""

    done: bool
    feedback: str = ""


class CodeTask(Protocol):
    """The env's side of a codegen rollout (one instance per rollout)."""

    def prompts(self) -> tuple[str, str]:
        """``(system, user)`` of the first turn; may write the task's inputs to the sandbox."""
        ...

    def no_code_feedback(self) -> str:
        """The user turn sent when a reply held no code."""
        ...

    def attempt(self, code: str, turn: int) -> Attempt:
        """Run ``code`` (multi-turn only) and say whether to stop or what to tell the model."""
        ...

    def finish(self) -> RolloutResult:
        """Grade the final program (``st.code``, possibly empty) and build the row."""
        ...


class CodegenAgent(GuardedAgent):
    """Codegen over any :class:`CodeTask`.

    Args:
        make_task: builds the env's task for one rollout from the context and the state.
        multi_turn: iterate up to ``limits.max_turns`` with feedback; else one model call.
    """

    def __init__(
        self,
        make_task: Callable[[AgentContext, RolloutState], CodeTask],
        *,
        multi_turn: bool,
    ) -> None:
        self.make_task = make_task
        self.multi_turn = multi_turn

    def _run(self, ctx: AgentContext, st: RolloutState) -> RolloutResult:
        assert ctx.model is not None
        task = self.make_task(ctx, st)
        multi = self.multi_turn
        max_turns = int(ctx.limits.max_turns or 30) if multi else 1
        system, user = task.prompts()
        st.messages = [Message(role="system", content=system), Message(role="user", content=user)]
        for turn in range(1, max_turns + 1):
            if multi and turn > 1 and ctx.remaining_s() < _MIN_TURN_S:
                break
            st.phase = "llm"
            ctx.emit(ProgressEvent(phase="model_call", turn=turn))
            t0 = time.monotonic()
            reply = ctx.model.complete(model_request(ctx, st.messages))
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
            code = extract_code(reply.text)
            st.phase = "extract"
            if not code:
                if not multi:
                    break
                st.messages.append(Message(role="user", content=task.no_code_feedback()))
                continue
            st.code = code
            st.phase = "exec"
            if not multi:
                break
            step = task.attempt(code, turn)
            if step.done:
                break
            st.messages.append(Message(role="user", content=step.feedback))
        return task.finish()
