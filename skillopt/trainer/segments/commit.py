"""A step's commit (its gate segment's): its decision applied to the run state, its record
written, all at once.

Until here nothing a step computed changed the state (segments only return outputs), so a
crash or a stop anywhere before the commit leaves the previous commit standing; the step then
reruns from its committed segments and caches.
"""

from __future__ import annotations

import json
import time

from skillopt.models.roles import UsageTracker
from skillopt.trainer.context import RunContext
from skillopt.trainer.records import StepRecord
from skillopt.trainer.rundir import layout
from skillopt.trainer.segments.selection import promote, remember, score_interval
from skillopt.trainer.segments.state import StepState

__all__ = ["commit_step"]


def commit_step(ctx: RunContext, state: StepState) -> StepRecord:
    """Apply the gate's decision, advance the schedule, record the step in the step buffer,
    and commit the state with the step's record (returned)."""
    st, inp = ctx.state, state.inputs
    refl, proposal, gate = state.reflection, state.proposal, state.gate
    assert refl is not None, "a step commits after its rollout + reflect segment"
    assert st.current_skill is not None and st.best_skill is not None, "steps run after the baseline"
    if gate is not None:
        remember(ctx, gate.evaluation)
        if gate.current_evaluation is not None:
            remember(ctx, gate.current_evaluation)
        if gate.accepted:
            promote(st, gate.candidate, gate.evaluation.score, step=inp.step, origin=gate.origin)
    if proposal is not None and proposal.used_schedule:
        ctx.schedule.step()
    # Step buffer: this step's failure patterns, and the rejected edits on a reject.
    entry = ctx.buffer.record(
        step=inp.step,
        action=state.action,
        rows=refl.rows,
        failure_summaries=refl.failure_summaries,
        score_before=state.selection.current_score_before if state.selection else None,
        score_after=state.selection.candidate_score if state.selection else None,
        rejected_items=proposal.selected_items if proposal else (),
        check_failures=[c for c in proposal.stats.script_checks if not c.get("ok")] if proposal else (),
    )
    ctx.run.write_json(f"{layout.step_dir(inp.step)}/{layout.Step.DIGEST}", entry.to_dict())
    record = StepRecord(
        step=inp.step,
        epoch=inp.epoch,
        step_in_epoch=inp.step_in_epoch,
        timing=state.timing,
        rollout=refl.stats(),
        proposal=proposal.stats if proposal else None,
        selection=state.selection,
        action=state.action,
        current_score=st.current_score,
        best_score=st.best_score,
        best_step=st.best_step,
        current_origin=st.current_origin,
        best_origin=st.best_origin,
        skill_len=len(ctx.text(st.current_skill)),
        tokens=UsageTracker.delta(inp.usage_before, ctx.usage.snapshot()),
        wall_time_s=round(time.monotonic() - inp.started_at, 3),
        current_score_ci95=score_interval(ctx, st.current_skill),
        best_score_ci95=score_interval(ctx, st.best_skill),
    )
    ctx.run.save_skill(inp.step, st.current_skill)
    st.history.append(record)
    st.last_completed_step = inp.step
    st.step_stages = []  # they were the committed segments of this step
    if ctx.plan.lr_mode == "autonomous":
        # Rewritten whole from the history (an append would repeat a line when the commit
        # after it crashed and the step reran).
        decisions = [
            {"step": r.step, **r.proposal.lr_decision}
            for r in st.history
            if r.proposal and r.proposal.lr_decision
        ]
        ctx.run.write_text(
            layout.LR_HISTORY, "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in decisions)
        )
    ctx.persist(record)
    return record
