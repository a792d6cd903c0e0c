"""The propose segment: merge the step's patches (the ``aggregate`` stage), clip them to the
edit budget (``select``), and build the candidate skill (``update``: apply the edits, or
rewrite the skill from the selected suggestions, or take the full-rewrite candidate).

The budget comes from the schedule (peeked: it advances when the step commits), from the
optimizer (``lr_control_mode: autonomous``, cached in ``lr_decision.json``), or is unlimited
in full-rewrite mode. Every optimizer answer is cached in the step's folder.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import structlog

from skillopt.reflection import (
    autonomous_budget,
    full_rewrite_candidate,
    merge_patches,
    rank_and_select,
    rewrite_skill,
)
from skillopt.skill.checks import needs_check
from skillopt.skill.diff import package_diff
from skillopt.skill.package_edits import PackageApplyResult, apply_package_edits
from skillopt.skill.packed import join_packed, split_packed
from skillopt.trainer.context import RunContext
from skillopt.trainer.records import ProposalStats
from skillopt.trainer.rundir import layout
from skillopt.trainer.rundir.layout import Step
from skillopt.trainer.scoring import score_rows
from skillopt.trainer.segments.state import Proposal, StepState
from skillopt.types import SkillVersion, skill_hash

__all__ = ["ProposeSegment"]

log = structlog.get_logger("skillopt.trainer")


class ProposeSegment:
    """Aggregate → select → update."""

    name = "propose"  # stored in the run state's step_stages: never renamed
    stage = None

    def run(self, ctx: RunContext, state: StepState) -> StepState:
        refl = state.reflection
        if refl is None or not refl.has_patches:
            return state
        inp, cfg = state.inputs, ctx.cfg
        sdir = layout.step_dir(inp.step)
        mode = cfg.optimizer.skill_update_mode
        timing = dict(state.timing)
        with ctx.stage(inp.step, "aggregate") as t:
            merged = merge_patches(
                inp.text,
                refl.failure_patches,
                refl.success_patches,
                model=ctx.optimizer,
                update_mode=mode,
                merge_batch_size=cfg.gradient.merge_batch_size,
                workers=cfg.gradient.analyst_workers,
                meta_skill_text=inp.meta_text,
                cache=ctx.slot(sdir, Step.MERGED),
            )
        timing["aggregate_s"] = t.seconds
        with ctx.stage(inp.step, "select") as t:
            budget, lr_decision = self._budget(ctx, state, merged.items)
            selection = rank_and_select(
                inp.text,
                merged.items,
                budget=budget,
                model=ctx.optimizer,
                update_mode=mode,
                meta_skill_text=inp.meta_text,
                cache=ctx.slot(sdir, Step.RANKED),
            )
            if not ctx.run.exists(f"{sdir}/{Step.RANKED}"):  # the pool fit the budget: no call, on record
                ctx.run.write_json(f"{sdir}/{Step.RANKED}", selection.to_dict())
        timing["select_s"] = t.seconds
        with ctx.stage(inp.step, "update") as t:
            candidate, report = _update(ctx, state, selection.items)
        timing["update_s"] = t.seconds
        text = None if candidate is None else ctx.text(candidate)
        if text is not None:
            ctx.run.write_text(f"{sdir}/{Step.CANDIDATE}", text)
        stats = ProposalStats(
            n_edits_merged=len(merged.items),
            lr_decision=lr_decision,
            edit_budget=budget,
            lr_control_mode=ctx.plan.lr_mode,
            n_edits_ranked=len(selection.items),
            support_counts=tuple(_support(i) for i in selection.items),
            edit_apply_summary=report.get("edit_apply_summary"),
            rewrite_change_summary=report.get("rewrite_change_summary"),
            candidate_hash=skill_hash(text) if text is not None else None,
            candidate_skill_len=len(text) if text is not None else None,
            file_changes=tuple(report.get("file_changes") or ()),
            script_checks=tuple(report.get("script_checks") or ()),
        )
        proposal = Proposal(
            stats=stats,
            candidate=candidate,
            selected_items=tuple(selection.items),
            used_schedule=not ctx.plan.full_rewrite and ctx.plan.lr_mode != "autonomous",
        )
        return replace(state, proposal=proposal, timing=timing)

    def commit(self, ctx: RunContext, state: StepState) -> None:
        """Its outputs are in the step's caches: a resume replays it from there."""
        ctx.commit_segment(self.name)

    @staticmethod
    def _budget(ctx: RunContext, state: StepState, items: Sequence[Any]) -> tuple[int | None, dict | None]:
        """The edit budget, and the optimizer's decision when it chose it."""
        if ctx.plan.full_rewrite:
            return None, None
        if ctx.plan.lr_mode != "autonomous":
            return ctx.schedule.peek(), None
        refl, inp = state.reflection, state.inputs
        assert refl is not None
        s = score_rows(refl.rows)
        sdir = layout.step_dir(inp.step)
        decision = autonomous_budget(
            inp.text,
            items,
            model=ctx.optimizer,
            rollout_n=s.n,
            rollout_hard=s.hard,
            rollout_soft=s.soft,
            step_buffer_text=inp.buffer_text,
            meta_skill_text=inp.meta_text,
            update_mode=ctx.cfg.optimizer.skill_update_mode,
            cache=ctx.slot(sdir, Step.LR_DECISION),
        )
        if not ctx.run.exists(f"{sdir}/{Step.LR_DECISION}"):  # a fallback is not cached: on record
            ctx.run.write_json(f"{sdir}/{Step.LR_DECISION}", decision.to_dict())
        return decision.learning_rate, decision.to_dict()


