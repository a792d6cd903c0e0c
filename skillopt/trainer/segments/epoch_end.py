"""The epoch-end segments, each one stage of its name: the slow update (a protected block of
longer-term guidance, gated or force-injected) and the meta skill (lessons for the optimizer
itself), both from one comparison of the previous epoch's last skill with the current one on
the same train items.

The comparison is made once per epoch and passed to both segments; it is cached
(``comparison.json``), so a resume between the two gives the meta skill the very pairs the
slow update saw (made with the skill *before* the slow update changed it).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import structlog

from skillopt.gate import GateAction, ci_json, gate_key
from skillopt.reflection import (
    Pair,
    comparison_pairs,
    filter_pairs,
    missing_changed_pairs,
    propose_meta_skill,
    propose_slow_update,
)
from skillopt.reflection.cache import cache_key, memoized
from skillopt.skill.document import inject_empty_slow_update_field
from skillopt.trainer.context import RunContext
from skillopt.trainer.planning import sample_items
from skillopt.trainer.rundir.layout import Epoch, epoch_dir
from skillopt.trainer.segments.gate import decide_gate
from skillopt.trainer.segments.selection import SelectionEval, evaluate_selection, promote, remember
from skillopt.types import SkillVersion, skill_hash

__all__ = ["Comparison", "EpochEndOutcome", "EpochEndState", "MetaSkillSegment", "SlowUpdateSegment"]

log = structlog.get_logger("skillopt.trainer")


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """Both skills' packed texts (what the optimizer reads) and their pairs of rows."""

    prev_skill: str
    curr_skill: str
    pairs: tuple[Pair, ...]


@dataclass(frozen=True, kw_only=True)
class EpochEndOutcome:
    """An epoch-end segment's result: its action, the skill it leaves current, its record."""

    action: str
    skill: SkillVersion | None = None
    evaluation: SelectionEval | None = None
    #: The current skill's measurement when the gate had to take it.
    current_evaluation: SelectionEval | None = None
    accepted: bool = False
    meta_skill: str = ""
    result: Mapping[str, Any]


@dataclass(frozen=True, kw_only=True)
class EpochEndState:
    epoch: int
    last_step: int
    comparison: Comparison | None = None
    slow_update: EpochEndOutcome | None = None
    meta_skill: EpochEndOutcome | None = None


def _compare(ctx: RunContext, state: EpochEndState) -> Comparison:
    """The epoch's comparison pairs (made once, cached in the first epoch-end segment's folder)."""
    if state.comparison is not None:
        return state.comparison
    o = ctx.cfg.optimizer
    rel = epoch_dir("slow_update" if o.use_slow_update else "meta_skill", state.epoch)
    prev_step = (state.epoch - 1) * ctx.plan.steps_per_epoch
    prev_skill = ctx.run.read_skill(prev_step)
    if prev_skill is None:
        log.warning("epoch_end.previous_skill_missing", step=prev_step, using="the initial skill")
        prev_skill = ctx.initial_skill
    curr_skill = ctx.state.current_skill
    assert curr_skill is not None, "epochs end after the baseline"
    return memoized(
        ctx.slot(rel, Epoch.COMPARISON),
        cache_key("comparison", 1, {"epoch": state.epoch, "prev": skill_hash(ctx.text(prev_skill))}),
        lambda: _pairs(ctx, state.epoch, rel, prev_skill, curr_skill),
        encode=lambda c: {
            "prev_skill": c.prev_skill,
            "curr_skill": c.curr_skill,
            "pairs": [p.to_dict(include_trajectories=True) for p in c.pairs],
        },
        decode=lambda d: Comparison(
            prev_skill=str(d["prev_skill"]),
            curr_skill=str(d["curr_skill"]),
            pairs=tuple(Pair.from_dict(p) for p in d["pairs"]),
        ),
    )


