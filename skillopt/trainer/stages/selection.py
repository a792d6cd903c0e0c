"""Selection evaluations and promotion: the pieces every stage that judges a skill shares
(the baseline, a step's gate, the slow update's gate, the final skill's check).

:func:`evaluate_selection` scores a skill on the selection split (from the selection cache
when that skill was measured before); :func:`remember` puts a measurement into the cache when
its stage commits; :func:`promote` is the one rule for making a skill current and best.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import structlog

from skillopt.errors import SystemicFailure
from skillopt.trainer.context import RunContext
from skillopt.trainer.rollouts import score_rows
from skillopt.trainer.rundir import layout
from skillopt.trainer.state import TrainerState
from skillopt.types import skill_hash

__all__ = ["BaselineStage", "SelectionEval", "evaluate_selection", "promote", "remember"]

log = structlog.get_logger("skillopt.trainer")


@dataclass(frozen=True, kw_only=True)
class SelectionEval:
    """A skill's selection scores: means over the scored rows, the gate's score, per-item
    hard scores (for the no-regression check), rows lost to infrastructure."""

    skill_hash: str
    hard: float
    soft: float
    score: float
    items: Mapping[str, float]
    n_infra: int
    n_rows: int
    cached: bool


def evaluate_selection(ctx: RunContext, skill: str, rel: str) -> SelectionEval:
    """Selection score of ``skill``: from the cache by its hash, else rolled out into ``rel``."""
    key = skill_hash(skill)
    n_rows = len(ctx.plan.selection)
    hit = ctx.gate_cache.get(key)
    if hit is not None:
        return SelectionEval(
            skill_hash=key,
            hard=hit.hard,
            soft=hit.soft,
            score=ctx.score(hit.hard, hit.soft, skill),
            items=dict(hit.items or {}),
            n_infra=hit.n_infra,
            n_rows=n_rows,
            cached=True,
        )
    rows = ctx.rollout(ctx.plan.selection, skill, rel, train=False)
    s = score_rows(rows)
    if s.n_infra:
        log.warning("selection.infra_rows", dir=rel, n_infra=s.n_infra, n=len(rows))
    return SelectionEval(
        skill_hash=key,
        hard=s.hard,
        soft=s.soft,
        score=ctx.score(s.hard, s.soft, skill),
        items={r.id: r.hard for r in rows if r.infra_error is None},
        n_infra=s.n_infra,
        n_rows=len(rows),
        cached=False,
    )


def remember(ctx: RunContext, ev: SelectionEval) -> None:
    """Keep a measurement in the selection cache (at its stage's commit). One that lost too
    much to infrastructure is not kept: the same skill evaluated again is measured anew."""
    if not ev.cached and not ctx.too_many_infra(ev.n_infra, ev.n_rows):
        ctx.gate_cache.put(ev.skill_hash, ev.hard, ev.soft, dict(ev.items), n_infra=ev.n_infra)


def promote(
    st: TrainerState, skill: str, score: float, *, step: int, origin: str, make_current: bool = True
) -> bool:
    """Make ``skill`` the current skill (unless ``make_current`` is off) and the best one when
    it scores strictly higher than the best so far (earlier skills win ties).

    Returns:
        Whether it became the best skill.
    """
    if make_current:
        st.current_skill, st.current_score, st.current_origin = skill, score, origin
    if st.best_score is not None and score > st.best_score:
        st.best_skill, st.best_score, st.best_step, st.best_origin = skill, score, step, origin
        return True
    return False


class BaselineStage:
    """The initial skill's selection score: what every later decision compares against."""

    name = "baseline"

    def run(self, ctx: RunContext) -> None:
        """Measure and commit the baseline.

        Raises:
            SystemicFailure: the evaluation lost more rows to infrastructure than
                ``evaluation.max_infra_fraction`` allows (a resume runs those rows again).
        """
        st = ctx.state
        with ctx.stage(0, self.name):
            ev = evaluate_selection(ctx, ctx.initial_skill, layout.BASELINE_SELECTION)
            if ctx.too_many_infra(ev.n_infra, ev.n_rows):
                raise SystemicFailure(
                    f"the baseline selection evaluation lost {ev.n_infra} of {ev.n_rows} rollouts to "
                    f"infrastructure failures (limit {ctx.cfg.evaluation.max_infra_fraction:.0%}, "
                    f"evaluation.max_infra_fraction); see {layout.BASELINE_SELECTION}/{layout.RESULTS}, fix the "
                    "sandbox and resume: those rollouts are run again"
                )
            remember(ctx, ev)
            st.current_skill = st.best_skill = ctx.initial_skill
            st.current_score = st.best_score = ev.score
            st.current_origin = st.best_origin = "initial"
            st.best_step = 0
        ctx.persist()
