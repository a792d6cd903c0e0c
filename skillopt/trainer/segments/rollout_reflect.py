"""The rollout + reflect segment: roll the current skill out on each accumulation batch (the
``rollout`` stage), and let the analysts turn the trajectories into patches (the ``reflect``
stage; plus, with ``gradient.deep_reflect``, a probe patch from diagnostic re-runs of a few
items).

Every answer it builds on is cached in the step's folder (rows in the rollout dirs, analyst
chunks in ``patches/``, the probe's instruction and patch in ``probe/``), so a rerun of the
segment after a crash or stop asks nothing twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from skillopt.envs.base import earlier_attempt
from skillopt.reflection import (
    RawPatch,
    ReflectParams,
    ReflectResult,
    diagnostic_instruction,
    pick_probe_items,
    reflect,
    reflect_on_probe,
)
from skillopt.trainer.context import RunContext
from skillopt.trainer.records import BatchStats
from skillopt.trainer.rundir.layout import Step, batch_dir
from skillopt.trainer.scoring import score_rows
from skillopt.trainer.segments.state import Reflection, StepInputs, StepState
from skillopt.types import RolloutResult

__all__ = ["RolloutReflectSegment", "probe_patch"]


class RolloutReflectSegment:
    """Rollouts and reflection over the step's accumulation batches."""

    name = "rollout_reflect"  # stored in the run state's step_stages: never renamed
    stage = None

    def run(self, ctx: RunContext, state: StepState) -> StepState:
        inp, cfg = state.inputs, ctx.cfg
        timing = dict(state.timing)
        rows_all: list[RolloutResult] = []
        fail: list[RawPatch] = []
        succ: list[RawPatch] = []
        summaries: list = []
        stats: list[BatchStats] = []
        for a, batch in enumerate(inp.batches):
            bdir = batch_dir(inp.step, a, len(inp.batches))
            with ctx.stage(inp.step, "rollout") as t:
                rows = ctx.rollout(batch.items, inp.skill, f"{bdir}/{Step.ROLLOUT}", train=True)
            timing["rollout_s"] = timing.get("rollout_s", 0.0) + t.seconds
            rows_all += rows
            with ctx.stage(inp.step, "reflect") as t:
                params = ReflectParams(
                    env=cfg.env.name,
                    budget=cfg.optimizer.learning_rate,
                    seed=batch.seed,
                    minibatch_size=cfg.gradient.minibatch_size,
                    workers=cfg.gradient.analyst_workers,
                    failure_only=cfg.gradient.failure_only,
                    update_mode=cfg.optimizer.skill_update_mode,
                    step_buffer_text=inp.buffer_text,
                    meta_skill_text=inp.meta_text,
                    skill_aware=cfg.optimizer.use_skill_aware_reflection,
                )
                res = reflect(
                    rows,
                    inp.text,
                    params,
                    model=ctx.optimizer,
                    cache=ctx.run.stage_cache(f"{bdir}/{Step.PATCHES}"),
                    task_texts=ctx.plan.task_texts,
                )
                fail += res.failure_patches
                succ += res.success_patches
                summaries += res.failure_summaries
                if cfg.gradient.deep_reflect:
                    probe = probe_patch(ctx, rows, inp, bdir, batch.seed)
                    if probe is not None:
                        fail.append(probe)
            timing["reflect_s"] = timing.get("reflect_s", 0.0) + t.seconds
            stats.append(_batch_stats(a, batch.seed, rows, res))
        reflection = Reflection(
            rows=tuple(rows_all),
            failure_patches=tuple(fail),
            success_patches=tuple(succ),
            failure_summaries=tuple(summaries),
            batches=tuple(stats),
        )
        return replace(state, reflection=reflection, timing=timing)

    def commit(self, ctx: RunContext, state: StepState) -> None:
        """Its outputs are in the step's caches: a resume replays it from there."""
        ctx.commit_segment(self.name)


def _batch_stats(index: int, seed: int, rows: Sequence[RolloutResult], res: ReflectResult) -> BatchStats:
    s = score_rows(rows)
    return BatchStats(
        batch_idx=index,
        batch_seed=seed,
        n_envs=len(rows),
        hard=s.hard,
        soft=s.soft,
        n_infra=s.n_infra,
        n_failure_patches=len(res.failure_patches),
        n_success_patches=len(res.success_patches),
    )


def probe_patch(
    ctx: RunContext, rows: Sequence[RolloutResult], inp: StepInputs, bdir: str, seed: int
) -> RawPatch | None:
    """Deep-reflect probe: re-run representative items with a diagnostic instruction and
    reflect on what the diagnostic runs reveal (a probe patch, or None)."""
    g = ctx.cfg.gradient
    picked = pick_probe_items(rows, n_failures=g.probe_failures, n_successes=g.probe_successes, seed=seed)
    if not picked:
        return None
    instruction = diagnostic_instruction(
        inp.text,
        picked,
        model=ctx.optimizer,
        task_texts=ctx.plan.task_texts,
        cache=ctx.slot(bdir, Step.PROBE_INSTRUCTION),
    )
    if not instruction:
        return None
    by_id = {it.id: it for it in ctx.plan.train}
    # The re-run sees its own earlier attempt as context (never the grader's messages).
    items = [by_id[r.id].with_earlier_attempt(earlier_attempt(r)) for r in picked if r.id in by_id]
    diag_rows = ctx.rollout(
        items, inp.skill, f"{bdir}/{Step.PROBE_ROLLOUT}", train=True, diagnostic=instruction
    )
    return reflect_on_probe(
        picked,
        diag_rows,
        inp.text,
        model=ctx.optimizer,
        budget=ctx.cfg.optimizer.learning_rate,
        diagnostic_text=instruction,
        update_mode=ctx.cfg.optimizer.skill_update_mode,
        step_buffer_text=inp.buffer_text,
        meta_skill_text=inp.meta_text,
        task_texts=ctx.plan.task_texts,
        cache=ctx.slot(bdir, Step.PROBE_PATCH),
    )
