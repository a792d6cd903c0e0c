"""The training loop: a fit is epochs, an epoch is steps then its end, a step is stages.

::

    fit:    baseline → epoch 1..N → finish (final check, test evaluations, summary.json)
    epoch:  step 1..S → slow update → meta skill
    step:   rollout+reflect → propose (aggregate, select, update) → evaluate+gate → commit

What each stage does lives in ``skillopt.trainer.stages``; this module only orders them and
commits. Resume is decided by the committed progress counters of the run state
(``last_completed_step``, ``step_stages``, ``epoch_stages``, ``epochs_done``): committed work
is skipped, a step's committed stages are replayed from the stage cache, everything after the
last commit runs again and reaches the same decisions (every optimizer answer and every row it
builds on is cached on disk).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import structlog

from skillopt.gate import gate_power_notice
from skillopt.trainer.callbacks import (
    EpochEndEvent,
    EpochStartEvent,
    ExceptionEvent,
    FitEndEvent,
    FitStartEvent,
    StepEndEvent,
    StepStartEvent,
)
from skillopt.trainer.context import RunContext, StopAtStage
from skillopt.trainer.planning import Batch, plan_epoch
from skillopt.trainer.rundir import layout
from skillopt.trainer.stages import (
    BaselineStage,
    EpochEndState,
    EvaluateGateStage,
    FinishStage,
    MetaSkillStage,
    ProposeStage,
    RolloutReflectStage,
    SlowUpdateStage,
    StepInputs,
    StepState,
    commit_step,
    epoch_record,
)
from skillopt.trainer.summary import FitResult

__all__ = ["FitLoop"]

log = structlog.get_logger("skillopt.trainer")


class FitLoop:
    """Runs a fit over a :class:`RunContext` (new or resumed)."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.step_stages = (RolloutReflectStage(), ProposeStage(), EvaluateGateStage())
        self.epoch_stages = [
            stage
            for stage, on in (
                (SlowUpdateStage(), ctx.cfg.optimizer.use_slow_update),
                (MetaSkillStage(), ctx.cfg.optimizer.use_meta_skill),
            )
            if on
        ]

    def run(self) -> FitResult:
        """Train, evaluate on test, write ``summary.json``; returns the result."""
        ctx, t_fit = self.ctx, time.monotonic()
        resume_from = ctx.restore()
        # Every optimizer call is on record as it happens: a step killed before it committed
        # still has its calls counted (the ledger wins over the state's snapshot).
        ctx.usage.attach_ledger(ctx.run.path(layout.OPTIMIZER_LEDGER))
        _write_config(ctx)
        ctx.hooks(
            "on_fit_start",
            FitStartEvent(
                out_dir=ctx.run.root,
                num_epochs=ctx.plan.num_epochs,
                steps_per_epoch=ctx.plan.steps_per_epoch,
                total_steps=ctx.plan.total_steps,
                resume_from=resume_from,
                simulated=ctx.mode.simulated,
                config=ctx.cfg.to_dict(redacted=True),
                mode=ctx.mode.describe(),
                baseline_score=ctx.baseline_score(),
                control=ctx.control,
                spend=ctx.spend(),
                notices=_start_notices(ctx),
            ),
        )
        try:
            ctx.run.save_skill(0, ctx.initial_skill)
            if not ctx.state.started:
                BaselineStage().run(ctx)
            stop_reason = ""
            for epoch in range(1, ctx.plan.num_epochs + 1):
                if ctx.check_budget():
                    break
                try:
                    self._epoch(epoch)
                except StopAtStage as stop:
                    stop_reason = ctx.rollback(stop)
                    break
            complete = not ctx.control.stop_requested
            result = FinishStage().run(
                ctx,
                wall_s=time.monotonic() - t_fit,
                complete=complete,
                stop_reason=stop_reason or ctx.control.reason,
            )
        except BaseException as exc:
            ctx.hooks("on_exception", ExceptionEvent(error=exc))
            raise
        ctx.hooks("on_fit_end", FitEndEvent(result=result, out_dir=ctx.run.root))
        return result

    # -- an epoch ------------------------------------------------------------------------------------

    def _epoch(self, epoch: int) -> None:
        ctx, cfg = self.ctx, self.ctx.cfg
        if epoch in ctx.state.epochs_done:
            return
        if ctx.buffer.epoch != epoch:
            ctx.buffer.reset(epoch=epoch)  # the buffer is per epoch (a resumed one keeps its own)
        ctx.hooks("on_epoch_start", EpochStartEvent(epoch=epoch, num_epochs=ctx.plan.num_epochs))
        acc = cfg.train.accumulation
        batches = plan_epoch(
            ctx.plan.train,
            epoch=epoch,
            seed=cfg.train.seed,
            batch_size=cfg.train.batch_size,
            n_batches=ctx.plan.steps_per_epoch * acc,
        )
        for k, step in enumerate(ctx.plan.epoch_steps(epoch)):
            if step <= ctx.state.last_completed_step:
                continue
            if ctx.check_budget():
                return
            self._step(step, epoch, k, batches[k * acc : (k + 1) * acc])
        if ctx.check_budget():
            return
        self._epoch_end(epoch)

    def _epoch_end(self, epoch: int) -> None:
        ctx, st = self.ctx, self.ctx.state
        state = EpochEndState(epoch=epoch, last_step=epoch * ctx.plan.steps_per_epoch)
        for stage in self.epoch_stages:
            if f"{stage.name}_{epoch}" not in st.epoch_stages:
                state = stage.run(ctx, state)
                stage.commit(ctx, state)
        record = epoch_record(ctx, epoch)
        st.epochs_done.append(epoch)
        st.epoch_records[str(epoch)] = record.to_json()
        ctx.persist()
        stages = {s: st.epoch_stages.get(f"{s}_{epoch}", "-") for s in ("slow_update", "meta_skill")}
        ctx.hooks(
            "on_epoch_end",
            EpochEndEvent(epoch=epoch, num_epochs=ctx.plan.num_epochs, record=record, stages=stages),
        )

    # -- a step --------------------------------------------------------------------------------------

    def _step(self, step: int, epoch: int, step_in_epoch: int, batches: Sequence[Batch]) -> None:
        ctx = self.ctx
        t0, usage_before = time.monotonic(), ctx.usage.snapshot()
        ctx.hooks(
            "on_step_start",
            StepStartEvent(
                step=step, total_steps=ctx.plan.total_steps, epoch=epoch, step_in_epoch=step_in_epoch
            ),
        )
        committed = set(ctx.state.step_stages)
        state = StepState(
            inputs=StepInputs(
                step=step,
                epoch=epoch,
                step_in_epoch=step_in_epoch,
                skill=ctx.state.current_skill,
                batches=tuple(batches),
                buffer_text=ctx.buffer.format_for_prompt(),
                meta_text=ctx.meta_text(),
            )
        )
        for stage in self.step_stages:
            calls = ctx.usage.total().calls
            state = stage.run(ctx, state)
            if stage.name in committed:
                if ctx.usage.total().calls != calls:  # its cached outputs were lost: recomputed
                    log.warning("trainer.replay_recomputed", step=step, stage=stage.name)
            elif stage is not self.step_stages[-1]:
                ctx.commit_stage(stage.name)
        record = commit_step(ctx, state, wall_s=time.monotonic() - t0, usage_before=usage_before)
        ctx.hooks(
            "on_step_end",
            StepEndEvent(
                step=step,
                record=record,
                history=tuple(ctx.state.history),
                baseline_score=ctx.baseline_score(),
                usage_total=ctx.usage_summary(),
                spend=ctx.spend(),
            ),
        )


def _write_config(ctx: RunContext) -> None:
    """``config.json``: the effective config (redacted) and what the run derived from it."""
    derived = {
        "train_size": len(ctx.plan.train),
        "selection_size": len(ctx.plan.selection),
        "steps_per_epoch": ctx.plan.steps_per_epoch,
        "total_steps": ctx.plan.total_steps,
        "lr_control_mode": ctx.plan.lr_mode,
        "simulated": ctx.mode.simulated,
        "mode": ctx.mode.to_dict(),
        "data": ctx.data.describe(),
    }
    ctx.run.write_json(layout.CONFIG, {**ctx.cfg.to_dict(redacted=True), "derived": derived})


def _start_notices(ctx: RunContext) -> tuple[str, ...]:
    """Notices for the start of the run (also logged): what the gate can detect."""
    e = ctx.cfg.evaluation
    if not e.use_gate:
        return ()
    power = gate_power_notice(
        mode=e.gate_mode,
        metric=e.gate_metric,
        n_items=len(ctx.plan.selection),
        alpha=e.gate_alpha,
        semantic_density=e.use_semantic_density,
    )
    if power is None:
        return ()
    text, can_accept = power
    (log.info if can_accept else log.warning)("gate.power", notice=text)
    return (text,)
