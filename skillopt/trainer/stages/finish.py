"""The finish stage: check the final skill against the best one, evaluate the initial, best
and final skills on the test split, and write the run's result (``summary.json``).

A run stopped early (a budget, a stop request) writes the result of what it did, without the
final evaluations, with ``status: stopped`` and the reason; ``--resume`` continues it.
"""

from __future__ import annotations

from typing import Any

from skillopt import __version__
from skillopt.stats import ci_of
from skillopt.trainer.context import RunContext
from skillopt.trainer.manifest import data_manifest
from skillopt.trainer.rundir import layout, read_result_lines
from skillopt.trainer.scoring import by_category, paired_rows, row_means, score_rows
from skillopt.trainer.stages.gate import decide_final_best
from skillopt.trainer.stages.selection import epoch_record, evaluate_selection, measurement, promote, remember
from skillopt.trainer.summary import EpochRecord, FitResult, TestScores
from skillopt.types import RolloutResult, skill_hash

__all__ = ["FinishStage"]


class FinishStage:
    """Final selection check and promotion, test evaluations, the run's :class:`FitResult`."""

    name = "finish"

    def run(self, ctx: RunContext, *, wall_s: float, complete: bool, stop_reason: str = "") -> FitResult:
        st = ctx.state
        final_score: float | None = st.best_score
        if complete and skill_hash(st.current_skill) != skill_hash(st.best_skill):
            # The final skill becomes best only if the run's gate says it beats the best one.
            ev = evaluate_selection(ctx, st.current_skill, layout.FINAL_SELECTION)
            remember(ctx, ev)
            final_score = ev.score
            verdict = decide_final_best(ctx, ev, best_rel=layout.FINAL_SELECTION_BEST)
            best_ev = verdict.pop("best_evaluation")
            if best_ev is not None:
                remember(ctx, best_ev)
            st.final_gate = verdict
            promote(
                st,
                st.current_skill,
                ev.score,
                step=st.last_completed_step,
                origin=st.current_origin,
                make_current=False,
                may_become_best=verdict["action"] == "accept_new_best",
            )
        elif not complete:
            final_score = st.current_score
        st.stop_reason = "" if complete else stop_reason or "stopped"
        ctx.persist()
        tests = self._tests(ctx) if complete and ctx.cfg.evaluation.eval_test else None
        result = self._result(ctx, wall_s=wall_s, complete=complete, final_score=final_score, tests=tests)
        ctx.run.write_json(layout.SUMMARY, result.to_json())
        return result

    def _tests(self, ctx: RunContext) -> TestScores:
        st = ctx.state
        with ctx.stage(st.last_completed_step, "test"):
            baseline, baseline_rows = self._test_eval(ctx, ctx.initial_skill, layout.TEST_BASELINE)
            best, best_rows = self._test_eval(ctx, st.best_skill, layout.TEST_BEST)
            final, final_rows = (
                (best, best_rows)
                if skill_hash(st.current_skill) == skill_hash(st.best_skill)
                else self._test_eval(ctx, st.current_skill, layout.TEST_FINAL)
            )
        delta, final_delta = paired_rows(best_rows, baseline_rows), paired_rows(final_rows, baseline_rows)
        return TestScores(
            baseline_hard=baseline["hard"],
            baseline_soft=baseline["soft"],
            best_hard=best["hard"],
            best_soft=best["soft"],
            final_hard=final["hard"],
            final_soft=final["soft"],
            n_infra={"baseline": baseline["n_infra"], "best": best["n_infra"], "final": final["n_infra"]},
            ci95={
                **{
                    f"{name}_{k}": ci_of(summary[f"{k}_ci95"])
                    for name, summary in (("baseline", baseline), ("best", best), ("final", final))
                    for k in ("hard", "soft")
                },
                "delta_hard": delta.ci95 if delta else None,
                "final_delta_hard": final_delta.ci95 if final_delta else None,
            },
            p_values={
                name: t.p_value for name, t in (("delta_hard", delta), ("final_delta_hard", final_delta)) if t
            },
        )

    @staticmethod
    def _test_eval(ctx: RunContext, skill: str, rel: str) -> tuple[dict[str, Any], list[RolloutResult]]:
        items = ctx.plan.test
        rows = ctx.rollout(items, skill, rel, train=False)
        types = {it.id: it.task_type for it in items}
        s = score_rows(rows)
        summary = {
            **by_category(rows, types, [*ctx.data.task_types(), "overall"]),
            **row_means(rows),
            "n": s.n,
            "n_infra": s.n_infra,
            "env_options": dict(ctx.cfg.env.options),  # e.g. SpreadsheetBench's grading mode
        }
        ctx.run.write_json(f"{rel}/{layout.TEST_SUMMARY}", summary)
        return summary, rows

    @staticmethod
    def _result(
        ctx: RunContext, *, wall_s: float, complete: bool, final_score: float | None, tests: TestScores | None
    ) -> FitResult:
        st, cfg = ctx.state, ctx.cfg

        measured = {
            name: measurement(ctx, skill)
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
            status="complete" if complete else "stopped",
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
            final_selection_score=final_score,
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
            total_wall_time_s=round(wall_s, 3),
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
            tests=tests,
        )


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
        d
        for p in ctx.run.root.rglob(layout.RESULTS)
        for r in read_result_lines(p.parent)
        if (d := r.get("image_digest"))
    }
