"""The gate segment: a step's candidate measured on the selection split (the ``evaluate``
stage), the gate's decision on it, and the step's commit.

The rules and the statistics are the gate package's (:mod:`skillopt.gate`); this segment
takes the measurements they need (rollouts, the selection cache, the run directory) and
announces the decisions. :func:`decide_gate`, used by a step and by the slow update: the gate
off force-accepts; a measurement that lost too much to infrastructure rejects; otherwise
:func:`skillopt.gate.decide` by ``evaluation.gate_mode``, the ``sequential`` gate after its
rounds (:func:`sequential_rounds`). :func:`decide_final_best`: the final check
(:func:`skillopt.gate.decide_final`). Every decision records the paired test (``gate_test``),
also in ``strict`` mode, where it informs and the means decide. Deciding changes nothing: the
step's commit applies an acceptance with :func:`~.selection.promote`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

import structlog

from skillopt.gate import (
    GateAction,
    GateMode,
    PairedTest,
    SequentialTest,
    decide,
    decide_final,
    discordance,
    paired_differences,
    paired_test,
    regressions,
    reproduced,
    sequential_test,
)
from skillopt.trainer.callbacks import GateEvent
from skillopt.trainer.context import RunContext
from skillopt.trainer.records import SelectionStats
from skillopt.trainer.rundir import layout
from skillopt.trainer.segments.commit import commit_step
from skillopt.trainer.segments.selection import (
    SelectionEval,
    evaluate_round,
    evaluate_selection,
    measurement,
    round_items,
)
from skillopt.trainer.segments.state import GateOutcome, StepState
from skillopt.types import SkillVersion

__all__ = [
    "GateOutcome",
    "GateSegment",
    "decide_final_best",
    "decide_gate",
    "gate_test_record",
    "sequential_rounds",
]

log = structlog.get_logger("skillopt.trainer")


def decide_gate(
    ctx: RunContext,
    step: int,
    origin: str,
    candidate: SkillVersion,
    ev: SelectionEval,
    *,
    current_rel: str,
    candidate_rel: str,
) -> GateOutcome:
    """Decide on ``candidate`` against the current skill and announce it (``on_gate_decision``).

    The current skill's measurement comes from the selection cache; the ``paired``,
    ``repeat`` and ``sequential`` gates measure it into ``current_rel`` when the cache lacks
    it (a run resumed with another protocol), and the outcome carries that measurement for the
    commit. The ``sequential`` gate measures further rounds of both skills as its test asks
    (:func:`sequential_rounds`: the candidate's into ``candidate_rel``'s round dirs).
    """
    cfg, st = ctx.cfg, ctx.state
    e = cfg.evaluation
    assert st.current_skill is not None and st.current_score is not None and st.best_score is not None
    current = measurement(ctx, st.current_skill)
    fresh_current = None
    if current is None and e.use_gate and e.gate_mode.tests:
        current = fresh_current = evaluate_selection(ctx, st.current_skill, current_rel)
    test: PairedTest | SequentialTest | None = _paired(ev, current) if current is not None else None
    lost = ctx.too_many_infra(ev.n_infra, ev.n_rows)
    if e.use_gate and e.gate_mode is GateMode.SEQUENTIAL and current is not None and not lost:
        test = sequential_rounds(
            ctx,
            candidate,
            ev,
            st.current_skill,
            current,
            candidate_rel=candidate_rel,
            reference_rel=current_rel,
        )
    if not e.use_gate:
        action, reason = GateAction.FORCE_ACCEPT, "gate disabled"
    elif lost:
        action, reason = GateAction.REJECT, f"{ev.n_infra} selection rollouts failed on infrastructure"
    else:
        d = decide(
            ev.score,
            st.current_score,
            st.best_score,
            global_step=step,
            best_step=st.best_step,
            regressed=regressions(dict(current.items) if current else {}, ev.items),
            max_regressions=e.max_regressions,
            test=test if e.gate_mode.tests else None,
            alpha=e.gate_alpha,
            min_effect=e.gate_min_effect,
        )
        action, reason = d.action, d.reason
    accepted = action.accepted
    record = gate_test_record(ctx, test)
    outcome = GateOutcome(
        origin=origin,
        action=action,
        reason=reason,
        candidate=candidate,
        evaluation=ev,
        current_score_after=ev.score if accepted else st.current_score,
        best_score_after=ev.score if accepted and ev.score > st.best_score else st.best_score,
        current_evaluation=fresh_current,
        gate_test=record,
    )
    _announce(ctx, step, outcome)
    return outcome


def _announce(ctx: RunContext, step: int, outcome: GateOutcome) -> None:
    """The decision to the callbacks (``on_gate_decision``), before anything changed."""
    ev = outcome.evaluation
    ctx.hooks(
        "on_gate_decision",
        GateEvent(
            step=step,
            origin=outcome.origin,
            action=outcome.action,
            candidate_score=ev.score,
            current_score=outcome.current_score_after,
            best_score=outcome.best_score_after,
            reason=outcome.reason,
            candidate_skill=outcome.candidate,
            current_skill=ctx.state.current_skill,
            candidate_ci95=ev.score_ci95,
            gate_test=outcome.gate_test,
        ),
    )


def decide_final_best(
    ctx: RunContext, ev: SelectionEval, *, best_rel: str, final_rel: str
) -> tuple[dict[str, Any], SelectionEval | None]:
    """Whether the final skill (measured as ``ev``) replaces the best one, by the run's gate.

    ``strict`` (and the gate off): its score is strictly above the best score, earlier skills
    win ties. ``paired``/``repeat``: the paired test of final against best is significant
    (``gate_alpha``, ``gate_min_effect``) and its score above the best score (``sequential``:
    its rounds' test accepts, further rounds of final into ``final_rel``'s round dirs); the best skill is
    measured into ``best_rel`` when the selection cache lacks it. A measurement that lost too
    much to infrastructure never replaces the best skill.

    Returns:
        The decision's record (``action``: ``accept_new_best`` or ``reject``, ``reason``,
        ``gate_test`` or None), and the best skill's measurement when it was taken here.
    """
    st, e = ctx.state, ctx.cfg.evaluation
    assert st.best_score is not None
    assert st.current_skill is not None and st.best_skill is not None, "after the baseline"
    if ctx.too_many_infra(ev.n_infra, ev.n_rows):
        reason = f"{ev.n_infra} selection rollouts failed on infrastructure"
        return {"action": GateAction.REJECT, "reason": reason, "gate_test": None}, None
    step, best_step = st.last_completed_step, st.best_step
    if not e.use_gate or not e.gate_mode.tests:
        d = decide_final(ev.score, st.best_score, global_step=step, best_step=best_step)
        return {"action": d.action, "reason": d.reason, "gate_test": None}, None
    best = measurement(ctx, st.best_skill)
    fresh = None if best is not None else evaluate_selection(ctx, st.best_skill, best_rel)
    best = best or fresh
    assert best is not None
    test: PairedTest | SequentialTest = _paired(ev, best)
    if e.gate_mode is GateMode.SEQUENTIAL:
        test = sequential_rounds(
            ctx, st.current_skill, ev, st.best_skill, best, candidate_rel=final_rel, reference_rel=best_rel
        )
    d = decide_final(
        ev.score,
        st.best_score,
        global_step=step,
        best_step=best_step,
        test=test,
        regressed=regressions(dict(best.items), ev.items),
        max_regressions=e.max_regressions,
        alpha=e.gate_alpha,
        min_effect=e.gate_min_effect,
    )
    return {"action": d.action, "reason": d.reason, "gate_test": gate_test_record(ctx, test)}, fresh


def sequential_rounds(
    ctx: RunContext,
    candidate: SkillVersion,
    ev: SelectionEval,
    reference: SkillVersion,
    reference_ev: SelectionEval,
    *,
    candidate_rel: str,
    reference_rel: str,
) -> SequentialTest:
    """The ``sequential`` gate: round 1 is the two skills' one-rollout measurements (``ev``,
    ``reference_ev``); while the group-sequential test (:func:`skillopt.gate.sequential_test`)
    asks for another look, round ``k`` measures both skills on :func:`round_items` (by
    default where they disagreed most so far), one draw each per item: the skill's next draw
    this decision has not used, from the selection cache (the current skill's draws from
    earlier steps count) or rolled out into ``<rel>_r<k>`` (resumable row by row), up to
    ``evaluation.gate_max_rounds``.

    A round's fresh draws enter the selection cache as soon as they are taken: they are
    valid measurements whatever the step decides, and a candidate identical to one judged
    before replays the same draws to the same look and decision without a rollout.
    """
    e = ctx.cfg.evaluation
    rounds = [paired_differences(ev.item_scores, reference_ev.item_scores)]
    used_candidate: Counter[str] = Counter()
    used_reference: Counter[str] = Counter()
    for k in range(1, e.gate_max_rounds + 1):
        if k > 1:
            items = round_items(ctx, discordance(rounds), k)
            cand_k = evaluate_round(
                ctx, candidate, items, used_candidate, layout.repeat_dir(candidate_rel, k)
            )
            ref_k = evaluate_round(ctx, reference, items, used_reference, layout.repeat_dir(reference_rel, k))
            rounds.append(paired_differences(cand_k.item_scores, ref_k.item_scores))
        test = sequential_test(
            [list(r.values()) for r in rounds],
            alpha=e.gate_alpha,
            min_effect=e.gate_min_effect,
            max_looks=e.gate_max_rounds,
            spending=e.gate_spending,
            futility=e.gate_futility,
            round_fraction=_round_fraction(ctx),
        )
        if k == 1:
            first = test
        elif (
            k == 2
            and reproduced(ev.item_scores, cand_k.item_scores)
            and reproduced(reference_ev.item_scores, ref_k.item_scores)
        ):
            # Both skills scored every repeated item exactly as in round 1: a deterministic
            # target (temperature 0, a cache) has no noise to test, and a copy of round 1 would
            # only inflate the statistic (even into an accept). Round 1's means decide, as in
            # ``strict``.
            test = replace(first, boundary="reproduced", looks=2)
        if test.decided:
            log.info("gate.sequential", candidate=candidate.tree_sha256[:12], **test.to_json())
            return test
    raise AssertionError("the sequential test stops at its last look")  # pragma: no cover


def _round_fraction(ctx: RunContext) -> float:
    """The share of round 1's items a later round measures (as rounded to whole items)."""
    plan = ctx.plan
    return plan.round_size(ctx.cfg.evaluation.gate_round_fraction) / len(plan.selection)