def _pairs(
    ctx: RunContext, epoch: int, rel: str, prev_skill: SkillVersion, curr_skill: SkillVersion
) -> Comparison:
    """Roll both skills out on the same train sample (topped up for the ``changed`` policy)."""
    o, seed = ctx.cfg.optimizer, ctx.cfg.train.seed + epoch * 2000
    texts = ctx.plan.task_texts
    prev_text, curr_text = ctx.text(prev_skill), ctx.text(curr_skill)
    sample = sample_items(ctx.plan.train, o.slow_update_samples, seed)
    prev_rows = ctx.rollout(sample, prev_skill, f"{rel}/{Epoch.ROLLOUT_PREV}", train=False)
    curr_rows = ctx.rollout(sample, curr_skill, f"{rel}/{Epoch.ROLLOUT_CURR}", train=False)
    pairs = comparison_pairs(
        prev_rows, curr_rows, task_texts=texts, prev_skill=prev_text, curr_skill=curr_text
    )
    policy = o.longitudinal_pair_policy
    need = missing_changed_pairs(pairs, policy, target=o.slow_update_samples)
    used = {it.id for it in sample}
    while need > 0:
        extra = sample_items(ctx.plan.train, need, seed + len(used), exclude=used)
        if not extra:
            break
        used |= {it.id for it in extra}
        p = ctx.rollout(extra, prev_skill, f"{rel}/{Epoch.ROLLOUT_PREV}/topup", train=False)
        c = ctx.rollout(extra, curr_skill, f"{rel}/{Epoch.ROLLOUT_CURR}/topup", train=False)
        pairs += comparison_pairs(p, c, task_texts=texts, prev_skill=prev_text, curr_skill=curr_text)
        need = missing_changed_pairs(pairs, policy, target=o.slow_update_samples)
    kept = filter_pairs(pairs, policy)
    ctx.run.write_json(f"{rel}/{Epoch.PAIRS}", [p.to_dict() for p in kept])
    if len(kept) != len(pairs):
        ctx.run.write_json(f"{rel}/{Epoch.PAIRS_ALL}", [p.to_dict() for p in pairs])
    return Comparison(prev_skill=prev_text, curr_skill=curr_text, pairs=tuple(kept))


class SlowUpdateSegment:
    """Epoch 1: an empty slow-update block is injected; later epochs propose its content from
    the comparison, then gate it with the run's gate like a step's candidate (the default,
    ``optimizer.slow_update_gate_with_selection``), or, with that off (the reference's
    default), force it into the current skill with a re-measured score (the reference left
    the score stale here, §14.6) but never into the best one."""

    name = stage = "slow_update"  # also in the run state's epoch_stages: never renamed

    def run(self, ctx: RunContext, state: EpochEndState) -> EpochEndState:
        t0 = time.monotonic()
        rel = epoch_dir(self.name, state.epoch)
        if state.epoch == 1:
            current = ctx.state.current_skill
            assert current is not None, "epochs end after the baseline"
            skill = ctx.frame.version(inject_empty_slow_update_field(ctx.text(current)))
            outcome = EpochEndOutcome(
                action="inject_placeholder", skill=skill, result={"action": "inject_placeholder"}
            )
        else:
            state = replace(state, comparison=_compare(ctx, state))
            outcome = self._propose(ctx, state, rel)
        result = {**outcome.result, "time_s": round(time.monotonic() - t0, 3)}
        return replace(state, slow_update=replace(outcome, result=result))

    def _propose(self, ctx: RunContext, state: EpochEndState, rel: str) -> EpochEndOutcome:
        comp = state.comparison
        assert comp is not None
        proposal = propose_slow_update(
            comp.prev_skill,
            comp.curr_skill,
            comp.pairs,
            model=ctx.optimizer,
            cache=ctx.slot(rel, Epoch.PROPOSAL),
        )
        if not proposal.candidate:
            return EpochEndOutcome(
                action="no_content", result={"action": "no_content", "error": proposal.error}
            )
        candidate = ctx.frame.version(proposal.candidate)
        ctx.run.write_text(f"{rel}/{Epoch.CANDIDATE}", ctx.text(candidate))
        ev = evaluate_selection(ctx, candidate, f"{rel}/{Epoch.SELECTION}")
        current_eval, gate_test, gate_reason = None, None, ""
        if ctx.cfg.optimizer.slow_update_gate_with_selection:
            origin = f"slow_update_epoch_{state.epoch:02d}"
            gate = decide_gate(
                ctx,
                state.last_step,
                origin,
                candidate,
                ev,
                current_rel=f"{rel}/{Epoch.SELECTION_CURRENT}",
                candidate_rel=f"{rel}/{Epoch.SELECTION}",
            )
            action, accepted, gate_reason = gate.action, gate.accepted, gate.reason
            current_eval, gate_test = gate.current_evaluation, gate.gate_test
        else:
            # The reference's default: into the current skill without a gate. No test supports
            # it, so it never becomes the best skill (the final check's gate may make it so).
            action, accepted = GateAction.FORCE_ACCEPT, True
            gate_reason = "forced (optimizer.slow_update_gate_with_selection: false)"
        n = max(1, len(comp.pairs))
        result = {
            "action": action,
            "gate_reason": gate_reason,
            "content": proposal.content,
            "reasoning": proposal.reasoning,
            "candidate_hash": skill_hash(ctx.text(candidate)),
            "selection_hard": ev.hard,
            "selection_hard_ci95": ci_json(ev.hard_ci95),
            "candidate_gate_score": ev.score,
            "candidate_gate_score_ci95": ci_json(ev.score_ci95),
            "gate_test": gate_test,
            "prev_hard": sum(p.prev.hard for p in comp.pairs) / n,
            "curr_hard": sum(p.curr.hard for p in comp.pairs) / n,
            "update_origin": "slow_update_momentum",
        }
        return EpochEndOutcome(
            action=action,
            skill=candidate,
            evaluation=ev,
            current_evaluation=current_eval,
            accepted=accepted,
            result=result,
        )

    def commit(self, ctx: RunContext, state: EpochEndState) -> None:
        """Apply the outcome; the slow update and the skill it produced commit together."""
        o, st = state.slow_update, ctx.state
        assert o is not None
        if o.action == "inject_placeholder" and o.skill is not None:
            # An empty protected block changes the hash, not the behaviour: carry the measured
            # selection scores over to the new text.
            before = ctx.scoring.measured(st.current_skill) if st.current_skill is not None else None
            st.current_skill = o.skill
            if before is not None:
                ctx.selection_cache.put_entry(gate_key(o.skill.tree_sha256, before.repeats), before)
        elif o.evaluation is not None and o.skill is not None:
            remember(ctx, o.evaluation)
            if o.current_evaluation is not None:
                remember(ctx, o.current_evaluation)
            if o.accepted:
                origin = f"slow_update_epoch_{state.epoch:02d}"
                promote(
                    st,
                    o.skill,
                    o.evaluation.score,
                    step=state.last_step,
                    origin=origin,
                    may_become_best=o.action != GateAction.FORCE_ACCEPT,
                )
        assert st.current_skill is not None, "epochs end after the baseline"
        ctx.run.save_skill(state.last_step, st.current_skill)
        st.epoch_stages[f"{self.name}_{state.epoch}"] = o.action
        ctx.persist()
        ctx.run.write_json(f"{epoch_dir(self.name, state.epoch)}/{Epoch.SLOW_RESULT}", dict(o.result))


