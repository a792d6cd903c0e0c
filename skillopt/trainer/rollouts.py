"""Rollout stage: a batch of items under one skill, run through an executor, resumable row by
row (the rollout directory's files are :mod:`skillopt.trainer.rundir.results`').

Rows are appended as they arrive; a resumed batch sends only the items without a row, and runs
the items whose row ended on infrastructure again (with a new rollout id).
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from skillopt.envs.base import TaskItem
from skillopt.errors import SystemicFailure
from skillopt.trainer.executor import RolloutExecutor
from skillopt.trainer.rundir.results import append_row, load_rows, set_aside_infra_rows
from skillopt.types import Limits, ModelSpec, RolloutRequest, RolloutResult, SkillSpec

__all__ = ["BatchScore", "RolloutSpec", "RolloutStage", "by_category", "score_rows", "too_many_infra"]

log = structlog.get_logger("skillopt.trainer.rollouts")


@dataclass(frozen=True, kw_only=True)
class RolloutSpec:
    """What every rollout of a run shares."""

    run_id: str
    env: str
    agent: str
    model: ModelSpec
    limits: Limits
    skill_name: str = "skillopt-target"
    #: Model exchange cache mode for every rollout ("" = the host's default).
    model_cache: str = ""


@dataclass(frozen=True)
class BatchScore:
    hard: float
    soft: float
    n: int
    n_infra: int
    n_failed: int


def too_many_infra(n_infra: int, n_rows: int, max_fraction: float) -> bool:
    """More rows lost to infrastructure than ``max_fraction`` (``evaluation.max_infra_fraction``)
    allows: a mean over the rest is over a different subset than another skill's, not a
    measurement."""
    return n_infra > max_fraction * max(1, n_rows)


def by_category(
    rows: Sequence[RolloutResult], types: Mapping[str, str], categories: Sequence[str]
) -> dict[str, dict[str, float | int]]:
    """Per category, the scored rows and their hard accuracy (``{"total", "hard_acc"}``);
    the category ``overall`` counts every scored row. Infrastructure rows are left out."""
    out: dict[str, dict[str, float | int]] = {}
    for t in categories:
        sel = [r for r in rows if r.infra_error is None and (t == "overall" or types.get(r.id) == t)]
        out[t] = {"total": len(sel), "hard_acc": sum(r.hard for r in sel) / len(sel) if sel else 0.0}
    return out


def score_rows(rows: Sequence[RolloutResult]) -> BatchScore:
    """Means of hard/soft over rows without infrastructure errors (those are masked)."""
    scored = [r for r in rows if r.infra_error is None]
    n = len(scored)
    return BatchScore(
        hard=sum(r.hard for r in scored) / n if n else 0.0,
        soft=sum(r.soft for r in scored) / n if n else 0.0,
        n=n,
        n_infra=len(rows) - n,
        n_failed=sum(1 for r in scored if r.hard < 1e-9),
    )


@dataclass
class _Batch:
    """One ``run`` call's rows (loaded from disk, then arriving) and its stop signal."""

    out_dir: Path
    label: str
    n_items: int
    types: dict[str, str]
    rows: dict[str, RolloutResult]
    lock: threading.Lock = field(default_factory=threading.Lock)
    answered: int = 0  # rows with a model reply
    stop: threading.Event = field(default_factory=threading.Event)
    failure: list[str] = field(default_factory=list)


