"""The ``play`` agent: one game per rollout, one action per step, the game in the container.

Each step (reference §5.2, ALFWorld's loop): a fresh prompt (the skill as a ``## Skill
Knowledge`` preamble, the objective, the last ``history_length`` steps, the current
observation, the admissible commands) with a fixed short system line; the reply must hold
``<think>…</think><action>…</action>``; an empty reply or a missing tag plays ``look``. The
action is appended to the episode's action list in the container and the game driver
(:mod:`.driver`) replays the list and returns the new state. The loop ends when the game is
done or after ``limits.max_turns`` steps (the step limit).

Trusted grading: the model only ever sends game commands (cleaned to one printable line, as
data in a JSON file, never a shell word). When the episode ends, its action list is replayed
against a fresh copy of the game in a fresh grading container (no network, never held the
episode): won and score come from that replay's driver output, the game's own state, so a
rollout container that misreports its state cannot forge a win (a disagreement is noted in the
trace and ``replay_agrees`` is false). The score is bounded by the max score the trusted side
generated the game with (``grading.attributes.max_score``). A reply that merely *says* "you
won" changes nothing.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

from skillopt.agents.common import (
    GuardedAgent,
    RolloutState,
    exec_record,
    interrupted_row,
    model_request,
    read_prompt,
    skill_text,
)
from skillopt.agents.context import AgentContext, ProgressEvent
from skillopt.agents.sandbox import Sandbox
from skillopt.errors import InfraError
from skillopt.types import CaseResult, File, InfraErrorKind, InfraFailure, Message, RolloutResult

__all__ = [
    "MAX_ACTION_CHARS",
    "GameAgent",
    "GameEngineError",
    "GameState",
    "clean_action",
    "parse_reply",
    "replay_actions",
]

PROMPTS = Path(__file__).parent / "prompts"
DRIVER_FILE = Path(__file__).parent / "driver.py"
MAX_ACTION_CHARS = 120
DEFAULT_ACTION = "look"
_MARK = "@@TW@@"
_ACTION = re.compile(r"<action>(.*?)</action>", re.S | re.I)
_THINK = re.compile(r"<think>(.*?)</think>", re.S | re.I)
# Keep this much of the wall time for the last step's game run and the row.
_MIN_STEP_S = 3.0


class GameEngineError(InfraError):
    """The game driver failed in the container (crash, garbled output): not the model's fault."""

    kind = InfraErrorKind.INTERNAL


@cache
def _driver() -> bytes:
    return DRIVER_FILE.read_bytes()


def clean_action(text: str) -> str:
    """One printable line of at most :data:`MAX_ACTION_CHARS` characters, lower-cased words
    as the parser expects; ``look`` when nothing is left."""
    line = next((ln for ln in text.strip().splitlines() if ln.strip()), "")
    line = "".join(ch for ch in line if ch.isprintable())
    line = " ".join(line.split())[:MAX_ACTION_CHARS].strip().strip("'\"`").strip()
    return line or DEFAULT_ACTION


def parse_reply(text: str) -> tuple[str, str]:
    """``(action, reasoning)`` of a reply: the last ``<action>`` tag (``look`` without one)."""
    actions = _ACTION.findall(text or "")
    think = _THINK.findall(text or "")
    action = clean_action(actions[-1]) if actions else DEFAULT_ACTION
    return action, (think[-1].strip() if think else "")


@dataclass
class GameState:
    """What the driver reported after the last action."""

    observation: str
    score: int
    max_score: int
    won: bool
    lost: bool
    done: bool
    moves: int
    played: int
    admissible: list[str] = field(default_factory=list)


def _parse_driver(stdout: str) -> GameState | None:
    line = next((ln for ln in reversed(stdout.splitlines()) if ln.startswith(_MARK)), None)
    if line is None:
        return None
    try:
        raw = json.loads(line[len(_MARK) :])
        return GameState(
            observation=str(raw["observation"]),
            score=int(raw["score"]),
            max_score=int(raw["max_score"]),
            won=bool(raw["won"]),
            lost=bool(raw["lost"]),
            done=bool(raw["done"]),
            moves=int(raw["moves"]),
            played=int(raw["played"]),
            admissible=[str(a) for a in raw["admissible"]][:200],
        )
    except (ValueError, KeyError, TypeError):
        return None


