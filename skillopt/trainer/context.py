"""Everything a segment of a run may use, in one object built before any segment runs.

:class:`RunContext` holds the run's inputs (config, plan, the rollouts, the optimizer model,
the run directory, the hooks) and its mutable state (the committed
:class:`~skillopt.trainer.state.TrainerState`, the edit-budget schedule, the step buffer, the
selection cache, usage). Segments compute from it and return their outputs; only their commits
change the state, and :meth:`RunContext.persist` writes it. Segments live in
``skillopt.trainer.segments`` and import this module, never the loop.

Stages are the named, timed pieces of the method inside the segments (``rollout``,
``reflect``, ``aggregate``, ``select``, ``update``, ``evaluate``; ``baseline``,
``slow_update``, ``meta_skill``, ``test``): :meth:`RunContext.stage` times one, announces it to
the callbacks, and honours a stop asked for before each stage of a step.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import structlog

from skillopt.config import Config
from skillopt.envs.base import EnvData, TaskItem
from skillopt.gate import GateCache, SelectionScoring, rekey_by_tree
from skillopt.models.prefix import prefix_report
from skillopt.models.roles import PriceTable, RoleModel, UsageTracker
from skillopt.observability import tracing
from skillopt.reflection import StepBuffer, meta_skill_block
from skillopt.reflection.cache import Slot
from skillopt.skill.checks import ScriptCheck, needs_check
from skillopt.skill.package import PackageProblem, SkillPackageError
from skillopt.skill.packed import PackageFrame
from skillopt.skill.schedule import EditBudgetSchedule
from skillopt.trainer.callbacks import BatchEvent, CallbackList, RowEvent, RunControl, Spend, StageEvent
from skillopt.trainer.planning import RunPlan
from skillopt.trainer.records import StepRecord
from skillopt.trainer.rollouts import BatchProgress, Rollouts
from skillopt.trainer.rundir import (
    Failpoint,
    RunDirectory,
    layout,
    target_prefix_on_disk,
    target_usage_on_disk,
)
from skillopt.trainer.scoring import too_many_infra
from skillopt.trainer.state import RunMode, TrainerState, refuse_mode_change
from skillopt.types import RolloutResult, SkillVersion

__all__ = ["STEP_STAGES", "RunContext", "StopAtStage", "Timer"]

log = structlog.get_logger("skillopt.trainer")

#: The stages inside a step (``evaluate``: the candidate on the selection split; the name is
#: what callbacks, live.json and the WebUI already receive). A stop asked for is honoured
#: before each of them, not only between steps: the step is then left uncommitted, as a crash
#: would leave it, and ``--resume`` reruns it from its committed segments and caches, so it
#: reaches the same decisions.
STEP_STAGES = frozenset({"rollout", "reflect", "aggregate", "select", "update", "evaluate"})


class StopAtStage(Exception):
    """Raised before a stage inside a step when a stop was requested."""

    def __init__(self, step: int, stage: str) -> None:
        super().__init__(f"stop before {stage} of step {step}")
        self.step, self.stage = step, stage


class Timer:
    """Wall time of a stage (``seconds`` once it ended)."""

    seconds: float = 0.0


class RunContext:
    """The run's inputs, its committed state, and the services every segment uses.

    Args:
        config: the run configuration.
        data: the env's splits.
        rollouts: runs rollouts (embedded or remote sandbox hosts) into rollout dirs.
        optimizer: the optimizer model.
        out_dir: the run directory (:class:`RunDirectory`, with the run's frame).
        failpoint: crash injection of the run directory (tests).
        initial_skill: the version to start from (a one-file skill, or a package whose
            SKILL.md and editable files the optimizer edits; its other files ride along).
        hooks: the callbacks.
        mode: real models or the offline simulation.
        environment: the sandbox side of the environment manifest.
    """

    def __init__(
        self,
        config: Config,
        *,
        data: EnvData,
        rollouts: Rollouts,
        optimizer: RoleModel,
        out_dir: Path,
        failpoint: Failpoint | None,
        initial_skill: SkillVersion,
        hooks: CallbackList,
        mode: RunMode,
        environment: Mapping[str, Any],
    ) -> None:
        self.cfg = config
        self.data = data
        self.plan = RunPlan.of(config, data)
        self.rollouts = rollouts
        self.optimizer = optimizer
        #: How the run's versions map onto the packed text the optimizer model reads and
        #: writes (name, front matter, files it cannot edit), made from the initial version.
        self.frame = PackageFrame.of(initial_skill)
        self.run = RunDirectory(out_dir, frame=self.frame, failpoint=failpoint)
        #: The initial version as the run trains it (a package's SKILL.md ends in one newline).
        self.initial_skill = self.frame.version(self.frame.text(initial_skill))
        self.hooks = hooks
        self.mode = mode
        self.environment = dict(environment)
        self.control = RunControl()
        self.prices = PriceTable(prices=config.model.price_pairs())
        self.usage: UsageTracker = optimizer.tracker
        self.target_usage = UsageTracker()
        self.state = TrainerState()
        self.schedule = self._new_schedule()
        self.buffer = StepBuffer()
        #: Skills measured on the selection split, by skill and protocol (a resume keeps it).
        self.selection_cache = GateCache()
        #: Skills' selection scores, their intervals, the measurement protocol.
        self.scoring = SelectionScoring(config.evaluation, self.selection_cache, text=self.frame.text)
        rollouts.on_row = self._on_row
        rollouts.on_batch = lambda p: hooks(
            "on_rollout_batch", BatchEvent(label=p.label, total=p.total, done=p.done)
        )

    def _on_row(self, row: RolloutResult, progress: BatchProgress) -> None:
        """A new row arrived (never one reloaded from disk): its target usage is spent."""
        if row.usage.calls:
            self.target_usage.add(layout.target_stage(progress.label), row.usage)
        self.hooks("on_rollout_result", RowEvent(label=progress.label, row=row, progress=progress))

    def _new_schedule(self) -> EditBudgetSchedule:
        o = self.cfg.optimizer
        return EditBudgetSchedule(
            o.lr_scheduler,
            total_steps=self.plan.total_steps,
            max_budget=o.learning_rate,
            min_budget=o.min_learning_rate,
        )

    # -- scores and spend --------------------------------------------------------------------------

    def too_many_infra(self, n_infra: int, n_rows: int) -> bool:
        """More rows lost to infrastructure than ``evaluation.max_infra_fraction`` allows: the
        mean is then over a different subset than the other skill's, not evidence enough."""
        return too_many_infra(n_infra, n_rows, self.cfg.evaluation.max_infra_fraction)

    def baseline_score(self) -> float | None:
        """The initial skill's selection score (None before the baseline)."""
        return self.scoring.skill_score(self.initial_skill)

    def cost(self) -> float:
        m = self.cfg.model
        return self.prices.cost(m.optimizer, self.usage.total()) + self.prices.cost(
            m.target, self.target_usage.total()
        )

    def spend(self) -> Spend:
        tokens = self.usage.total().total_tokens + self.target_usage.total().total_tokens
        return Spend(tokens=tokens, cost_usd=round(self.cost(), 6))

    def usage_summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"optimizer": self.usage.to_json(), "target": self.target_usage.to_json()}
        total = self.usage.total() + self.target_usage.total()
        out["_total"] = {**total.to_dict(), "total_tokens": total.total_tokens}
        return out

    def prefix_report(self) -> tuple[float | None, dict[str, Any]]:
        """The run's cacheable prefix share (target: from every row's recorded exchanges on
        disk; optimizer: from its ledger) and the per-role counts."""
        return prefix_report({"target": target_prefix_on_disk(self.run.root), "optimizer": self.usage.prefix})

    def text(self, skill: SkillVersion) -> str:
        """``skill`` as the optimizer model reads it: its packed text (:mod:`skillopt.skill.packed`)."""
        return self.frame.text(skill)

    def meta_text(self) -> str:
        return meta_skill_block(self.state.meta_skill) if self.state.meta_skill else ""

    # -- stages: the named, timed pieces of the method -------------------------------------------

    @contextlib.contextmanager
    def stage(self, step: int, name: str) -> Iterator[Timer]:
        """Time a stage and announce it (``on_stage_start``/``on_stage_end``); a stop requested
        before a stage of a step raises :class:`StopAtStage` instead of starting it."""
        if self.control.stop_requested and name in STEP_STAGES:
            raise StopAtStage(step, name)
        timer = Timer()
        t0 = time.monotonic()
        self.hooks("on_stage_start", self._stage_event(step, name))
        try:
            with tracing.span(f"trainer.{name}", {"skillopt.stage": name, "skillopt.step": step}):
                yield timer
        finally:
            timer.seconds = time.monotonic() - t0
            self.hooks("on_stage_end", self._stage_event(step, name, timer.seconds))

    def _stage_event(self, step: int, name: str, seconds: float | None = None) -> StageEvent:
        return StageEvent(
            step=step,
            stage=name,
            seconds=seconds,
            current_score=self.state.current_score,
            baseline_score=self.baseline_score(),
            spend=self.spend(),
            current_ci95=self.scoring.interval(self.state.current_skill)
            if name == "baseline" and seconds is not None and self.state.current_skill is not None
            else None,
        )

    def rollout(
        self, items: Sequence[TaskItem], skill: SkillVersion, rel: str, *, train: bool, diagnostic: str = ""
    ) -> list[RolloutResult]:
        """Roll ``skill`` out on ``items`` into the rollout dir ``rel`` (resumable row by row)."""
        return self.rollouts.run(
            items, skill, self.run.path(rel), label=rel, use_eval_feedback=train, diagnostic=diagnostic
        )

    def rollout_repeats(
        self, items: Sequence[TaskItem], skill: SkillVersion, rels: Sequence[str]
    ) -> list[list[RolloutResult]]:
        """Roll ``skill`` out on ``items`` once into each evaluation dir of ``rels`` (a
        repeated evaluation: one executor call, each dir resumable row by row)."""
        return self.rollouts.run_many(items, skill, [(self.run.path(r), r) for r in rels])

    def slot(self, under: str, name: str) -> Slot:
        """A named entry of the stage cache of ``under``: one stage's optimizer answer (see
        :mod:`skillopt.reflection.cache`)."""
        return self.run.slot(under, name)

    # -- commits, resume, stop -----------------------------------------------------------------------

    def persist(self, record: StepRecord | None = None) -> None:
        """Commit the state (with a new step's record, whose commit has cleared ``step_stages``)."""
        st = self.state
        st.scheduler = self.schedule.state_dict()
        st.step_buffer = self.buffer.to_json()
        st.gate_cache = {"json": self.selection_cache.to_json()}  # the cache's stored key
        st.usage = self.usage.to_json()
        st.target_usage = self.target_usage.to_json()
        st.mode = st.mode or self.mode.to_dict()
        st.environment = st.environment or self.environment
        st.hosts = sorted({*st.hosts, *self.rollouts.executor.hosts()})
        self.run.commit(st, record)

    def commit_segment(self, name: str) -> None:
        """Record that a segment of the step in progress committed its outputs (they are in the
        stage cache): a resume replays it from there instead of asking again."""
        # ``step_stages``: the state's stored name for the step's committed segments.
        self.state.step_stages = [*self.state.step_stages, name]
        self.run.commit_progress(self.state)

    def check_scripts(self, spec: SkillVersion, paths: Sequence[str]) -> list[ScriptCheck]:
        """Check ``paths`` of ``spec`` (scripts) in a sandbox container through the executor
        (:meth:`controller.fleet.FleetExecutor.check_scripts`); an executor without one leaves
        each ``unchecked``, which never counts as passing."""
        checker = getattr(self.rollouts.executor, "check_scripts", None)
        if checker is None:
            why = "this executor has no sandbox to run scripts in; an unchecked script is not evaluated"
            return [ScriptCheck(path=p, ok=False, rule="unchecked", message=why) for p in paths]
        checks: list[ScriptCheck] = checker(
            spec, paths, self_test_timeout_s=self.cfg.optimizer.script_self_test_timeout_s
        )
        return checks

    def check_initial_scripts(self) -> None:
        """Check the initial package's scripts before anything runs (a fresh run only).

        Raises:
            SkillPackageError: a script fails its check (each named with its rule). A script
                no sandbox could check is logged and let through: it is the user's own.
        """
        paths = [f.path for f in self.initial_skill.files if needs_check(f.path)]
        if not paths:
            return
        checks = self.check_scripts(self.initial_skill, paths)
        failed = [c for c in checks if not c.ok and c.rule != "unchecked"]
        for c in checks:
            if c.rule == "unchecked":
                log.warning("trainer.initial_script_unchecked", path=c.path, why=c.message)
        if failed:
            raise SkillPackageError(
                "env.skill_init", [PackageProblem(c.path, c.rule, c.message) for c in failed]
            )

    def restore(self, *, event: str = "trainer.resumed") -> int:
        """Load the committed state (a new run has none); returns the last committed step.

        Raises:
            ConfigError: the run was started in the other mode (real models or simulation).
            RunDirectoryDamaged: the run state is unreadable.
        """
        # The rows on disk are the target's ledger (also those of a run that never committed).
        self.target_usage.load(target_usage_on_disk(self.run.root))
        st = self.run.load_state()
        if st is None:
            return 0
        refuse_mode_change(self.run.root, RunMode.from_dict(st.mode), self.mode)
        self.state = st
        self.schedule = self._new_schedule()
        if st.scheduler:
            self.schedule.load_state_dict(st.scheduler)
        self.buffer = StepBuffer.from_json(st.step_buffer) if st.step_buffer else StepBuffer()
        cache = GateCache.from_json(st.gate_cache["json"]) if st.gate_cache.get("json") else GateCache()
        self.selection_cache = rekey_by_tree(cache, self.run.skill_texts(), self.frame.stored)
        self.scoring = SelectionScoring(self.cfg.evaluation, self.selection_cache, text=self.frame.text)
        if st.usage:
            self.usage.load_json(st.usage)
        log.info(
            event,
            last_completed_step=st.last_completed_step,
            committed_segments=st.step_stages,
            current_score=st.current_score,
        )
        return st.last_completed_step

    def rollback(self, stop: StopAtStage) -> str:
        """Back to the last commit after a stop inside a step, so the resumed run redoes
        exactly the uncommitted segments. What the step spent stays counted (the optimizer's
        ledger and the rows on disk are its record). Returns the stop reason to report."""
        self.restore(event="trainer.rolled_back")
        ledger = self.run.path(layout.OPTIMIZER_LEDGER)
        if ledger.exists():
            self.usage.load_ledger(ledger)
        reason = (
            f"{self.control.reason or 'stop requested'}; stopped before the {stop.stage} stage of step "
            f"{stop.step}, which reruns on resume from its cached outputs"
        )
        log.warning("trainer.stopped_in_step", step=stop.step, stage=stop.stage, reason=reason)
        return reason

    def check_budget(self) -> bool:
        """Whether the loop must stop at this boundary: a callback asked, or a run budget
        (``train.max_tokens``, ``train.max_cost_usd``) is used up (the stop's reason says so)."""
        if self.control.stop_requested:
            return True
        t = self.cfg.train
        used = self.usage.total().total_tokens + self.target_usage.total().total_tokens
        if t.max_tokens and used >= t.max_tokens:
            reason = f"token budget reached: {used} tokens used of train.max_tokens={t.max_tokens}"
        elif t.max_cost_usd and (cost := self.cost()) >= t.max_cost_usd:
            reason = f"cost budget reached: ${cost:.4f} spent of train.max_cost_usd={t.max_cost_usd}"
        else:
            return False
        self.control.request_stop(reason)
        log.warning("trainer.budget_stop", reason=reason, step=self.state.last_completed_step)
        return True
