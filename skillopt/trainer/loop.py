"""The training loop: a fit is epochs, an epoch is steps then its end, a step is segments.

::

    fit:    baseline → epoch 1..N → final check → finish (test evaluations, summary.json)
    epoch:  step 1..S → slow update → meta skill
    step:   rollout+reflect → propose → gate (and the step's commit)

Each piece is a segment (``skillopt.trainer.segments``): ``run(ctx, state) -> state``, then
``commit(ctx, state)``; this module only orders them and drives each the same way
(:meth:`FitLoop._drive`). A segment runs one or more stages, the named, timed pieces of the
method that callbacks see. Resume is decided by the committed progress counters of the run
state (``last_completed_step``; ``step_stages``, the step's committed segments;
``epoch_stages``, the epoch ends'; ``epochs_done``): committed work is skipped, a step's
committed segments run again and replay from their caches, everything after the last commit
runs again and reaches the same decisions (every optimizer answer and every row it builds on
is cached on disk).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

import structlog

from skillopt.durable import is_disk_full
from skillopt.gate import gate_power_notice
from skillopt.observability import tracing
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
from skillopt.trainer.rundir import ConfigRecord, RunDirectoryFull, RunFacts, layout
from skillopt.trainer.segments import (
    BaselineSegment,
    EpochEndState,
    FinalCheckSegment,
    FinishSegment,
    FitState,
    GateSegment,
    MetaSkillSegment,
    ProposeSegment,
    RolloutReflectSegment,
    Segment,
    SlowUpdateSegment,
    StepInputs,
    StepState,
    epoch_record,
)
from skillopt.trainer.summary import FitResult

__all__ = ["FitLoop"]

log = structlog.get_logger("skillopt.trainer")

S = TypeVar("S")


class FitLoop:
    """Runs a fit over a :class:`RunContext` (new or resumed)."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.step_segments: tuple[Segment[StepState], ...] = (
            RolloutReflectSegment(),
            ProposeSegment(),
            GateSegment(),
        )
        o = ctx.cfg.optimizer
        self.epoch_segments: tuple[Segment[EpochEndState], ...] = tuple(
            segment
            for segment, on in (
                (SlowUpdateSegment(), o.use_slow_update),
                (MetaSkillSegment(), o.use_meta_skill),
            )
            if on
        )

    def run(self) -> FitResult:
        """Train, evaluate on test, write ``summary.json``; returns the result.

        Raises:
            RunDirectoryFull: the run directory's filesystem filled up (the run stopped at a
                write, which left the old file; ``--resume`` continues once there is space).
        """
        try:
            return self._run()
        except OSError as exc:
            root = self.ctx.run.root
            inside = not exc.filename or Path(str(exc.filename)).is_relative_to(root)
            if is_disk_full(exc) and inside:
                raise RunDirectoryFull.from_os_error(root, exc) from exc
            raise

    def _run(self) -> FitResult:
        ctx, t_fit = self.ctx, time.monotonic()
        resume_from = ctx.restore()
        # Every optimizer call is on record as it happens: a step killed before it committed
        # still has its calls counted (the ledger wins over the state's snapshot).
        ctx.usage.attach_ledger(ctx.run.path(layout.OPTIMIZER_LEDGER))
        _write_config(ctx)
        ctx.hooks("on_fit_start", self._fit_start(resume_from))
        try:
            ctx.run.save_skill(0, ctx.initial_skill)
            state = FitState()
            if not ctx.state.started:
                ctx.check_initial_scripts()  # a broken script of the user's: refused before any rollout
                state = self._drive(BaselineSegment(), state, step=0)
            stop_reason = self._epochs()
            state = replace(
                state,
                complete=not ctx.control.stop_requested,
                stop_reason=stop_reason or ctx.control.reason,
                wall_s=time.monotonic() - t_fit,
            )
            for segment in (FinalCheckSegment(), FinishSegment()):
                state = self._drive(segment, state, step=ctx.state.last_completed_step)
            assert state.result is not None
            result = state.result
        except BaseException as exc:
            ctx.hooks("on_exception", ExceptionEvent(error=exc))
            raise
        ctx.hooks("on_fit_end", FitEndEvent(result=result, out_dir=ctx.run.root))
        return result

    def _fit_start(self, resume_from: int) -> FitStartEvent:
        ctx = self.ctx
        return FitStartEvent(
            out_dir=ctx.run.root,
            num_epochs=ctx.plan.num_epochs,
            steps_per_epoch=ctx.plan.steps_per_epoch,
            total_steps=ctx.plan.total_steps,
            resume_from=resume_from,
            simulated=ctx.mode.simulated,
            config=ctx.cfg,
            mode=ctx.mode.describe(),
            baseline_score=ctx.baseline_score(),
            control=ctx.control,
            spend=ctx.spend(),
            notices=_start_notices(ctx),
        )

    def _drive(self, segment: Segment[S], state: S, *, step: int, committed: bool = False) -> S:
        """Run ``segment`` and commit it, inside its stage when it is one; a segment that
        committed before (a step's, on resume) runs again from its caches and is not committed
        twice."""
        ctx = self.ctx
        calls = ctx.usage.total().calls
        announce = ctx.stage(step, segment.stage) if segment.stage else contextlib.nullcontext()
        with announce:
            state = segment.run(ctx, state)
            if not committed:
                segment.commit(ctx, state)
        if committed and ctx.usage.total().calls != calls:  # its cached outputs were lost: recomputed
            log.warning("trainer.replay_recomputed", step=step, segment=segment.name)
        return state

    # -- the epochs ----------------------------------------------------------------------------------

    def _epochs(self) -> str:
        """Every epoch still to do, until a stop; returns the reason of a stop inside a step."""
        ctx = self.ctx
        for epoch in range(1, ctx.plan.num_epochs + 1):
            if ctx.check_budget():
                break
            try:
                self._epoch(epoch)
            except StopAtStage as stop:
                return ctx.rollback(stop)
        return ""

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
        last_step = epoch * ctx.plan.steps_per_epoch
        state = EpochEndState(epoch=epoch, last_step=last_step)
        for segment in self.epoch_segments:
            if f"{segment.name}_{epoch}" not in st.epoch_stages:
                state = self._drive(segment, state, step=last_step)
        record = epoch_record(ctx, epoch)
        st.epochs_done.append(epoch)
        st.epoch_records[str(epoch)] = record.to_json()
        ctx.persist()
        outcomes = {s: st.epoch_stages.get(f"{s}_{epoch}", "-") for s in ("slow_update", "meta_skill")}
        ctx.hooks(
            "on_epoch_end",
            EpochEndEvent(
                epoch=epoch,
                num_epochs=ctx.plan.num_epochs,
                record=record,
                stages=outcomes,
                reasons=self._epoch_end_reasons(epoch),
            ),
        )

    def _epoch_end_reasons(self, epoch: int) -> dict[str, str]:
        """Why each epoch-end segment ended as it did, read from its committed result (so a
        resumed run reports it too): the optimizer's error for ``no_content``, else the gate's."""
        reasons: dict[str, str] = {}
        for name, file in (
            ("slow_update", layout.Epoch.SLOW_RESULT),
            ("meta_skill", layout.Epoch.META_RESULT),
        ):
            result = self.ctx.run.read_json(f"{layout.epoch_dir(name, epoch)}/{file}")
            if isinstance(result, dict) and (why := result.get("error") or result.get("gate_reason")):
                reasons[name] = str(why)
        return reasons

    # -- a step --------------------------------------------------------------------------------------

    def _step(self, step: int, epoch: int, step_in_epoch: int, batches: Sequence[Batch]) -> None:
        # One trace per step (a run's steps would make one trace hours long).
        attrs = {
            "skillopt.run_id": self.ctx.rollouts.spec.run_id,
            "skillopt.step": step,
            "skillopt.epoch": epoch,
        }
        with tracing.span("trainer.step", attrs):
            self._run_step(step, epoch, step_in_epoch, batches)

    def _run_step(self, step: int, epoch: int, step_in_epoch: int, batches: Sequence[Batch]) -> None:
        ctx = self.ctx
        started_at, usage_before = time.monotonic(), ctx.usage.snapshot()
        ctx.hooks(
            "on_step_start",
            StepStartEvent(
                step=step, total_steps=ctx.plan.total_steps, epoch=epoch, step_in_epoch=step_in_epoch
            ),
        )
        committed = set(ctx.state.step_stages)
        current = ctx.state.current_skill
        assert current is not None, "steps run after the baseline"
        state = StepState(
            inputs=StepInputs(
                step=step,
                epoch=epoch,
                step_in_epoch=step_in_epoch,
                skill=current,
                text=ctx.text(current),
                batches=tuple(batches),
                buffer_text=ctx.buffer.format_for_prompt(),
                meta_text=ctx.meta_text(),
                started_at=started_at,
                usage_before=usage_before,
            )
        )
        for segment in self.step_segments:
            state = self._drive(segment, state, step=step, committed=segment.name in committed)
        record = ctx.state.history[-1]  # the gate segment's commit recorded the step
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
    derived = RunFacts(
        train_size=len(ctx.plan.train),
        selection_size=len(ctx.plan.selection),
        steps_per_epoch=ctx.plan.steps_per_epoch,
        total_steps=ctx.plan.total_steps,
        lr_control_mode=ctx.plan.lr_mode,
        simulated=ctx.mode.simulated,
        mode=ctx.mode,
        data=ctx.data.describe(),
    )
    ctx.run.write_json(layout.CONFIG, ConfigRecord(config=ctx.cfg, derived=derived).to_json())


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
