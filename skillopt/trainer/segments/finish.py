"""The segments that end a fit: the final check (the final skill against the best one, by the
run's gate) and the finish (the initial, best and final skills on the test split, the ``test``
stage; the run's result, ``summary.json``).

A run stopped early (a budget, a stop request) writes the result of what it did, without the
final evaluations, with ``status: stopped`` and the reason; ``--resume`` continues it.
"""

from __future__ import annotations

from dataclasses import replace

from skillopt import __version__
from skillopt.gate import GateAction
from skillopt.skill.document import inject_empty_slow_update_field
from skillopt.skill.packed import PackageFrame
from skillopt.trainer.context import RunContext
from skillopt.trainer.evaluation import evaluate_split
from skillopt.trainer.manifest import data_manifest
from skillopt.trainer.rundir import layout, read_rows
from skillopt.trainer.rundir.evalsummary import EvalSummary
from skillopt.trainer.scoring import paired_rows
from skillopt.trainer.segments.gate import decide_final_best
from skillopt.trainer.segments.selection import (
    epoch_record,
    evaluate_selection,
    measurement,
    promote,
    remember,
)
from skillopt.trainer.segments.state import FinalCheck, FitState
from skillopt.trainer.summary import EpochRecord, FitResult, TestScores
from skillopt.types import RolloutResult, SkillVersion

__all__ = ["FinalCheckSegment", "FinishSegment"]


class FinalCheckSegment:
    """A complete run's final skill, when it is not the best one, measured on the selection
    split; it becomes the best skill only if the run's gate says it beats the best one."""

    name = "final_check"
    stage = None

    def run(self, ctx: RunContext, state: FitState) -> FitState:
        st = ctx.state
        if not state.complete:
            return replace(state, final_score=st.current_score)
        assert st.current_skill is not None, "a complete run measured its baseline"
        if st.current_skill == st.best_skill:
            return replace(state, final_score=st.best_score)
        ev = evaluate_selection(ctx, st.current_skill, layout.FINAL_SELECTION)
        verdict, best_ev = decide_final_best(
            ctx, ev, best_rel=layout.FINAL_SELECTION_BEST, final_rel=layout.FINAL_SELECTION
        )
        final = FinalCheck(evaluation=ev, verdict=verdict, best_evaluation=best_ev)
        return replace(state, final=final, final_score=ev.score)

    def commit(self, ctx: RunContext, state: FitState) -> None:
        """The measurements kept, the verdict applied and recorded, the stop reason set."""
        st, final = ctx.state, state.final
        if final is not None:
            assert st.current_skill is not None, "a final check follows the baseline"
            remember(ctx, final.evaluation)
            if final.best_evaluation is not None:
                remember(ctx, final.best_evaluation)
            st.final_gate = dict(final.verdict)
            promote(
                st,
                st.current_skill,
                final.evaluation.score,
                step=st.last_completed_step,
                origin=st.current_origin,
                make_current=False,
                may_become_best=final.verdict["action"] == GateAction.ACCEPT_NEW_BEST,
            )
        st.stop_reason = "" if state.complete else state.stop_reason or "stopped"
        ctx.persist()


def _same_behaviour(frame: PackageFrame, a: SkillVersion, b: SkillVersion) -> bool:
    """Two versions that differ at most by the slow update's empty block (epoch 1 adds it: the
    hash changes, what the target is told does not), so one test evaluation stands for both, as
    the selection scores carry over when the block is added."""
    if a == b:
        return True
    return inject_empty_slow_update_field(frame.text(a)) == inject_empty_slow_update_field(frame.text(b))