def _stage_game(sandbox: Sandbox, files: Iterable[File]) -> None:
    """The game files and the driver, written into a sandbox's workspace."""
    for f in files:
        sandbox.write_file(f"game/{f.name}", f.content)
    sandbox.write_file("tw_driver.py", _driver())


def _episode(actions: list[str]) -> bytes:
    return json.dumps({"game": "game/game.z8", "actions": actions}).encode()


def replay_actions(
    fresh: Callable[[], AbstractContextManager[Sandbox]],
    files: Iterable[File],
    actions: list[str],
    *,
    timeout_s: float,
) -> GameState:
    """The state after ``actions``, played against a fresh copy of the game (``files``) in a
    fresh container from ``fresh`` (the trusted replay; also what ``skillopt score`` runs).

    Raises:
        GameEngineError: the driver crashed, timed out or printed no state.
    """
    with fresh() as box:
        _stage_game(box, files)
        box.write_file("episode.json", _episode(actions))
        outcome = box.run_python("tw_driver.py", timeout_s=timeout_s)
    state = _parse_driver(outcome.stdout_tail) if outcome.ok else None
    if state is None:
        why = "timed out" if outcome.timed_out else f"exit code {outcome.exit_code}"
        raise GameEngineError(
            f"the replay of {len(actions)} actions failed ({why}): {outcome.stderr_tail[-600:].strip()}"
        )
    return state


class _Game:
    """The episode in the container: the game files, the action list, the driver."""

    def __init__(self, ctx: AgentContext, st: RolloutState, step_timeout_s: float) -> None:
        self.ctx = ctx
        self.st = st
        self.step_timeout_s = step_timeout_s
        self.actions: list[str] = []
        _stage_game(ctx.require_sandbox(), ctx.request.task.cases[0].files)

    def play(self, action: str | None, step: int) -> GameState:
        """Play ``action`` (``None``: the initial state) and return the new state.

        Raises:
            RolloutTimeout: the rollout's wall time ran out during the step.
            GameEngineError: the driver crashed or timed out on its own.
        """
        from skillopt.errors import RolloutTimeout

        if action is not None:
            self.actions.append(action)
        sandbox = self.ctx.require_sandbox()
        sandbox.write_file("episode.json", _episode(self.actions))
        budget = min(self.step_timeout_s, self.ctx.remaining_s() - 1.0)
        if budget < 1.0:
            raise RolloutTimeout(f"the rollout's wall time ran out before step {step}")
        t0 = time.monotonic()
        outcome = sandbox.run_python("tw_driver.py", timeout_s=budget)
        self.st.add_time("exec", t0)
        self.st.executions.append(exec_record(outcome, turn=step, case="step", code=action or "(start)"))
        state = _parse_driver(outcome.stdout_tail) if outcome.ok else None
        if outcome.timed_out and budget < self.step_timeout_s:
            raise RolloutTimeout(f"the rollout's wall time ran out during step {step}")
        if state is None:
            why = "timed out" if outcome.timed_out else f"exit code {outcome.exit_code}"
            raise GameEngineError(
                f"the game driver failed at step {step} ({why}): {outcome.stderr_tail[-600:].strip()}"
            )
        return state

    def replay(self) -> GameState:
        """The episode's outcome on the trusted side: the action list played again against a
        fresh copy of the game in a fresh container that never held the episode, so nothing the
        rollout's container did can forge ``won`` or the score.

        Raises:
            GameEngineError: the replay failed (the driver crashed or timed out).
            SandboxUnavailable: the host offers no fresh container.
        """
        budget = max(1.0, min(self.step_timeout_s * 2, self.ctx.remaining_s() - 1.0))
        t0 = time.monotonic()
        try:
            return replay_actions(
                self.ctx.fresh_grading_sandbox,
                self.ctx.request.task.cases[0].files,
                self.actions,
                timeout_s=budget,
            )
        finally:
            self.st.add_time("grade", t0)


