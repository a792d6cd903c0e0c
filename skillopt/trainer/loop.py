"""The training loop: epochs of steps, each step rollout → reflect → aggregate → select →
update → evaluate + gate, then per-epoch slow update and meta skill, then the final
evaluations (reference §1). Stages are small methods named in the hook surface; everything a
resumed run needs is persisted after each step and epoch stage (see ``state.py``), and every
stage's expensive outputs are cached on disk, so ``--resume`` reruns exactly what had not
completed.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from skillopt import __version__
from skillopt.config import Config
from skillopt.envs.base import EnvData, TaskItem, earlier_attempt
from skillopt.errors import ConfigError, SystemicFailure
from skillopt.gate import GateCache, decide, gate_score, regressions
from skillopt.models.roles import PriceTable, RoleModel, UsageTracker
from skillopt.reflection import (
    MetaSkillProposal,
    SlowUpdateProposal,
    StepBuffer,
    autonomous_budget,
    comparison_pairs,
    diagnostic_instruction,
    filter_pairs,
    full_rewrite_candidate,
    merge_patches,
    meta_skill_block,
    missing_changed_pairs,
    pick_probe_items,
    propose_meta_skill,
    propose_slow_update,
    rank_and_select,
    reflect,
    reflect_on_probe,
    rewrite_skill,
)
from skillopt.skill import SkillDocument, apply_edits
from skillopt.skill.document import inject_empty_slow_update_field
from skillopt.skill.schedule import EditBudgetSchedule
from skillopt.trainer.callbacks import (
    BatchEvent,
    Callback,
    CallbackList,
    EpochEvent,
    FitEndEvent,
    FitStartEvent,
    GateEvent,
    RowEvent,
    StageEvent,
    StepEndEvent,
    StepStartEvent,
)
from skillopt.trainer.manifest import data_manifest
from skillopt.trainer.planning import plan_epoch, sample_items, steps_per_epoch
from skillopt.trainer.rollouts import RolloutStage, score_rows
from skillopt.trainer.state import (
    RunMode,
    TrainerState,
    atomic_write_json,
    atomic_write_text,
    refuse_mode_change,
)
from skillopt.types import RolloutResult, skill_hash

__all__ = ["Trainer"]

log = structlog.get_logger("skillopt.trainer")

#: The stages inside a step. A stop asked for (``should_stop``) is honoured before each of
#: them, not only between steps: the step is then left uncommitted, as a crash would leave it,
#: and ``--resume`` reruns it from the stages' on-disk caches (the same rollouts, patches,
#: merge, ranking and selection rows), so it reaches the same decisions.
_STEP_STAGES = frozenset({"rollout", "reflect", "aggregate", "select", "update", "evaluate"})


class _StopAtStage(Exception):
    """Raised at a stage boundary inside a step when ``should_stop`` is set."""

    def __init__(self, step: int, stage: str) -> None:
        super().__init__(f"stop before {stage} of step {step}")
        self.step, self.stage = step, stage


@dataclass(frozen=True)
class _Eval:
    hard: float
    soft: float
    score: float
    items: dict[str, float]
    n_infra: int
    cached: bool


class Trainer:
    """Trains one skill. Construct with everything resolved; call :meth:`fit`.

    Args:
        config: the run configuration.
        data: the env's splits.
        rollouts: runs rollouts (embedded or remote sandbox hosts) into rollout dirs.
        optimizer: the optimizer model (reflection, merge, ranking, slow update...).
        out_dir: the run directory (created; reused on resume).
        initial_skill: the skill to start from.
        callbacks: progress display, plotter, ... (order-independent).
        mode: real models or the offline simulation (recorded in the state and summaries).
        environment: the sandbox side of the environment manifest (pinned runtime image digest,
            host versions, agent CLI versions); the data checksums are added here.
    """

    def __init__(
        self,
        config: Config,
        *,
        data: EnvData,
        rollouts: RolloutStage,
        optimizer: RoleModel,
        out_dir: Path,
        initial_skill: str,
        callbacks: Sequence[Callback] = (),
        mode: RunMode | None = None,
        environment: Mapping[str, Any] | None = None,
        target_prices: PriceTable | None = None,
    ) -> None:
        self.cfg = config
        self.data = data
        self.rollouts = rollouts
        self.optimizer = optimizer
        self.out = out_dir
        self.initial_skill = initial_skill
        self.hooks = CallbackList(callbacks)
        self.mode = mode or RunMode(simulated=False)
        self.environment = dict(environment or {})
        self.should_stop = False
        #: Why the loop stopped early (a budget); "" while it runs to the end.
        self.stop_reason = ""
        self.prices = PriceTable(prices=config.model.price_pairs())
        self.usage: UsageTracker = optimizer.tracker
        self.target_usage = UsageTracker()
        self.env = config.env.name
        self.train_items = data.split("train")
        self.val_items = _first(data.split("val"), config.evaluation.sel_env_num)
        self.task_texts = {
            it.id: (it.task.instruction, it.task_type) for it in [*self.train_items, *self.val_items]
        }
        n_train = config.train.train_size or len(self.train_items)
        if n_train != len(self.train_items):
            raise ConfigError(
                f"train.train_size is {config.train.train_size} but the train split has {len(self.train_items)} items; "
                "set train.train_size=0 to use the split"
            )
        if not self.val_items:
            raise ConfigError("the selection (val) split is empty: the gate needs held-out items")
        t = config.train
        self.steps_per_epoch = steps_per_epoch(n_train, t.batch_size, t.accumulation)
        self.total_steps = t.num_epochs * self.steps_per_epoch
        self.full_rewrite = config.optimizer.skill_update_mode == "full_rewrite_minibatch"
        lr_mode = "none" if self.full_rewrite else config.optimizer.lr_control_mode
        self.lr_mode = lr_mode
        self.schedule = EditBudgetSchedule(
            config.optimizer.lr_scheduler,
            total_steps=self.total_steps,
            max_budget=config.optimizer.learning_rate,
            min_budget=config.optimizer.min_learning_rate,
        )
        self.state = TrainerState()
        self.cache = GateCache()
        self.buffer = StepBuffer()
        self.rollouts.on_row = lambda row, label: self.hooks(
            "on_rollout_result", self, RowEvent(label=label, row=row)
        )
        self.rollouts.on_batch = lambda label, total, done: self.hooks(
            "on_rollout_batch", self, BatchEvent(label=label, total=total, done=done)
        )

    # -- helpers -----------------------------------------------------------------------------

    @property
    def simulated(self) -> bool:
        return self.mode.simulated

    def _too_many_infra(self, n_infra: int, n_rows: int) -> bool:
        """More rows lost to infrastructure than ``evaluation.max_infra_fraction`` allows: the
        mean is then over a different subset than the other skill's, not evidence enough."""
        return n_infra > self.cfg.evaluation.max_infra_fraction * max(1, n_rows)

    def _path(self, *parts: str) -> Path:
        return self.out.joinpath(*parts)

    def _score(self, hard: float, soft: float, skill: str) -> float:
        e = self.cfg.evaluation
        return gate_score(
            hard,
            soft,
            metric=e.gate_metric,
            mixed_weight=e.gate_mixed_weight,
            skill_content=skill if e.use_semantic_density else None,
            semantic_density_weight=e.semantic_density_weight if e.use_semantic_density else 0.0,
            leading_words=e.leading_words,
        )

    def _stage(self, step: int, stage: str):
        trainer = self

        class _Timer:
            def __enter__(self):
                if trainer.should_stop and stage in _STEP_STAGES:
                    raise _StopAtStage(step, stage)
                self.t0 = time.monotonic()
                trainer.hooks("on_stage_start", trainer, StageEvent(step=step, stage=stage))
                return self

            def __exit__(self, *exc):
                self.seconds = time.monotonic() - self.t0
                trainer.hooks(
                    "on_stage_end", trainer, StageEvent(step=step, stage=stage, seconds=self.seconds)
                )
                return False

        return _Timer()

    def _rollout(
        self, items: Sequence[TaskItem], skill: str, rel: str, *, train: bool, diagnostic: str = ""
    ) -> list[RolloutResult]:
        rows = self.rollouts.run(
            items, skill, self._path(rel), label=rel, use_eval_feedback=train, diagnostic=diagnostic
        )
        stage = "target_train" if train else "target_eval"
        for r in rows:
            if r.usage.calls:
                self.target_usage.add(stage, r.usage)
        return rows

    def evaluate(self, skill: str, rel: str) -> _Eval:
        """Selection score of ``skill`` (cached by its hash; rolled out into ``rel`` on a miss)."""
        key = skill_hash(skill)
        hit = self.cache.get(key)
        if hit is not None:
            return _Eval(
                hit.hard,
                hit.soft,
                self._score(hit.hard, hit.soft, skill),
                dict(hit.items or {}),
                hit.n_infra,
                True,
            )
        rows = self._rollout(self.val_items, skill, rel, train=False)
        s = score_rows(rows)
        items = {r.id: r.hard for r in rows if r.infra_error is None}
        if s.n_infra:
            log.warning("selection.infra_rows", dir=rel, n_infra=s.n_infra, n=len(rows))
        # An evaluation that lost too much to infrastructure is not remembered: evaluating the
        # same skill again (a resume, or the same candidate later) measures it anew.
        if not self._too_many_infra(s.n_infra, len(rows)):
            self.cache.put(key, s.hard, s.soft, items, n_infra=s.n_infra)
        return _Eval(s.hard, s.soft, self._score(s.hard, s.soft, skill), items, s.n_infra, False)

    def baseline_score(self) -> float | None:
        """Gate score of the initial skill on the selection split (None before the baseline)."""
        hit = self.cache.get(skill_hash(self.initial_skill))
        return None if hit is None else self._score(hit.hard, hit.soft, self.initial_skill)

    def _persist(self) -> None:
        self.state.scheduler = self.schedule.state_dict()
        self.state.step_buffer = self.buffer.to_json()
        self.state.gate_cache = {"json": self.cache.to_json()}
        self.state.usage = self.usage.to_json()
        self.state.target_usage = self.target_usage.to_json()
        self.state.mode = self.state.mode or self.mode.to_dict()
        self.state.environment = self.state.environment or self.environment
        self.state.hosts = sorted({*self.state.hosts, *self.rollouts.executor.hosts()})
        # History first: a crash between the two leaves an extra record, which load() drops.
        atomic_write_json(self._path("history.json"), self.state.history)
        atomic_write_text(self._path("best_skill.md"), self.state.best_skill)
        self.state.save(self._path("runtime_state.json"))

    def _restore(self, *, event: str = "trainer.resumed") -> int:
        st = TrainerState.load(self._path("runtime_state.json"))
        if st is None:
            return 0
        refuse_mode_change(self.out, st.mode, self.mode)
        self.state = st
        if st.scheduler:
            self.schedule.load_state_dict(st.scheduler)
        if st.step_buffer:
            self.buffer = StepBuffer.from_json(st.step_buffer)
        if st.gate_cache.get("json"):
            self.cache = GateCache.from_json(st.gate_cache["json"])
        if st.usage:
            self.usage.load_json(st.usage)
        if st.target_usage:
            self.target_usage.load_json(st.target_usage)
        log.info(event, last_completed_step=st.last_completed_step, current_score=st.current_score)
        return st.last_completed_step

    @staticmethod
    def _cached(path: Path, cls: type, compute: Callable[[], Any]) -> Any:
        """An optimizer proposal kept on disk once it succeeded, so a resumed stage reuses it
        instead of asking again (a real model would answer differently)."""
        if path.exists():
            return cls(**json.loads(path.read_text(encoding="utf-8")))
        out = compute()
        if not getattr(out, "error", ""):
            atomic_write_json(path, dataclasses.asdict(out))
        return out

    def _save_skill(self, step: int, skill: str) -> None:
        atomic_write_text(self._path("skills", f"skill_v{step:04d}.md"), skill)

    def _meta_text(self) -> str:
        return meta_skill_block(self.state.meta_skill) if self.state.meta_skill else ""

    # -- fit ---------------------------------------------------------------------------------

    def fit(self) -> dict[str, Any]:
        """Train, evaluate on test, write ``summary.json``; returns the summary."""
        t_fit = time.monotonic()
        self.out.mkdir(parents=True, exist_ok=True)
        resume_from = self._restore()
        # Every optimizer call is on record as it happens: a step killed before it persisted
        # its state still has its calls counted (the ledger wins over the state's snapshot).
        self.usage.attach_ledger(self._path("optimizer_calls.jsonl"))
        self.state.stop_reason = ""
        cfg_dict = self.cfg.to_dict(redacted=True)
        atomic_write_json(
            self._path("config.json"),
            {
                **cfg_dict,
                "derived": {
                    "train_size": len(self.train_items),
                    "selection_size": len(self.val_items),
                    "steps_per_epoch": self.steps_per_epoch,
                    "total_steps": self.total_steps,
                    "lr_control_mode": self.lr_mode,
                    "simulated": self.simulated,
                    "mode": self.mode.to_dict(),
                    "data": self.data.describe(),
                },
            },
        )
        self.hooks(
            "on_fit_start",
            self,
            FitStartEvent(
                out_dir=self.out,
                num_epochs=self.cfg.train.num_epochs,
                steps_per_epoch=self.steps_per_epoch,
                total_steps=self.total_steps,
                resume_from=resume_from,
                simulated=self.simulated,
                config=cfg_dict,
                mode=self.mode.describe(),
            ),
        )
        try:
            self._save_skill(0, self.initial_skill)
            if self.state.current_score is None:
                self._baseline()
            for epoch in range(1, self.cfg.train.num_epochs + 1):
                if self._check_budget():
                    break
                try:
                    self._epoch(epoch)
                except _StopAtStage as stop:
                    self._rollback(stop)
                    break
            summary = self._finish(time.monotonic() - t_fit, complete=not self.should_stop)
        except BaseException as exc:
            self.hooks("on_exception", self, exc)
            raise
        self.hooks("on_fit_end", self, FitEndEvent(summary=summary, out_dir=self.out))
        return summary

    def _check_budget(self) -> bool:
        """Whether the loop must stop at this boundary: a callback asked, or a run budget
        (``train.max_tokens``, ``train.max_cost_usd``) is used up (then ``stop_reason`` says so)."""
        if self.should_stop:
            return True
        t = self.cfg.train
        used = self.usage.total().total_tokens + self.target_usage.total().total_tokens
        if t.max_tokens and used >= t.max_tokens:
            reason = f"token budget reached: {used} tokens used of train.max_tokens={t.max_tokens}"
        elif t.max_cost_usd and (cost := self.cost()) >= t.max_cost_usd:
            reason = f"cost budget reached: ${cost:.4f} spent of train.max_cost_usd={t.max_cost_usd}"
        else:
            return False
        self.should_stop = True
        self.stop_reason = reason
        log.warning("trainer.budget_stop", reason=reason, step=self.state.last_completed_step)
        return True

    def _rollback(self, stop: _StopAtStage) -> None:
        """Back to the last commit after a stop inside a step: what the step changed in memory
        (edit-budget schedule, step buffer, gate cache, target usage) is dropped, so the
        resumed run redoes exactly that step. Optimizer calls it made stay counted (the ledger
        is their record)."""
        self._restore(event="trainer.rolled_back")
        ledger = self._path("optimizer_calls.jsonl")
        if ledger.exists():
            self.usage.load_ledger(ledger)
        self.stop_reason = (
            f"{self.stop_reason or 'stop requested'}; stopped before the {stop.stage} stage of step "
            f"{stop.step}, which reruns on resume from its cached outputs"
        )
        log.warning("trainer.stopped_in_step", step=stop.step, stage=stop.stage, reason=self.stop_reason)

    def _baseline(self) -> None:
        st = self.state
        with self._stage(0, "baseline"):
            ev = self.evaluate(self.initial_skill, "selection_eval_baseline")
            if self._too_many_infra(ev.n_infra, len(self.val_items)):
                # The gate's guard, at the start: every later decision compares against this.
                raise SystemicFailure(
                    f"the baseline selection evaluation lost {ev.n_infra} of {len(self.val_items)} rollouts to "
                    f"infrastructure failures (limit {self.cfg.evaluation.max_infra_fraction:.0%}, "
                    "evaluation.max_infra_fraction); see selection_eval_baseline/results.jsonl, fix the sandbox "
                    "and resume: those rollouts are run again"
                )
            st.current_skill = st.best_skill = self.initial_skill
            st.current_score = st.best_score = ev.score
            st.current_origin = st.best_origin = "initial"
            st.best_step = 0
        self._persist()

    def _epoch(self, epoch: int) -> None:
        cfg = self.cfg
        first_step = (epoch - 1) * self.steps_per_epoch + 1
        last_step = epoch * self.steps_per_epoch
        if self.buffer.epoch != epoch:
            self.buffer.reset(epoch=epoch)  # the buffer is per epoch (restored mid-epoch)
        self.hooks("on_epoch_start", self, EpochEvent(epoch=epoch, num_epochs=cfg.train.num_epochs))
        batches = plan_epoch(
            self.train_items,
            epoch=epoch,
            seed=cfg.train.seed,
            batch_size=cfg.train.batch_size,
            n_batches=self.steps_per_epoch * cfg.train.accumulation,
        )
        for k in range(self.steps_per_epoch):
            step = first_step + k
            if step <= self.state.last_completed_step:
                continue
            if self._check_budget():
                return
            acc = cfg.train.accumulation
            self._step(step, epoch, k, batches[k * acc : (k + 1) * acc])
        if epoch in self.state.epochs_done or self._check_budget():
            return
        if cfg.optimizer.use_slow_update:
            self._slow_update(epoch, last_step)
        if cfg.optimizer.use_meta_skill:
            self._meta_skill(epoch, last_step)
        self.state.epochs_done.append(epoch)
        self._persist()
        self.hooks(
            "on_epoch_end",
            self,
            EpochEvent(epoch=epoch, num_epochs=cfg.train.num_epochs, stats=self._epoch_stats(epoch)),
        )

    # -- one step ----------------------------------------------------------------------------

    def _step(self, step: int, epoch: int, step_in_epoch: int, batches) -> None:
        cfg, st = self.cfg, self.state
        t_step = time.monotonic()
        usage_before = self.usage.snapshot()
        sdir = f"steps/step_{step:04d}"
        self.hooks(
            "on_step_start",
            self,
            StepStartEvent(step=step, total_steps=self.total_steps, epoch=epoch, step_in_epoch=step_in_epoch),
        )
        rec: dict[str, Any] = {"step": step, "epoch": epoch, "step_in_epoch": step_in_epoch, "timing": {}}
        skill = st.current_skill
        rows_all: list[RolloutResult] = []
        fail_patches, succ_patches, notes, summaries = [], [], [], []
        acc_info = []
        budget_const = cfg.optimizer.learning_rate
        for a, batch in enumerate(batches):
            bdir = sdir if len(batches) == 1 else f"{sdir}/batch_{a}"
            with self._stage(step, "rollout") as t:
                rows = self._rollout(batch.items, skill, f"{bdir}/rollout", train=True)
            rec["timing"]["rollout_s"] = rec["timing"].get("rollout_s", 0.0) + t.seconds
            rows_all += rows
            with self._stage(step, "reflect") as t:
                res = reflect(
                    rows,
                    skill,
                    model=self.optimizer,
                    env=self.env,
                    budget=budget_const,
                    minibatch_size=cfg.gradient.minibatch_size,
                    workers=cfg.gradient.analyst_workers,
                    failure_only=cfg.gradient.failure_only,
                    update_mode=cfg.optimizer.skill_update_mode,
                    seed=batch.seed,
                    step_buffer_text=self.buffer.format_for_prompt(),
                    meta_skill_text=self._meta_text(),
                    cache_dir=self._path(bdir, "patches"),
                    task_texts=self.task_texts,
                    skill_aware=cfg.optimizer.use_skill_aware_reflection,
                )
                fail_patches += res.failure_patches
                succ_patches += res.success_patches
                notes += res.appendix_notes
                summaries += res.failure_summaries
                if cfg.gradient.deep_reflect:
                    probe = self._probe(rows, skill, f"{bdir}/probe", batch.seed)
                    if probe is not None:
                        fail_patches.append(probe)
            rec["timing"]["reflect_s"] = rec["timing"].get("reflect_s", 0.0) + t.seconds
            s = score_rows(rows)
            acc_info.append(
                {
                    "batch_idx": a,
                    "batch_seed": batch.seed,
                    "n_envs": len(rows),
                    "hard": s.hard,
                    "soft": s.soft,
                    "n_infra": s.n_infra,
                    "n_failure_patches": len(res.failure_patches),
                    "n_success_patches": len(res.success_patches),
                }
            )
        score = score_rows(rows_all)
        rec.update(
            rollout_hard=score.hard,
            rollout_soft=score.soft,
            rollout_n=score.n,
            rollout_n_infra=score.n_infra,
            accumulation_batches=acc_info,
            n_patches=len(fail_patches) + len(succ_patches),
            n_failure_patches=len(fail_patches),
            n_success_patches=len(succ_patches),
        )
        action = self._propose_and_gate(step, sdir, skill, rec, fail_patches, succ_patches)
        # Step buffer: this step's failure patterns, and the rejected edits on a reject.
        self.buffer.record(
            step=step,
            action=action,
            rows=rows_all,
            failure_summaries=summaries,
            score_before=rec.get("current_score_before"),
            score_after=rec.get("candidate_gate_score"),
            rejected_items=rec.pop("_selected_items", ()),
        )
        atomic_write_json(self._path(sdir, "trajectory_digest.json"), self.buffer.entries[-1].to_dict())
        rec.update(
            action=action,
            current_score=st.current_score,
            best_score=st.best_score,
            best_step=st.best_step,
            current_origin=st.current_origin,
            best_origin=st.best_origin,
            skill_len=len(st.current_skill),
            tokens=UsageTracker.delta(usage_before, self.usage.snapshot()),
            wall_time_s=round(time.monotonic() - t_step, 3),
        )
        self._save_skill(step, st.current_skill)
        atomic_write_json(self._path(sdir, "step_record.json"), rec)
        st.history.append(rec)
        st.last_completed_step = step
        self._persist()
        self.hooks(
            "on_step_end",
            self,
            StepEndEvent(
                step=step,
                record=rec,
                history=list(st.history),
                usage_total=self.usage_summary(),
                cost_usd=self.cost(),
            ),
        )

    def _probe(self, rows, skill: str, rel: str, seed: int):
        """Deep-reflect probe: re-run representative items with a diagnostic instruction and
        reflect on what the diagnostic runs reveal (returns a probe patch or None)."""
        cfg = self.cfg
        picked = pick_probe_items(
            rows, n_failures=cfg.gradient.probe_failures, n_successes=cfg.gradient.probe_successes, seed=seed
        )
        if not picked:
            return None
        instruction = diagnostic_instruction(skill, picked, model=self.optimizer, task_texts=self.task_texts)
        if not instruction:
            return None
        atomic_write_text(self._path(rel, "diagnostic_instruction.txt"), instruction)
        by_id = {it.id: it for it in self.train_items}
        # The re-run sees its own earlier attempt as context (never the grader's messages).
        items = [by_id[r.id].with_earlier_attempt(earlier_attempt(r)) for r in picked if r.id in by_id]
        diag_rows = self._rollout(items, skill, f"{rel}/rollout", train=True, diagnostic=instruction)
        return reflect_on_probe(
            picked,
            diag_rows,
            skill,
            model=self.optimizer,
            budget=cfg.optimizer.learning_rate,
            diagnostic_text=instruction,
            update_mode=cfg.optimizer.skill_update_mode,
            step_buffer_text=self.buffer.format_for_prompt(),
            meta_skill_text=self._meta_text(),
            task_texts=self.task_texts,
            cache_path=self._path(rel, "probe_patch.json"),
        )

    def _propose_and_gate(
        self, step: int, sdir: str, skill: str, rec: dict, fail_patches, succ_patches
    ) -> str:
        """Aggregate → select → update → evaluate → gate. Returns the step's action."""
        cfg, st = self.cfg, self.state
        mode = cfg.optimizer.skill_update_mode
        if not fail_patches and not succ_patches:
            return "skip_no_patches"
        with self._stage(step, "aggregate") as t:
            merged = merge_patches(
                skill,
                fail_patches,
                succ_patches,
                model=self.optimizer,
                update_mode=mode,
                merge_batch_size=cfg.gradient.merge_batch_size,
                workers=cfg.gradient.analyst_workers,
                meta_skill_text=self._meta_text(),
                cache_path=self._path(sdir, "merged_patch.json"),
            )
        rec["timing"]["aggregate_s"] = t.seconds
        rec["n_edits_merged"] = len(merged.items)
        with self._stage(step, "select") as t:
            budget: int | None
            if self.full_rewrite:
                budget = None
            elif self.lr_mode == "autonomous":
                decision = autonomous_budget(
                    skill,
                    merged.items,
                    model=self.optimizer,
                    rollout_n=rec["rollout_n"],
                    rollout_hard=rec["rollout_hard"],
                    rollout_soft=rec["rollout_soft"],
                    step_buffer_text=self.buffer.format_for_prompt(),
                    meta_skill_text=self._meta_text(),
                    update_mode=mode,
                )
                budget = decision.learning_rate
                rec["lr_decision"] = decision.to_dict()
                atomic_write_json(self._path(sdir, "lr_decision.json"), decision.to_dict())
                with open(self._path("lr_history.jsonl"), "a", encoding="utf-8") as fh:
                    fh.write(json.dumps({"step": step, **decision.to_dict()}) + "\n")
            else:
                budget = self.schedule.step()
            selection = rank_and_select(
                skill,
                merged.items,
                budget=budget,
                model=self.optimizer,
                update_mode=mode,
                meta_skill_text=self._meta_text(),
                cache_path=self._path(sdir, "ranked_edits.json"),
            )
        ranked = self._path(sdir, "ranked_edits.json")
        if not ranked.exists():  # the pool fit the budget: no ranking call, still on record
            atomic_write_json(ranked, selection.to_dict())
        rec["timing"]["select_s"] = t.seconds
        rec.update(
            edit_budget=budget,
            lr_control_mode=self.lr_mode,
            n_edits_ranked=len(selection.items),
            support_counts=[
                getattr(i, "support_count", None)
                or (i.get("support_count") if isinstance(i, Mapping) else None)
                for i in selection.items
            ],
        )
        rec["_selected_items"] = selection.items
        with self._stage(step, "update") as t:
            candidate = self._apply(step, sdir, skill, selection.items, rec)
        rec["timing"]["update_s"] = t.seconds
        if candidate is None:
            return "skip_no_rewrite"
        atomic_write_text(self._path(sdir, "candidate_skill.md"), candidate)
        rec.update(candidate_hash=skill_hash(candidate), candidate_skill_len=len(candidate))
        with self._stage(step, "evaluate") as t:
            ev = self.evaluate(candidate, f"{sdir}/selection_eval")
        rec["timing"]["evaluate_s"] = t.seconds
        rec.update(
            selection_hard=ev.hard,
            selection_soft=ev.soft,
            selection_cached=ev.cached,
            selection_n_infra=ev.n_infra,
            gate_metric=cfg.evaluation.gate_metric,
            candidate_gate_score=ev.score,
            current_score_before=st.current_score,
        )
        return self._gate(step, f"step_{step:04d}", candidate, ev, rec)

    def _apply(self, step: int, sdir: str, skill: str, items, rec: dict) -> str | None:
        cfg = self.cfg
        mode = cfg.optimizer.skill_update_mode
        if mode == "patch":
            result = apply_edits(
                SkillDocument(skill), list(items), whitespace_tolerant=cfg.optimizer.whitespace_tolerant_edits
            )
            atomic_write_json(
                self._path(sdir, "edit_apply_report.json"),
                {"reports": [r.to_dict() for r in result.reports], "summary": result.summary.to_dict()},
            )
            rec["edit_apply_summary"] = result.summary.to_dict()
            return result.document.content
        if mode == "rewrite_from_suggestions":
            rw = rewrite_skill(
                skill,
                list(items),
                model=self.optimizer,
                step_buffer_text=self.buffer.format_for_prompt(),
                reasoning_effort=cfg.model.rewrite_reasoning_effort or None,
                max_tokens=cfg.model.rewrite_max_completion_tokens,
            )
            atomic_write_json(
                self._path(sdir, "rewrite_result.json"),
                {
                    "new_skill": rw.new_skill,
                    "change_summary": list(rw.change_summary),
                    "reasoning": rw.reasoning,
                    "error": rw.error,
                },
            )
            rec["rewrite_change_summary"] = list(rw.change_summary)
            return rw.new_skill
        new = full_rewrite_candidate(list(items), skill=skill)
        atomic_write_json(self._path(sdir, "full_rewrite_result.json"), {"new_skill": new})
        return new

    def _gate(self, step: int, origin: str, candidate: str, ev: _Eval, rec: dict) -> str:
        cfg, st = self.cfg, self.state
        assert st.current_score is not None and st.best_score is not None
        if not cfg.evaluation.use_gate:
            st.current_skill, st.current_score, st.current_origin = candidate, ev.score, origin
            if ev.score > st.best_score:
                st.best_skill, st.best_score, st.best_step, st.best_origin = candidate, ev.score, step, origin
            action, reason = "force_accept", "gate disabled"
        elif self._too_many_infra(ev.n_infra, len(self.val_items)):
            action, reason = "reject", f"{ev.n_infra} selection rollouts failed on infrastructure"
        else:
            current_items = self.cache.get(skill_hash(st.current_skill)) or None
            regressed = regressions(dict(current_items.items or {}) if current_items else {}, ev.items)
            d = decide(
                ev.score,
                st.current_score,
                st.best_score,
                global_step=step,
                best_step=st.best_step,
                regressed=regressed,
                max_regressions=cfg.evaluation.max_regressions,
            )
            action, reason = d.action, d.reason
            if d.accepted:
                st.current_skill, st.current_score, st.current_origin = candidate, ev.score, origin
            if d.action == "accept_new_best":
                st.best_skill, st.best_score, st.best_step, st.best_origin = candidate, ev.score, step, origin
        rec["gate_reason"] = reason
        self.hooks(
            "on_gate_decision",
            self,
            GateEvent(
                step=step,
                origin=origin,
                action=action,
                candidate_score=ev.score,
                current_score=st.current_score,
                best_score=st.best_score,
                reason=reason,
            ),
        )
        return action

    # -- epoch end ---------------------------------------------------------------------------

    def _longitudinal_rows(self, epoch: int, last_step: int, rel: str):
        """Roll out the previous epoch's last skill and the current skill on the same train
        sample (and top it up for the ``changed`` policy); returns (pairs, prev, curr)."""
        cfg = self.cfg
        prev_path = self._path("skills", f"skill_v{(epoch - 1) * self.steps_per_epoch:04d}.md")
        prev_skill = prev_path.read_text(encoding="utf-8") if prev_path.exists() else self.initial_skill
        curr_skill = self.state.current_skill
        sample = sample_items(
            self.train_items, cfg.optimizer.slow_update_samples, cfg.train.seed + epoch * 2000
        )
        prev_rows = self._rollout(sample, prev_skill, f"{rel}/rollout_prev", train=False)
        curr_rows = self._rollout(sample, curr_skill, f"{rel}/rollout_curr", train=False)
        pairs = comparison_pairs(
            prev_rows, curr_rows, task_texts=self.task_texts, prev_skill=prev_skill, curr_skill=curr_skill
        )
        policy = cfg.optimizer.longitudinal_pair_policy
        need = missing_changed_pairs(pairs, policy, target=cfg.optimizer.slow_update_samples)
        used = {it.id for it in sample}
        while need > 0:
            extra = sample_items(
                self.train_items, need, cfg.train.seed + epoch * 2000 + len(used), exclude=used
            )
            if not extra:
                break
            used |= {it.id for it in extra}
            p = self._rollout(extra, prev_skill, f"{rel}/rollout_prev/topup", train=False)
            c = self._rollout(extra, curr_skill, f"{rel}/rollout_curr/topup", train=False)
            pairs += comparison_pairs(
                p, c, task_texts=self.task_texts, prev_skill=prev_skill, curr_skill=curr_skill
            )
            need = missing_changed_pairs(pairs, policy, target=cfg.optimizer.slow_update_samples)
        kept = filter_pairs(pairs, policy)
        atomic_write_json(self._path(rel, "comparison_pairs.json"), [p.to_dict() for p in kept])
        if len(kept) != len(pairs):
            atomic_write_json(self._path(rel, "comparison_pairs_all.json"), [p.to_dict() for p in pairs])
        return kept, prev_skill, curr_skill

    def _slow_update(self, epoch: int, last_step: int) -> None:
        cfg, st = self.cfg, self.state
        rel = f"slow_update/epoch_{epoch:02d}"
        # Done means committed in the run state (one atomic write with the skill it produced);
        # slow_result.json is written after that, for people, never read back as the marker.
        if f"slow_update_{epoch}" in st.epoch_stages:
            return
        t0 = time.monotonic()
        with self._stage(last_step, "slow_update"):
            if epoch == 1:
                before = self.cache.get(skill_hash(st.current_skill))
                st.current_skill = inject_empty_slow_update_field(st.current_skill)
                result: dict[str, Any] = {"action": "inject_placeholder"}
                # An empty protected block changes the hash, not the behaviour: carry the
                # measured selection scores over to the new text.
                if before is not None:
                    self.cache.put(
                        skill_hash(st.current_skill), before.hard, before.soft, dict(before.items or {})
                    )
            else:
                pairs, prev_skill, curr_skill = self._longitudinal_rows(epoch, last_step, rel)
                self._pairs_cache = (epoch, pairs, prev_skill, curr_skill)
                proposal = self._cached(
                    self._path(rel, "proposal.json"),
                    SlowUpdateProposal,
                    lambda: propose_slow_update(prev_skill, curr_skill, pairs, model=self.optimizer),
                )
                if not proposal.candidate:
                    result = {"action": "no_content", "error": proposal.error}
                else:
                    atomic_write_text(self._path(rel, "candidate_skill.md"), proposal.candidate)
                    ev = self.evaluate(proposal.candidate, f"{rel}/selection_eval")
                    origin = f"slow_update_epoch_{epoch:02d}"
                    if cfg.optimizer.slow_update_gate_with_selection:
                        action = self._gate(last_step, origin, proposal.candidate, ev, {})
                    else:
                        # Force-inject into the current skill, but with its score re-measured
                        # (the reference left current_score stale here, §14.6).
                        st.current_skill, st.current_score, st.current_origin = (
                            proposal.candidate,
                            ev.score,
                            origin,
                        )
                        action = "force_accept"
                        if st.best_score is not None and ev.score > st.best_score:
                            st.best_skill, st.best_score, st.best_step, st.best_origin = (
                                proposal.candidate,
                                ev.score,
                                last_step,
                                origin,
                            )
                    result = {
                        "action": action,
                        "content": proposal.content,
                        "reasoning": proposal.reasoning,
                        "candidate_hash": skill_hash(proposal.candidate),
                        "selection_hard": ev.hard,
                        "candidate_gate_score": ev.score,
                        "prev_hard": sum(p.prev.hard for p in pairs) / max(1, len(pairs)),
                        "curr_hard": sum(p.curr.hard for p in pairs) / max(1, len(pairs)),
                        "update_origin": "slow_update_momentum",
                    }
        result["time_s"] = round(time.monotonic() - t0, 3)
        self._save_skill(last_step, st.current_skill)
        st.epoch_stages[f"slow_update_{epoch}"] = result["action"]
        self._persist()  # the commit: the slow update and its skill, together
        atomic_write_json(self._path(rel, "slow_result.json"), result)

    def _meta_skill(self, epoch: int, last_step: int) -> None:
        st = self.state
        rel = f"meta_skill/epoch_{epoch:02d}"
        if f"meta_skill_{epoch}" in st.epoch_stages:  # committed with the meta skill itself
            return
        with self._stage(last_step, "meta_skill"):
            if epoch == 1:
                result: dict[str, Any] = {"action": "skip_first_epoch"}
            else:
                cached = getattr(self, "_pairs_cache", None)
                if cached and cached[0] == epoch:
                    _, pairs, prev_skill, curr_skill = cached
                else:
                    pairs, prev_skill, curr_skill = self._longitudinal_rows(epoch, last_step, rel)
                proposal = self._cached(
                    self._path(rel, "proposal.json"),
                    MetaSkillProposal,
                    lambda: propose_meta_skill(
                        prev_skill, curr_skill, pairs, st.meta_skill, model=self.optimizer
                    ),
                )
                if proposal.content:
                    st.meta_skill = proposal.content
                result = {
                    "action": "updated" if proposal.content else "no_content",
                    "meta_skill_content": proposal.content,
                    "reasoning": proposal.reasoning,
                }
        st.epoch_stages[f"meta_skill_{epoch}"] = result["action"]
        self._persist()  # the commit: the meta skill and the stage's outcome, together
        atomic_write_json(self._path(rel, "meta_skill_result.json"), result)

    def _epoch_stats(self, epoch: int) -> dict[str, Any]:
        recs = [r for r in self.state.history if r["epoch"] == epoch]
        return {
            "epoch": epoch,
            "steps": len(recs),
            "accepts": sum("accept" in r["action"] for r in recs),
            "rejects": sum(r["action"] == "reject" for r in recs),
            "skips": sum(r["action"].startswith("skip") for r in recs),
            "best_score_at_epoch_end": self.state.best_score,
            "current_score_at_epoch_end": self.state.current_score,
        }

    # -- after training ----------------------------------------------------------------------

    def usage_summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"optimizer": self.usage.to_json(), "target": self.target_usage.to_json()}
        total = self.usage.total() + self.target_usage.total()
        out["_total"] = {
            "calls": total.calls,
            "prompt_tokens": total.prompt_tokens,
            "completion_tokens": total.completion_tokens,
            "total_tokens": total.total_tokens,
        }
        return out

    def cost(self) -> float:
        return self.prices.cost(self.cfg.model.optimizer, self.usage.total()) + self.prices.cost(
            self.cfg.model.target, self.target_usage.total()
        )

    def _test_eval(self, skill: str, rel: str) -> dict[str, Any]:
        items = _first(self.data.split("test"), self.cfg.evaluation.test_env_num)
        rows = self._rollout(items, skill, rel, train=False)
        by_type: dict[str, dict[str, Any]] = {}
        types = {it.id: it.task_type for it in items}
        for t in [*self.data.task_types(), "overall"]:
            sel = [r for r in rows if r.infra_error is None and (t == "overall" or types.get(r.id) == t)]
            by_type[t] = {"total": len(sel), "hard_acc": sum(r.hard for r in sel) / len(sel) if sel else 0.0}
        s = score_rows(rows)
        summary = {
            **by_type,
            "hard": s.hard,
            "soft": s.soft,
            "n": s.n,
            "n_infra": s.n_infra,
            "env_options": dict(self.cfg.env.options),  # e.g. SpreadsheetBench's grading mode
        }
        atomic_write_json(self._path(rel, "summary.json"), summary)
        return summary

    def _finish(self, wall_s: float, *, complete: bool = True) -> dict[str, Any]:
        """Final selection and test evaluations, then ``summary.json``. A run stopped early
        (``complete=False``: a budget) writes the summary of what it did, without the final
        evaluations, with ``status: stopped`` and the reason; ``--resume`` continues it."""
        st, cfg = self.state, self.cfg
        final_sel: float | None = st.best_score
        if complete and skill_hash(st.current_skill) != skill_hash(st.best_skill):
            # Final-skill validation and promotion: the final skill becomes best only if it
            # scores strictly higher (earlier skills win ties).
            ev = self.evaluate(st.current_skill, "final_selection_eval")
            final_sel = ev.score
            if st.best_score is not None and ev.score > st.best_score:
                step = st.last_completed_step
                st.best_skill, st.best_score, st.best_step, st.best_origin = (
                    st.current_skill,
                    ev.score,
                    step,
                    st.current_origin,
                )
        elif not complete:
            final_sel = st.current_score
            st.stop_reason = self.stop_reason or "stopped"
        self._persist()
        tests: dict[str, Any] = {}
        if complete and cfg.evaluation.eval_test:
            with self._stage(st.last_completed_step, "test"):
                tests["baseline"] = self._test_eval(self.initial_skill, "test_eval_baseline")
                tests["best"] = self._test_eval(st.best_skill, "test_eval")
                tests["final"] = (
                    tests["best"]
                    if skill_hash(st.current_skill) == skill_hash(st.best_skill)
                    else self._test_eval(st.current_skill, "test_eval_final")
                )
        actions = [r["action"] for r in st.history]

        def hard_of(skill: str) -> float | None:
            entry = self.cache.get(skill_hash(skill))
            return entry.hard if entry else None

        summary: dict[str, Any] = {
            "version": f"skillopt-{__version__}",
            "status": "complete" if complete else "stopped",
            "stop_reason": "" if complete else st.stop_reason,
            "simulated": self.simulated,
            "mode": self.mode.to_dict(),
            "config": cfg.to_dict(redacted=True),
            # *_hard: the hard accuracy on the selection split; *_score: the gate's score
            # (evaluation.gate_metric, with the semantic-density bonus when enabled).
            "baseline_selection_hard": hard_of(self.initial_skill),
            "baseline_selection_score": self.baseline_score(),
            "best_selection_hard": hard_of(st.best_skill),
            "best_selection_score": st.best_score,
            "final_selection_hard": hard_of(st.current_skill),
            "final_selection_score": final_sel,
            "best_step": st.best_step,
            "current_origin": st.current_origin,
            "best_origin": st.best_origin,
            "total_steps": len(st.history),
            "total_accepts": sum("accept" in a for a in actions),
            "total_rejects": sum(a == "reject" for a in actions),
            "total_skips": sum(a == "skip_no_patches" for a in actions),
            "epoch_stats": [self._epoch_stats(e) for e in range(1, cfg.train.num_epochs + 1)],
            "epoch_stages": dict(st.epoch_stages),
            "total_wall_time_s": round(wall_s, 3),
            "token_summary": self.usage_summary(),
            "cost_usd": round(self.cost(), 6),
            "sandbox_hosts": list(st.hosts),
            "image_digests": sorted(self._digests()),
            "environment": {
                **self.environment,
                "pinned_runtime_image_digest": st.environment.get("runtime_image_digest", ""),
                "data": data_manifest(
                    {
                        "train": self.train_items,
                        "selection": self.val_items,
                        "test": _first(self.data.split("test"), cfg.evaluation.test_env_num),
                    }
                ),
            },
        }
        if tests:
            summary.update(
                baseline_test_hard=tests["baseline"]["hard"],
                baseline_test_soft=tests["baseline"]["soft"],
                test_hard=tests["best"]["hard"],
                test_soft=tests["best"]["soft"],
                final_test_hard=tests["final"]["hard"],
                final_test_soft=tests["final"]["soft"],
                test_delta_hard=tests["best"]["hard"] - tests["baseline"]["hard"],
                final_test_delta_hard=tests["final"]["hard"] - tests["baseline"]["hard"],
                test_n_infra={k: v["n_infra"] for k, v in tests.items()},
            )
        atomic_write_json(self._path("summary.json"), summary)
        return summary

    def _digests(self) -> set[str]:
        found: set[str] = set()
        for path in self.out.rglob("results.jsonl"):
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    d = json.loads(line).get("image_digest")
                except json.JSONDecodeError:
                    continue
                if d:
                    found.add(d)
        return found


def _first(items: list[TaskItem], n: int) -> list[TaskItem]:
    return items[:n] if n and n > 0 else items