def _support(item: Any) -> Any:
    return getattr(item, "support_count", None) or (
        item.get("support_count") if isinstance(item, Mapping) else None
    )


def _update(
    ctx: RunContext, state: StepState, items: Sequence[Any]
) -> tuple[SkillVersion | None, dict[str, Any]]:
    """The candidate version and what the record keeps about how it was made."""
    inp, cfg = state.inputs, ctx.cfg
    sdir = layout.step_dir(inp.step)
    mode = cfg.optimizer.skill_update_mode
    if mode == "patch":
        return _patch(ctx, state, items)
    # The rewrite modes rewrite SKILL.md; a package's other files ride along unchanged.
    skill_md, sections = split_packed(inp.text)
    if mode == "rewrite_from_suggestions":
        rw = rewrite_skill(
            skill_md,
            list(items),
            model=ctx.optimizer,
            step_buffer_text=inp.buffer_text,
            reasoning_effort=cfg.model.rewrite_reasoning_effort or None,
            max_tokens=cfg.model.rewrite_max_completion_tokens,
            cache=ctx.slot(sdir, Step.REWRITE),
        )
        if rw.new_skill is None:  # a failed rewrite is not cached: on record
            ctx.run.write_json(f"{sdir}/{Step.REWRITE}", rw.to_dict())
        new = None if rw.new_skill is None else ctx.frame.version(join_packed(rw.new_skill, sections))
        return new, {"rewrite_change_summary": tuple(rw.change_summary), **_changes(inp.skill, new)}
    rewritten = full_rewrite_candidate(list(items), skill=skill_md)
    ctx.run.write_json(f"{sdir}/{Step.FULL_REWRITE}", {"new_skill": rewritten})
    new = None if rewritten is None else ctx.frame.version(join_packed(rewritten, sections))
    return new, _changes(inp.skill, new)


def _changes(old: SkillVersion, new: SkillVersion | None) -> dict[str, Any]:
    """The candidate's change per package file, for the step record."""
    if new is None or new == old:
        return {}
    if not (old.files or new.files):  # a one-file skill: its record keeps the reference's shape
        return {}
    return {"file_changes": tuple(c.summary() for c in package_diff(old, new))}


def _patch(ctx: RunContext, state: StepState, items: Sequence[Any]) -> tuple[SkillVersion, dict[str, Any]]:
    """Apply the edits to the package; check the scripts they created or changed in a sandbox
    and apply again without the edits of a script that failed (the others stand)."""
    inp, cfg = state.inputs, ctx.cfg
    sdir = layout.step_dir(inp.step)
    apply = functools.partial(
        apply_package_edits,
        inp.skill,
        list(items),
        frame=ctx.frame,
        limits=cfg.env.skill_limits,
        whitespace_tolerant=cfg.optimizer.whitespace_tolerant_edits,
    )
    result = apply()
    checks = _check_scripts(ctx, state, result)
    failed = {c["path"]: f"{c['rule']}: {c['message']}" for c in checks if not c["ok"]}
    if failed:
        result = apply(drop_files=failed)
    ctx.run.write_json(
        f"{sdir}/{Step.APPLY_REPORT}",
        {
            "reports": [r.to_dict() for r in result.reports],
            "summary": result.summary.to_dict(),
            "script_checks": checks,
        },
    )
    report: dict[str, Any] = {"edit_apply_summary": result.summary.to_dict(), "script_checks": tuple(checks)}
    return result.skill, {**report, **_changes(inp.skill, result.skill)}


def _check_scripts(ctx: RunContext, state: StepState, result: PackageApplyResult) -> list[dict[str, Any]]:
    """Check, in a sandbox container, the scripts ``result`` created or changed (cached per
    step and package version: a resumed step does not check again)."""
    spec = result.skill
    present = {f.path for f in spec.files}
    paths = [p for p in result.changed_files if p in present and needs_check(p)]
    if not paths:
        return []
    sdir = layout.step_dir(state.inputs.step)
    key = {"tree_sha256": spec.tree_sha256, "paths": paths}
    cached = ctx.run.read_json(f"{sdir}/{Step.SCRIPT_CHECKS}")
    if isinstance(cached, dict) and cached.get("key") == key:
        return list(cached["checks"])
    out = [c.to_dict() for c in ctx.check_scripts(spec, paths)]
    log.info(
        "trainer.script_checks",
        step=state.inputs.step,
        checked=len(out),
        failed=sum(not c["ok"] for c in out),
    )
    ctx.run.write_json(f"{sdir}/{Step.SCRIPT_CHECKS}", {"key": key, "checks": out})
    return out
