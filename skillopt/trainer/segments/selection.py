"""Selection measurements and promotion: the pieces every segment that judges a skill shares
(the baseline, a step's gate, the slow update's gate, the final check).

:func:`evaluate_selection` scores a skill on the selection split (from the selection cache
when that skill was measured before with the run's protocol: one rollout per item, or
``evaluation.gate_repeats`` in the ``repeat`` gate); :func:`remember` puts a measurement into
the cache when its segment commits; :func:`promote` is the one rule for making a skill current
and best.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import structlog

from skillopt.envs.base import TaskItem
from skillopt.gate import Interval, discordant_round, mean_interval, round_draws, round_key
from skillopt.trainer.context import RunContext
from skillopt.trainer.rundir import layout
from skillopt.trainer.scoring import score_rows
from skillopt.trainer.state import TrainerState
from skillopt.trainer.summary import EpochRecord
from skillopt.types import RolloutResult, SkillVersion

__all__ = [
    "SelectionEval",
    "epoch_record",
    "evaluate_round",
    "evaluate_selection",
    "measurement",
    "promote",
    "remember",
    "round_items",
    "score_interval",
]

log = structlog.get_logger("skillopt.trainer")


@dataclass(frozen=True, kw_only=True)
class SelectionEval:
    """A skill's selection scores: means over the scored rows, the gate's score, per item the
    hard and soft scores (means over the repeats) and the gate's score, rows lost to
    infrastructure, and 95% intervals of the three means (:func:`skillopt.gate.mean_interval`
    over the items)."""

    key: str  # the gate cache's key (skillopt.gate.gate_key)
    hard: float
    soft: float
    score: float
    items: Mapping[str, float]
    soft_items: Mapping[str, float]
    item_scores: Mapping[str, float]
    n_infra: int
    n_rows: int
    repeats: int
    cached: bool
    hard_ci95: Interval | None = None
    soft_ci95: Interval | None = None
    score_ci95: Interval | None = None


def _evaluation(
    ctx: RunContext,
    skill: SkillVersion,
    *,
    key: str,
    hard: float,
    soft: float,
    items: Mapping[str, float],
    soft_items: Mapping[str, float],
    n_infra: int,
    n_rows: int,
    repeats: int,
    cached: bool,
) -> SelectionEval:
    scores = ctx.scoring.item_scores(items, soft_items, skill)
    return SelectionEval(
        key=key,
        hard=hard,
        soft=soft,
        score=ctx.scoring.score(hard, soft, skill),
        items=dict(items),
        soft_items=dict(soft_items),
        item_scores=scores,
        n_infra=n_infra,
        n_rows=n_rows,
        repeats=repeats,
        cached=cached,
        hard_ci95=mean_interval(list(items.values())),
        soft_ci95=mean_interval(list(soft_items.values())) if soft_items else None,
        score_ci95=mean_interval(list(scores.values())),
    )


def measurement(ctx: RunContext, skill: SkillVersion) -> SelectionEval | None:
    """The selection measurement of ``skill`` taken earlier in the run (``None``: never)."""
    key = ctx.scoring.key(skill)
    hit = ctx.selection_cache.get(key)
    if hit is None:
        return None
    return _evaluation(
        ctx,
        skill,
        key=key,
        hard=hit.hard,
        soft=hit.soft,
        items=hit.items,
        soft_items=hit.soft_items,
        n_infra=hit.n_infra,
        n_rows=len(ctx.plan.selection) * ctx.scoring.repeats,
        repeats=ctx.scoring.repeats,
        cached=True,
    )


def score_interval(ctx: RunContext, skill: SkillVersion) -> Interval | None:
    """95% interval of ``skill``'s selection score (``None``: not measured)."""
    return ctx.scoring.interval(skill)


def epoch_record(ctx: RunContext, epoch: int) -> EpochRecord:
    """The epoch's record as the run stands now (its decisions, the best and current scores
    with their intervals)."""
    st = ctx.state
    return EpochRecord.of(
        epoch,
        st.history,
        best=st.best_score,
        current=st.current_score,
        best_ci95=score_interval(ctx, st.best_skill) if st.best_skill is not None else None,
        current_ci95=score_interval(ctx, st.current_skill) if st.current_skill is not None else None,
    )


def evaluate_selection(ctx: RunContext, skill: SkillVersion, rel: str) -> SelectionEval:
    """Selection score of ``skill``: from the cache when measured before with this run's
    protocol, else rolled out into ``rel`` (and, in the ``repeat`` gate, ``rel_r2`` ...)."""
    cached = measurement(ctx, skill)
    if cached is not None:
        return cached
    repeats = ctx.scoring.repeats
    dirs = [layout.repeat_dir(rel, r) for r in range(1, repeats + 1)]
    lanes = ctx.rollout_repeats(ctx.plan.selection, skill, dirs)
    rows = [row for lane in lanes for row in lane]
    s = score_rows(rows)
    if s.n_infra:
        log.warning("selection.infra_rows", dir=rel, n_infra=s.n_infra, n=len(rows))
    per_item: dict[str, list[RolloutResult]] = {}
    for row in rows:
        if row.infra_error is None:
            per_item.setdefault(row.id, []).append(row)
    return _evaluation(
        ctx,
        skill,
        key=ctx.scoring.key(skill),
        hard=s.hard,
        soft=s.soft,
        items={i: sum(r.hard for r in rs) / len(rs) for i, rs in per_item.items()},
        soft_items={i: sum(r.soft for r in rs) / len(rs) for i, rs in per_item.items()},
        n_infra=s.n_infra,
        n_rows=len(rows),
        repeats=repeats,
        cached=False,
    )


