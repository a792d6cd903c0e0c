"""The evaluate + gate stage: a candidate's selection score, and the decision on it.

:func:`decide_gate` is the gate's rule, used by a step and by the slow update: the gate off
force-accepts; a measurement that lost too much to infrastructure rejects; otherwise
:func:`skillopt.gate.decide` (strictly above the current score, optionally with no more than
``evaluation.max_regressions`` items flipped from pass to fail). Deciding changes nothing: the
step's commit applies an acceptance with :func:`~.selection.promote`.
"""

from __future__ import annotations

from dataclasses import replace

from skillopt.gate import decide, regressions
from skillopt.trainer.callbacks import GateEvent
from skillopt.trainer.context import RunContext
from skillopt.trainer.records import SelectionStats
from skillopt.trainer.rundir import layout
from skillopt.trainer.stages.selection import SelectionEval, evaluate_selection
from skillopt.trainer.stages.state import GateOutcome, StepState
from skillopt.types import skill_hash

__all__ = ["EvaluateGateStage", "GateOutcome", "decide_gate"]


def decide_gate(ctx: RunContext, step: int, origin: str, candidate: str, ev: SelectionEval) -> GateOutcome:
    """Decide on ``candidate`` against the current skill and announce it (``on_gate_decision``)."""
    cfg, st = ctx.cfg, ctx.state
    assert st.current_score is not None and st.best_score is not None
    if not cfg.evaluation.use_gate:
        action, reason = "force_accept", "gate disabled"
    elif ctx.too_many_infra(ev.n_infra, ev.n_rows):
        action, reason = "reject", f"{ev.n_infra} selection rollouts failed on infrastructure"
    else:
        current = ctx.gate_cache.get(skill_hash(st.current_skill))
        d = decide(
            ev.score,
            st.current_score,
            st.best_score,
            global_step=step,
            best_step=st.best_step,
            regressed=regressions(dict(current.items or {}) if current else {}, ev.items),
            max_regressions=cfg.evaluation.max_regressions,
        )
        action, reason = d.action, d.reason
    accepted = action != "reject"
    outcome = GateOutcome(
        origin=origin,
        action=action,
        reason=reason,
        candidate=candidate,
        evaluation=ev,
        current_score_after=ev.score if accepted else st.current_score,
        best_score_after=ev.score if accepted and ev.score > st.best_score else st.best_score,
    )
    ctx.hooks(
        "on_gate_decision",
        GateEvent(
            step=step,
            origin=origin,
            action=action,
            candidate_score=ev.score,
            current_score=outcome.current_score_after,
            best_score=outcome.best_score_after,
            reason=reason,
        ),
    )
    return outcome


class EvaluateGateStage:
    """Evaluate the step's candidate on the selection split, then gate it."""

    name = "evaluate_gate"

    def run(self, ctx: RunContext, state: StepState) -> StepState:
        proposal = state.proposal
        if proposal is None or proposal.candidate is None:
            return state
        step = state.inputs.step
        with ctx.stage(step, "evaluate") as t:
            ev = evaluate_selection(
                ctx, proposal.candidate, f"{layout.step_dir(step)}/{layout.Step.SELECTION}"
            )
        outcome = decide_gate(ctx, step, f"step_{step:04d}", proposal.candidate, ev)
        selection = SelectionStats(
            hard=ev.hard,
            soft=ev.soft,
            cached=ev.cached,
            n_infra=ev.n_infra,
            gate_metric=ctx.cfg.evaluation.gate_metric,
            candidate_score=ev.score,
            current_score_before=ctx.state.current_score,
            gate_reason=outcome.reason,
        )
        return replace(
            state, gate=outcome, selection=selection, timing={**state.timing, "evaluate_s": t.seconds}
        )