def _paired(candidate: SelectionEval, current: SelectionEval) -> PairedTest:
    """The paired test over the items both measurements scored (by the gate's metric)."""
    pairs = paired_differences(candidate.item_scores, current.item_scores)
    return paired_test([candidate.item_scores[i] for i in pairs], [current.item_scores[i] for i in pairs])


def gate_test_record(ctx: RunContext, test: PairedTest | SequentialTest | None) -> dict[str, Any] | None:
    """The step record's ``gate_test``: the test (``name``, ``p_value``, ``effect``, ``ci95``,
    ``n``, ``wins``, ``losses``; the ``sequential`` gate's also ``z``, ``bound``,
    ``nominal_alpha``, ``looks``, ``max_looks``, ``boundary``, ``spending``) and the gate's mode
    and parameters. In ``strict`` mode the test is computed for the record only: the means
    decided."""
    if test is None:
        return None
    e = ctx.cfg.evaluation
    return {
        **test.to_json(),
        "mode": e.gate_mode,
        "alpha": e.gate_alpha,
        "min_effect": e.gate_min_effect,
        "repeats": ctx.scoring.repeats,
    }


class GateSegment:
    """The step's candidate on the selection split and the gate's decision on it; its commit
    is the step's."""

    name = "gate"
    stage = None

    def run(self, ctx: RunContext, state: StepState) -> StepState:
        proposal = state.proposal
        if proposal is None or proposal.candidate is None:
            return state
        step = state.inputs.step
        with ctx.stage(step, "evaluate") as t:
            ev = evaluate_selection(
                ctx, proposal.candidate, f"{layout.step_dir(step)}/{layout.Step.SELECTION}"
            )
        outcome = decide_gate(
            ctx,
            step,
            f"step_{step:04d}",
            proposal.candidate,
            ev,
            current_rel=f"{layout.step_dir(step)}/{layout.Step.SELECTION_CURRENT}",
            candidate_rel=f"{layout.step_dir(step)}/{layout.Step.SELECTION}",
        )
        current_skill = ctx.state.current_skill
        assert current_skill is not None, "steps run after the baseline"
        current = measurement(ctx, current_skill) or outcome.current_evaluation
        selection = SelectionStats(
            hard=ev.hard,
            soft=ev.soft,
            cached=ev.cached,
            n_infra=ev.n_infra,
            gate_metric=ctx.cfg.evaluation.gate_metric,
            candidate_score=ev.score,
            current_score_before=ctx.state.current_score,
            gate_reason=outcome.reason,
            hard_ci95=ev.hard_ci95,
            soft_ci95=ev.soft_ci95,
            candidate_score_ci95=ev.score_ci95,
            current_score_before_ci95=current.score_ci95 if current else None,
            gate_mode=ctx.cfg.evaluation.gate_mode,
            gate_test=outcome.gate_test,
        )
        # ``evaluate_s``: the stage's name, as step records (timing) and callbacks have it.
        timing = {**state.timing, "evaluate_s": t.seconds}
        return replace(state, gate=outcome, selection=selection, timing=timing)

    def commit(self, ctx: RunContext, state: StepState) -> None:
        """The gate's decision applied and the step committed (:func:`~.commit.commit_step`)."""
        commit_step(ctx, state)
