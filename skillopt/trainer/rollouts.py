""":class:`Rollouts`, how the trainer and ``skillopt eval`` roll a skill out: a batch of items
under one skill, run through an executor, resumable row by row (the rollout directory's files are
:mod:`skillopt.trainer.rundir.results`').

Rows are appended as they arrive; a resumed batch sends only the items without a row, and runs
the items whose row ended on infrastructure again (with a new rollout id). Where a batch
stands is reported as a typed :class:`BatchProgress` (the displays format it).
"""

from __future__ import annotations

import collections
import hashlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from skillopt.envs.base import TaskItem
from skillopt.errors import SystemicFailure
from skillopt.observability import tracing
from skillopt.trainer.executor import RolloutExecutor
from skillopt.trainer.rundir.results import append_row, load_rows, set_aside_infra_rows
from skillopt.types import Limits, ModelSpec, RolloutRequest, RolloutResult, SkillVersion

__all__ = ["BatchProgress", "RolloutSpec", "Rollouts", "rollout_seed"]

log = structlog.get_logger("skillopt.trainer.rollouts")


@dataclass(frozen=True, kw_only=True)
class RolloutSpec:
    """What every rollout of a run shares."""

    run_id: str
    env: str
    agent: str
    model: ModelSpec
    limits: Limits
    #: Model exchange cache mode for every rollout ("" = the host's default).
    model_cache: str = ""
    #: The run's seed (``train.seed``): every rollout's sampling seed derives from it.
    seed: int = 0
    #: The isolation every rollout requires (``sandbox.isolation``; "" = any): sent with each,
    #: so a host that cannot give it refuses the rollout before any container starts.
    isolation: str = ""