class MetaSkillSegment:
    """Epoch 2 on: the optimizer's own lessons, from the epoch's comparison and the previous
    meta skill (epoch 1 has nothing to compare)."""

    name = stage = "meta_skill"  # also in the run state's epoch_stages: never renamed

    def run(self, ctx: RunContext, state: EpochEndState) -> EpochEndState:
        if state.epoch == 1:
            skip = EpochEndOutcome(action="skip_first_epoch", result={"action": "skip_first_epoch"})
            return replace(state, meta_skill=skip)
        state = replace(state, comparison=_compare(ctx, state))
        comp = state.comparison
        assert comp is not None
        proposal = propose_meta_skill(
            comp.prev_skill,
            comp.curr_skill,
            comp.pairs,
            ctx.state.meta_skill,
            model=ctx.optimizer,
            cache=ctx.slot(epoch_dir(self.name, state.epoch), Epoch.PROPOSAL),
        )
        action = "updated" if proposal.content else "no_content"
        result = {"action": action, "meta_skill_content": proposal.content, "reasoning": proposal.reasoning}
        return replace(
            state, meta_skill=EpochEndOutcome(action=action, meta_skill=proposal.content, result=result)
        )

    def commit(self, ctx: RunContext, state: EpochEndState) -> None:
        """The meta skill and the segment's outcome commit together."""
        o = state.meta_skill
        assert o is not None
        if o.meta_skill:
            ctx.state.meta_skill = o.meta_skill
        ctx.state.epoch_stages[f"{self.name}_{state.epoch}"] = o.action
        ctx.persist()
        ctx.run.write_json(f"{epoch_dir(self.name, state.epoch)}/{Epoch.META_RESULT}", dict(o.result))