class FinishSegment:
    """A complete run's test evaluations, and the run's :class:`FitResult` (``summary.json``)."""

    name = "finish"
    stage = None

    def run(self, ctx: RunContext, state: FitState) -> FitState:
        tests = self._tests(ctx) if state.complete and ctx.cfg.evaluation.eval_test else None
        state = replace(state, tests=tests)
        return replace(state, result=self._result(ctx, state))

    def commit(self, ctx: RunContext, state: FitState) -> None:
        """``summary.json``: the run's result."""
        assert state.result is not None, "the finish commits after its run"
        ctx.run.write_json(layout.SUMMARY, state.result.to_json())

    def _tests(self, ctx: RunContext) -> TestScores:
        st = ctx.state
        assert st.current_skill is not None and st.best_skill is not None, "after the baseline"
        with ctx.stage(st.last_completed_step, "test"):
            baseline, baseline_rows = _test_eval(
                ctx, ctx.initial_skill, layout.TEST_BASELINE, layout.skill_file(0)
            )
            best, best_rows = _test_eval(ctx, st.best_skill, layout.TEST_BEST, layout.BEST_SKILL)
            final, final_rows = (
                (best, best_rows)
                if _same_behaviour(ctx.frame, st.current_skill, st.best_skill)
                else _test_eval(
                    ctx, st.current_skill, layout.TEST_FINAL, layout.skill_file(st.last_completed_step)
                )
            )
        delta, final_delta = paired_rows(best_rows, baseline_rows), paired_rows(final_rows, baseline_rows)
        return TestScores(
            baseline_hard=baseline.hard,
            baseline_soft=baseline.soft,
            best_hard=best.hard,
            best_soft=best.soft,
            final_hard=final.hard,
            final_soft=final.soft,
            n_infra={"baseline": baseline.n_infra, "best": best.n_infra, "final": final.n_infra},
            ci95={
                **{
                    f"{name}_{k}": ci
                    for name, summary in (("baseline", baseline), ("best", best), ("final", final))
                    for k, ci in (("hard", summary.hard_ci95), ("soft", summary.soft_ci95))
                },
                "delta_hard": delta.ci95 if delta else None,
                "final_delta_hard": final_delta.ci95 if final_delta else None,
            },
            p_values={
                name: t.p_value for name, t in (("delta_hard", delta), ("final_delta_hard", final_delta)) if t
            },
        )

    @staticmethod
    def _result(ctx: RunContext, state: FitState) -> FitResult:
        st, cfg = ctx.state, ctx.cfg

        measured = {
            name: measurement(ctx, skill) if skill is not None else None
            for name, skill in (
                ("baseline", ctx.initial_skill),
                ("best", st.best_skill),
                ("final", st.current_skill),
            )
        }

        def hard_of(name: str) -> float | None:
            m = measured[name]
            return m.hard if m else None

        def ci(name: str, what: str) -> tuple[float, float] | None:
            m = measured[name]
            return (m.hard_ci95 if what == "hard" else m.score_ci95) if m else None

        actions = [r.action for r in st.history]
        prefix_share, prefix_by_role = ctx.prefix_report()
        return FitResult(
            version=f"skillopt-{__version__}",
            status="complete" if state.complete else "stopped",
            stop_reason=st.stop_reason,
            simulated=ctx.mode.simulated,
            mode=ctx.mode.to_dict(),
            config=cfg.to_dict(redacted=True),
            baseline_selection_hard=hard_of("baseline"),
            baseline_selection_hard_ci95=ci("baseline", "hard"),
            baseline_selection_score=ctx.baseline_score(),
            baseline_selection_score_ci95=ci("baseline", "score"),
            best_selection_hard=hard_of("best"),
            best_selection_hard_ci95=ci("best", "hard"),
            best_selection_score=st.best_score,
            best_selection_score_ci95=ci("best", "score"),
            final_selection_hard=hard_of("final"),
            final_selection_hard_ci95=ci("final", "hard"),
            final_selection_score=state.final_score,
            final_selection_score_ci95=ci("final", "score"),
            best_step=st.best_step,
            current_origin=st.current_origin,
            best_origin=st.best_origin,
            final_gate=st.final_gate or None,
            total_steps=len(st.history),
            total_accepts=sum("accept" in a for a in actions),
            total_rejects=sum(a == "reject" for a in actions),
            total_skips=sum(a == "skip_no_patches" for a in actions),
            epoch_stats=tuple(_epoch_record(ctx, e) for e in range(1, cfg.train.num_epochs + 1)),
            epoch_stages=dict(st.epoch_stages),
            total_wall_time_s=round(state.wall_s, 3),
            token_summary=ctx.usage_summary(),
            cost_usd=round(ctx.cost(), 6),
            cacheable_prefix_share=prefix_share,
            cacheable_prefix=prefix_by_role,
            sandbox_hosts=tuple(st.hosts),
            image_digests=tuple(sorted(_digests(ctx))),
            environment={
                **ctx.environment,
                "pinned_runtime_image_digest": st.environment.get("runtime_image_digest", ""),
                "data": data_manifest(
                    {"train": ctx.plan.train, "selection": ctx.plan.selection, "test": ctx.plan.test}
                ),
            },
            tests=state.tests,
        )


def _test_eval(
    ctx: RunContext, skill: SkillVersion, rel: str, skill_file: str
) -> tuple[EvalSummary, list[RolloutResult]]:
    """``skill`` on the test split (``skillopt eval``'s routine), its summary kept in its
    rollout dir (with the keys those summaries had before they were ``skillopt eval``'s too)."""
    summary, rows = evaluate_split(
        ctx.rollouts,
        ctx.plan.test,
        skill,
        ctx.run.path(rel),
        label=rel,
        split="test",
        skill_name=skill_file,
        config=ctx.cfg,
        categories=ctx.data.task_types(),
    )
    ctx.run.write_json(f"{rel}/{layout.TEST_SUMMARY}", {**summary.legacy_json(), **summary.to_json()})
    return summary, rows


def _epoch_record(ctx: RunContext, epoch: int) -> EpochRecord:
    """The record made when the epoch ended (an epoch the run did not finish: as it stands)."""
    st = ctx.state
    saved = st.epoch_records.get(str(epoch))
    if saved is not None:
        return EpochRecord.from_json(saved)
    return epoch_record(ctx, epoch)


def _digests(ctx: RunContext) -> set[str]:
    """The image digests every row of the run was made with."""
    return {
        d for p in ctx.run.root.rglob(layout.RESULTS) for r in read_rows(p.parent) if (d := r.image_digest)
    }
