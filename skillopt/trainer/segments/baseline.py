"""The baseline segment: the initial skill's selection score, what every later decision
compares against (the ``baseline`` stage)."""

from __future__ import annotations

from dataclasses import replace

from skillopt.errors import SystemicFailure
from skillopt.trainer.context import RunContext
from skillopt.trainer.rundir import layout
from skillopt.trainer.segments.selection import evaluate_selection, remember
from skillopt.trainer.segments.state import FitState

__all__ = ["BaselineSegment"]


class BaselineSegment:
    """Measure the initial skill on the selection split; commit it as current and best."""

    name = "baseline"
    stage = "baseline"

    def run(self, ctx: RunContext, state: FitState) -> FitState:
        """Measure the baseline.

        Raises:
            SystemicFailure: the evaluation lost more rows to infrastructure than
                ``evaluation.max_infra_fraction`` allows (a resume runs those rows again).
        """
        ev = evaluate_selection(ctx, ctx.initial_skill, layout.BASELINE_SELECTION)
        if ctx.too_many_infra(ev.n_infra, ev.n_rows):
            raise SystemicFailure(
                f"the baseline selection evaluation lost {ev.n_infra} of {ev.n_rows} rollouts to "
                f"infrastructure failures (limit {ctx.cfg.evaluation.max_infra_fraction:.0%}, "
                f"evaluation.max_infra_fraction); see {layout.BASELINE_SELECTION}/{layout.RESULTS}, fix the "
                "sandbox and resume: those rollouts are run again"
            )
        return replace(state, baseline=ev)

    def commit(self, ctx: RunContext, state: FitState) -> None:
        """The initial skill becomes current and best with its score."""
        ev, st = state.baseline, ctx.state
        assert ev is not None, "the baseline commits after its run"
        remember(ctx, ev)
        st.current_skill = st.best_skill = ctx.initial_skill
        st.current_score = st.best_score = ev.score
        st.current_origin = st.best_origin = "initial"
        st.best_step = 0
        ctx.persist()