class RolloutStage:
    """Runs batches through an executor and records them.

    Args:
        executor: where rollouts run.
        spec: what all rollouts of the run share.
        on_row: called for every new row (progress display, log).
        systemic_after: abort once this many rows arrived and none got a model reply.

    ``on_batch(label, total, done)``, when set, is called as a batch starts: ``done`` of its
    ``total`` rows are on disk already (a resumed batch), the others are about to run.
    """

    def __init__(
        self,
        executor: RolloutExecutor,
        spec: RolloutSpec,
        *,
        on_row: Callable[[RolloutResult, str], None] | None = None,
        systemic_after: int = 8,
    ) -> None:
        self.executor = executor
        self.spec = spec
        self.on_row = on_row
        self.on_batch: Callable[[str, int, int], None] | None = None
        self.systemic_after = systemic_after

    def request(
        self,
        item: TaskItem,
        skill: str,
        label: str,
        *,
        use_eval_feedback: bool,
        diagnostic: str = "",
        rerun: int = 0,
    ) -> RolloutRequest:
        # Deterministic ids: a resumed run asks for the same rollout again, and a host that
        # still holds its result replays it instead of running it twice. A rerun of a row that
        # ended on infrastructure gets a new id, or the host would replay the failure.
        suffix = f"+r{rerun}" if rerun else ""
        return RolloutRequest(
            rollout_id=f"{self.spec.run_id}/{label}/{item.id}"[: 200 - len(suffix)] + suffix,
            env=self.spec.env,
            agent=self.spec.agent,
            task=item.task,
            grading=item.grading,
            skill=SkillSpec(name=self.spec.skill_name, content=skill),
            model=self.spec.model,
            limits=self.spec.limits,
            use_eval_feedback=use_eval_feedback,
            diagnostic_instruction=diagnostic,
            model_cache=self.spec.model_cache,
        )

    def run(
        self,
        items: Sequence[TaskItem],
        skill: str,
        out_dir: Path,
        *,
        label: str,
        use_eval_feedback: bool = False,
        diagnostic: str = "",
    ) -> list[RolloutResult]:
        """Roll ``skill`` out on ``items`` into ``out_dir``; returns rows in item order.

        Raises:
            SystemicFailure: every row so far failed before any model reply (bad credentials,
                model server down): the most common reason is in the message.
        """
        out_dir.mkdir(parents=True, exist_ok=True)
        loaded = load_rows(out_dir)
        # Rows that ended on infrastructure are not done: a resumed batch runs them again.
        reruns = set_aside_infra_rows(out_dir, loaded)
        batch = _Batch(
            out_dir=out_dir,
            label=label,
            n_items=len(items),
            types={it.id: it.task_type for it in items},
            rows=loaded,
            answered=sum(r.agent_ok for r in loaded.values()),
        )
        todo = [it for it in items if it.id not in batch.rows]
        if batch.rows:
            log.info("rollouts.resumed", dir=str(out_dir), done=len(batch.rows), todo=len(todo))
        if self.on_batch is not None:
            self.on_batch(label, len(items), len(items) - len(todo))
        if todo and not self._systemic(batch.rows.values(), len(items)):
            requests = [
                self.request(
                    it,
                    skill,
                    label,
                    use_eval_feedback=use_eval_feedback,
                    diagnostic=diagnostic,
                    rerun=reruns.get(it.id, 0),
                )
                for it in todo
            ]
            self.executor.run(requests, on_result=lambda row: self._record(batch, row), stop=batch.stop)
        rows = list(batch.rows.values())
        if batch.failure or self._systemic(rows, len(items)):
            raise SystemicFailure(
                f"every rollout in {out_dir.name} failed before any model reply; most common reason: "
                f"{batch.failure[0] if batch.failure else _common_reason(rows)}"
            )
        missing = [it.id for it in items if it.id not in batch.rows]
        if missing:
            raise SystemicFailure(f"{len(missing)} rollouts of {out_dir} produced no row (stopped?)")
        return [batch.rows[it.id] for it in items]

    def _record(self, batch: _Batch, row: RolloutResult) -> None:
        """A row arrived: on disk first, then announced; stop the batch when every row so far
        failed before any model reply."""
        with batch.lock:
            if row.id in batch.rows:
                return  # never a duplicate row
            append_row(batch.out_dir, row, batch.types.get(row.id, ""))
            batch.rows[row.id] = row
            batch.answered += 1 if row.agent_ok else 0
            systemic = batch.answered == 0 and len(batch.rows) >= min(self.systemic_after, batch.n_items)
            reason = _common_reason(batch.rows.values()) if systemic else ""
        if self.on_row is not None:
            self.on_row(row, batch.label)
        if systemic:
            batch.failure.append(reason)
            batch.stop.set()

    def _systemic(self, rows, n_items: int) -> bool:
        rows = list(rows)
        return (
            bool(rows)
            and len(rows) >= min(self.systemic_after, n_items)
            and not any(r.agent_ok for r in rows)
        )


def _common_reason(rows) -> str:
    reasons = collections.Counter((r.fail_reason or "unknown").split("\n")[0][:300] for r in rows)
    return reasons.most_common(1)[0][0] if reasons else "unknown"