def rollout_seed(run_seed: int, label: str, item_id: str) -> int:
    """A rollout's sampling seed: a stable 63-bit hash of the run seed, the batch label (its
    rollout directory) and the item."""
    digest = hashlib.blake2b(f"{run_seed}\0{label}\0{item_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


@dataclass(frozen=True, kw_only=True)
class BatchProgress:
    """Where a batch of rollouts stands: ``done`` of its ``total`` rows are on disk, ``resumed``
    of them were before the batch started (a resumed batch); of the rows that arrived since,
    ``passed`` passed, ``failed`` failed and ``infra`` were lost to infrastructure."""

    #: The batch's rollout directory, relative to the run directory (``steps/step_0001/rollout``).
    label: str
    total: int
    done: int
    resumed: int = 0
    passed: int = 0
    failed: int = 0
    infra: int = 0


@dataclass
class _Batch:
    """One ``run`` call's rows (loaded from disk, then arriving), its counts and stop signal."""

    out_dir: Path
    label: str
    n_items: int
    types: dict[str, str]
    rows: dict[str, RolloutResult]
    lock: threading.Lock = field(default_factory=threading.Lock)
    answered: int = 0  # rows with a model reply
    resumed: int = 0
    passed: int = 0
    failed: int = 0
    infra: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    failure: list[str] = field(default_factory=list)

    def progress(self) -> BatchProgress:
        return BatchProgress(
            label=self.label,
            total=self.n_items,
            done=len(self.rows),
            resumed=self.resumed,
            passed=self.passed,
            failed=self.failed,
            infra=self.infra,
        )


class Rollouts:
    """Runs batches of rollouts through an executor and records them.

    Args:
        executor: where rollouts run.
        spec: what all rollouts of the run share.
        on_row: called for every new row with its batch's progress (display, log).
        systemic_after: abort once this many rows arrived and none got a model reply.

    ``on_batch(progress)``, when set, is called as a batch starts: ``progress.done`` of its
    rows are on disk already (a resumed batch), the others are about to run.
    """

    def __init__(
        self,
        executor: RolloutExecutor,
        spec: RolloutSpec,
        *,
        on_row: Callable[[RolloutResult, BatchProgress], None] | None = None,
        systemic_after: int = 8,
    ) -> None:
        self.executor = executor
        self.spec = spec
        self.on_row = on_row
        self.on_batch: Callable[[BatchProgress], None] | None = None
        self.systemic_after = systemic_after

    def request(
        self,
        item: TaskItem,
        skill: SkillVersion,
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
            skill=skill,
            model=self.spec.model,
            limits=self.spec.limits,
            use_eval_feedback=use_eval_feedback,
            diagnostic_instruction=diagnostic,
            model_cache=self.spec.model_cache,
            # The target's sampling seed: one per rollout of the run (a rerun after an
            # infrastructure failure is the same rollout), from train.seed, so a run with the
            # same seed samples the same (the simulation honours it; real providers get it as
            # a header they ignore).
            seed=rollout_seed(self.spec.seed, label, item.id),
            isolation=self.spec.isolation,
        )

    def run(
        self,
        items: Sequence[TaskItem],
        skill: SkillVersion,
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
        (rows,) = self.run_many(
            items,
            skill,
            [(out_dir, label)],
            use_eval_feedback=use_eval_feedback,
            diagnostic=diagnostic,
        )
        return rows

    def run_many(
        self,
        items: Sequence[TaskItem],
        skill: SkillVersion,
        lanes: Sequence[tuple[Path, str]],
        *,
        use_eval_feedback: bool = False,
        diagnostic: str = "",
    ) -> list[list[RolloutResult]]:
        """Roll ``skill`` out on ``items`` once per lane (``(out_dir, label)``: a repeated
        evaluation), all lanes in one executor call so they share its workers; each lane is
        resumable on its own. Returns each lane's rows in item order.

        Raises:
            SystemicFailure: as :meth:`run`, for any lane.
        """
        stop = threading.Event()
        batches = [self._open(items, out_dir, label, stop) for out_dir, label in lanes]
        by_rollout: dict[str, _Batch] = {}
        requests: list[RolloutRequest] = []
        for batch, (reruns, todo) in batches:
            if todo and not self._systemic(batch.rows.values(), len(items)):
                for it in todo:
                    req = self.request(
                        it,
                        skill,
                        batch.label,
                        use_eval_feedback=use_eval_feedback,
                        diagnostic=diagnostic,
                        rerun=reruns.get(it.id, 0),
                    )
                    by_rollout[req.rollout_id] = batch
                    requests.append(req)
        if requests:
            attrs = {
                "skillopt.batch.label": lanes[0][1],
                "skillopt.batch.lanes": len(lanes),
                "skillopt.batch.rollouts": len(requests),
                "skillopt.env": self.spec.env,
                "skillopt.agent": self.spec.agent,
            }
            with tracing.span("rollout.batch", attrs):
                self.executor.run(
                    requests, on_result=lambda row: self._record(by_rollout[row.rollout_id], row), stop=stop
                )
        return [self._close(batch, items) for batch, _ in batches]

    def _open(
        self, items: Sequence[TaskItem], out_dir: Path, label: str, stop: threading.Event
    ) -> tuple[_Batch, tuple[dict[str, int], list[TaskItem]]]:
        """A lane's batch with its rows on disk, the reruns and the items still to run."""
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
            resumed=len(loaded),
            stop=stop,
        )
        todo = [it for it in items if it.id not in batch.rows]
        if batch.rows:
            log.info("rollouts.resumed", dir=str(out_dir), done=len(batch.rows), todo=len(todo))
        if self.on_batch is not None:
            self.on_batch(batch.progress())
        return batch, (reruns, todo)

    def _close(self, batch: _Batch, items: Sequence[TaskItem]) -> list[RolloutResult]:
        rows = list(batch.rows.values())
        if batch.failure or self._systemic(rows, len(items)):
            raise SystemicFailure(
                f"every rollout in {batch.out_dir.name} failed before any model reply; most common reason: "
                f"{batch.failure[0] if batch.failure else _common_reason(rows)}"
            )
        missing = [it.id for it in items if it.id not in batch.rows]
        if missing:
            raise SystemicFailure(f"{len(missing)} rollouts of {batch.out_dir} produced no row (stopped?)")
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
            if row.infra_error is not None:
                batch.infra += 1
            elif row.ok:
                batch.passed += 1
            else:
                batch.failed += 1
            progress = batch.progress()
            systemic = batch.answered == 0 and len(batch.rows) >= min(self.systemic_after, batch.n_items)
            reason = _common_reason(batch.rows.values()) if systemic else ""
        if self.on_row is not None:
            self.on_row(row, progress)
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