def _prompt(name: str) -> str:
    return read_prompt(PROMPTS, name)


def _history(steps: list[dict], n: int) -> str:
    if n <= 0 or not steps:
        return "(none yet)"
    lines = [f"[step {s['step']}] > {s['action']}\n{s['env_feedback']}" for s in steps[-n:]]
    return "\n\n".join(lines)


def _step_view(step: int, state: GameState) -> str:
    admissible = ", ".join(state.admissible) or "(none reported)"
    return f"[step {step}] observation:\n{state.observation}\n\nAdmissible actions: {admissible}"


class GameAgent(GuardedAgent):
    """Plays one TextWorld game per rollout (see the module docstring)."""

    def _run(self, ctx: AgentContext, st: RolloutState) -> RolloutResult:
        assert ctx.model is not None
        req = ctx.request
        attrs = req.task.attributes
        max_steps = int(ctx.limits.max_turns or 50)
        history_n = int(attrs.get("history_length", 2))
        game = _Game(ctx, st, float(attrs.get("step_timeout_s", 30.0)))
        st.phase = "start"
        ctx.emit(ProgressEvent(phase="exec", detail="starting the game"))
        state = game.play(None, 0)
        system = _prompt("rollout_system").strip()
        skill = skill_text(req.skill).strip()
        skill_block = f"## Skill Knowledge\n{skill}\n\n" if skill else ""
        steps: list[dict] = []
        st.messages = [Message(role="system", content=system)]
        stopped = "step-limit"
        for step in range(1, max_steps + 1):
            if ctx.remaining_s() < _MIN_STEP_S:
                return self._timeout_row(ctx, st, steps, state, step)
            user = _prompt("rollout_user").format(
                skill_block=skill_block,
                game_id=req.task.id,
                step=step,
                max_steps=max_steps,
                objective=req.task.instruction,
                history=_history(steps, history_n),
                observation=state.observation,
                admissible="\n".join(f"- {a}" for a in state.admissible) or "(none reported)",
            )
            if req.diagnostic_instruction.strip():
                user += f"\n\n# Diagnostic instruction\n{req.diagnostic_instruction.strip()}\n"
            # The trace keeps the first prompt whole and, after it, what each later prompt
            # added: the observation and the admissible actions (the skill and the objective
            # are the same in every step).
            st.messages.append(Message(role="user", content=user if step == 1 else _step_view(step, state)))
            st.phase = "llm"
            ctx.emit(ProgressEvent(phase="model_call", turn=step))
            t0 = time.monotonic()
            reply = ctx.model.complete(
                model_request(
                    ctx, [Message(role="system", content=system), Message(role="user", content=user)]
                )
            )
            st.add_time("model", t0)
            st.usage = st.usage + reply.usage
            st.agent_ok = True
            st.turns = step
            st.messages.append(Message(role="assistant", content=reply.text))
            action, reasoning = parse_reply(reply.text)
            st.phase = "game"
            ctx.emit(ProgressEvent(phase="exec", turn=step, detail=f"> {action}"))
            before = state.score
            state = game.play(action, step)
            steps.append(
                {
                    "step": step,
                    "action": action,
                    "reasoning": reasoning,
                    "model_response": reply.text,
                    "env_feedback": state.observation,
                    "reward": state.score - before,
                    "score": state.score,
                    "done": state.done,
                }
            )
            if state.done:
                stopped = "won" if state.won else ("lost" if state.lost else "done")
                break
        st.phase = "eval"
        trusted = game.replay()
        agrees = (trusted.won, trusted.score, trusted.lost) == (state.won, state.score, state.lost)
        if not agrees:
            st.notes["replay"] = (
                f"the rollout's container reported won={state.won} score={state.score}; the trusted "
                f"replay of its actions gives won={trusted.won} score={trusted.score}: graded by the replay"
            )
        row = self._row(ctx, st, steps, trusted, stopped=stopped, max_steps=max_steps)
        return replace(row, metrics={**dict(row.metrics), "replay_agrees": agrees})

    # -- rows ------------------------------------------------------------------------------------

    @staticmethod
    def _max_score(ctx: AgentContext, state: GameState) -> int:
        trusted = int(ctx.request.grading.attributes.get("max_score", 0) or 0)
        if trusted and state.max_score and state.max_score != trusted:
            raise GameEngineError(
                f"the game in the container reports max score {state.max_score}, the game generated "
                f"for this task has {trusted}: the game files do not match their grading"
            )
        return trusted or state.max_score or 1

    def _metrics(
        self, ctx: AgentContext, steps: list[dict], state: GameState, stopped: str, max_score: int
    ) -> dict:
        attrs = ctx.request.task.attributes
        return {
            "task_type": str(attrs.get("category", "")),
            "challenge": str(attrs.get("challenge", "")),
            "level": int(attrs.get("level", 0) or 0),
            "score": min(state.score, max_score),
            "max_score": max_score,
            "won": state.won,
            "lost": state.lost,
            "steps": len(steps),
            "stopped": stopped,
            "predicted_answer": " | ".join(s["action"] for s in steps),
        }

    def _finish_trace(self, ctx: AgentContext, st: RolloutState, steps: list[dict], verdict: str) -> None:
        walkthrough = list(ctx.request.grading.attributes.get("walkthrough", []))
        st.notes["steps"] = json.dumps(steps, ensure_ascii=False, indent=1)
        st.notes["actions"] = "\n".join(s["action"] for s in steps)
        # The observation each action produced, for the analyst (the agent saw it in the next
        # step's prompt), then the grader's verdict with the walkthrough (gold: never sent to
        # the agent).
        st.messages.append(
            Message(
                role="system",
                content=(
                    f"[EVALUATION RESULT] {verdict}\nReference walkthrough ({len(walkthrough)} actions): "
                    + " > ".join(walkthrough)
                ),
            )
        )

    def _row(self, ctx, st, steps, state: GameState, *, stopped: str, max_steps: int) -> RolloutResult:
        max_score = self._max_score(ctx, state)
        score = max(0, min(state.score, max_score))
        won = bool(state.won)
        hard = 1.0 if won else 0.0
        soft = 1.0 if won else score / max_score
        if won:
            reason = ""
        elif stopped == "step-limit":
            reason = f"Timeout after {max_steps} steps (score {score}/{max_score})"
        else:
            reason = f"Episode ended without completing the task ({stopped}, score {score}/{max_score})"
        verdict = f"won={won} score={score}/{max_score} steps={len(steps)} stopped={stopped}"
        self._finish_trace(ctx, st, steps, verdict)
        metrics = self._metrics(ctx, steps, state, stopped, max_score)
        return RolloutResult(
            id=ctx.request.task.id,
            rollout_id=ctx.request.rollout_id,
            hard=hard,
            soft=soft,
            fail_reason=reason,
            phase="done" if won else "eval",
            agent_ok=st.agent_ok,
            n_turns=len(steps),
            cases=(CaseResult(name="game", ok=won, stage="eval", reason=reason, report=verdict),),
            metrics=metrics,
            trace=st.trace(),
            usage=st.usage,
            timings_s=dict(st.timings),
        )

    def _timeout_row(self, ctx, st, steps, state: GameState, step: int) -> RolloutResult:
        wall = ctx.limits.wall_time_s or 0
        info = InfraFailure(
            kind=InfraErrorKind.TIMEOUT,
            message=f"the rollout used up its wall time ({wall:.0f} s) before step {step}",
        )
        self._finish_trace(ctx, st, steps, f"timed out before step {step} (score {state.score})")
        row = interrupted_row(ctx, st, info, f"infra-timeout: {info.message}")
        return replace(
            row,
            metrics={"task_type": str(ctx.request.task.attributes.get("category", "")), "steps": len(steps)},
        )