def evaluate_round(
    ctx: RunContext, skill: SkillVersion, items: Sequence[TaskItem], used: Counter[str], rel: str
) -> SelectionEval:
    """A later round of the ``sequential`` gate: one draw of ``skill`` per item of ``items``,
    each the skill's next draw on that item this decision has not used yet (``used``: draws
    used so far, per item; updated). Draws taken by earlier decisions come from the selection
    cache (:func:`skillopt.gate.round_draws`); the missing ones are rolled out into ``rel``
    (resumable row by row) and cached at once as the skill's next round (its own draws, under
    :func:`~skillopt.gate.round_key`). Items lost to infrastructure are left out."""
    h = skill.tree_sha256
    pool_hard, pool_soft, batch = round_draws(ctx.selection_cache, h)
    hard: dict[str, float] = {}
    soft: dict[str, float] = {}
    missing: list[TaskItem] = []
    for it in items:
        k = used[it.id]
        if k < len(pool_hard.get(it.id, ())):
            hard[it.id], soft[it.id] = pool_hard[it.id][k], pool_soft[it.id][k]
            used[it.id] += 1
        else:
            missing.append(it)
    n_infra = 0
    if missing:
        (rows,) = ctx.rollout_repeats(missing, skill, [rel])
        s = score_rows(rows)
        n_infra = s.n_infra
        if n_infra:
            log.warning("selection.infra_rows", dir=rel, n_infra=n_infra, n=len(rows))
        fresh = [r for r in rows if r.infra_error is None]
        ctx.selection_cache.put(
            round_key(h, batch),
            s.hard,
            s.soft,
            {r.id: r.hard for r in fresh},
            n_infra=n_infra,
            soft_items={r.id: r.soft for r in fresh},
        )
        for r in fresh:
            hard[r.id], soft[r.id] = r.hard, r.soft
            used[r.id] += 1
    return _evaluation(
        ctx,
        skill,
        key=round_key(h, batch),
        hard=sum(hard.values()) / len(hard) if hard else 0.0,
        soft=sum(soft.values()) / len(soft) if soft else 0.0,
        items=hard,
        soft_items=soft,
        n_infra=n_infra,
        n_rows=len(items),
        repeats=1,
        cached=True,  # its fresh draws are cached already; remember() has nothing to add
    )


def round_items(
    ctx: RunContext, history: Mapping[str, tuple[int, int]], round_no: int
) -> tuple[TaskItem, ...]:
    """The items round ``round_no`` (> 1) of the ``sequential`` gate measures
    (``evaluation.gate_round_items``): ``discordant``, where the two skills disagreed most
    so far in this decision (``history``: item → pairs measured, discordant;
    :func:`skillopt.gate.discordant_round`); ``fixed``, the run's fixed sequence
    (:meth:`~skillopt.trainer.planning.RunPlan.round_items`)."""
    e, plan, seed = ctx.cfg.evaluation, ctx.plan, ctx.cfg.train.seed
    if e.gate_round_items == "fixed":
        return plan.round_items(round_no, seed=seed, fraction=e.gate_round_fraction)
    order = plan.round_order(seed)
    by_id = {it.id: it for it in order}
    chosen = discordant_round([it.id for it in order], history, plan.round_size(e.gate_round_fraction))
    return tuple(by_id[i] for i in chosen)


def remember(ctx: RunContext, ev: SelectionEval) -> None:
    """Keep a measurement in the selection cache (at its segment's commit). One that lost too
    much to infrastructure is not kept: the same skill evaluated again is measured anew."""
    if not ev.cached and not ctx.too_many_infra(ev.n_infra, ev.n_rows):
        ctx.selection_cache.put(
            ev.key,
            ev.hard,
            ev.soft,
            dict(ev.items),
            n_infra=ev.n_infra,
            soft_items=dict(ev.soft_items),
            repeats=ev.repeats,
        )


def promote(
    st: TrainerState,
    skill: SkillVersion,
    score: float,
    *,
    step: int,
    origin: str,
    make_current: bool = True,
    may_become_best: bool = True,
) -> bool:
    """Make ``skill`` the current skill (unless ``make_current`` is off) and the best one when
    it scores strictly higher than the best so far (earlier skills win ties) and
    ``may_become_best`` (off for a skill no gate accepted: a forced slow update).

    Returns:
        Whether it became the best skill.
    """
    if make_current:
        st.current_skill, st.current_score, st.current_origin = skill, score, origin
    if may_become_best and st.best_score is not None and score > st.best_score:
        st.best_skill, st.best_score, st.best_step, st.best_origin = skill, score, step, origin
        return True
    return False
