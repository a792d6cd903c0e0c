"""Trainer callbacks that make a running run visible and stoppable through its directory.

* :class:`LiveStatus` keeps ``<run>/live.json`` up to date: the current step and stage, the
  rows of the current batch (done, pass, fail, infrastructure, in flight), the sandbox hosts
  with their in-flight rollouts, tokens and cost, the last gate decision. Writes are atomic
  and throttled (at most one per ``min_interval_s``; the last change is always written), so
  the trainer's hot path pays for a dict update and, rarely, one small file write.
* :class:`StopWatcher` honours a stop request (:func:`controller.rundir.lock.request_stop`) at
  the next stage boundary through the run's :class:`~skillopt.trainer.callbacks.RunControl`;
  the trainer then stops cleanly and writes a ``stopped`` summary that ``--resume`` continues.

Both are registered by ``skillopt train`` like the progress display; the WebUI and
:mod:`controller.rundir.reader` only read what they write.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import structlog

from controller.rundir.lock import clear_stop_request, read_stop_request
from skillopt.durable import atomic_write_json
from skillopt.logs import redact_text
from skillopt.trainer.callbacks import (
    BatchEvent,
    Callback,
    EpochEndEvent,
    EpochStartEvent,
    ExceptionEvent,
    FitEndEvent,
    FitStartEvent,
    GateEvent,
    RowEvent,
    RunControl,
    Spend,
    StageEvent,
    StepEndEvent,
    StepStartEvent,
)
from skillopt.trainer.rundir import LiveRecord, layout
from skillopt.trainer.rundir.schema import LiveBatch, LiveGate, LiveHost, LiveStage

__all__ = ["LIVE_NAME", "LiveStatus", "StopWatcher"]

log = structlog.get_logger("skillopt.controller.rundir")

LIVE_NAME = layout.LIVE


class LiveStatus(Callback):
    """Writes ``live.json`` (a :class:`~skillopt.trainer.rundir.LiveRecord`) as the run
    progresses.

    Args:
        run_dir: the run directory.
        hosts: the sandbox hosts and their in-flight rollouts, read at every write (the fleet
            executor's ``hosts_state``); ``None`` for an executor without that view.
        min_interval_s: the least time between two writes (stage changes are written at once).
    """

    def __init__(
        self,
        run_dir: Path,
        *,
        hosts: Callable[[], Sequence[Any]] | None = None,
        min_interval_s: float = 0.5,
    ) -> None:
        self.path = run_dir / LIVE_NAME
        self.min_interval_s = min_interval_s
        self._hosts = hosts
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._spend: Spend | None = None
        self._last_write = 0.0
        self._timer: threading.Timer | None = None
        self._live = LiveRecord(pid=os.getpid(), session_started_at=time.time())

    # -- writing -----------------------------------------------------------------------------

    def _snapshot(self) -> LiveRecord:
        fields: dict[str, Any] = {"updated_at": time.time()}
        if self._hosts is not None:
            hosts = list(self._hosts())
            fields["hosts"] = tuple(
                LiveHost(
                    address=h.address,
                    host=h.host_id,
                    health=str(h.health),
                    capacity=h.capacity,
                    in_flight=h.in_flight,
                )
                for h in hosts
            )
            fields["running"] = sum(h.in_flight for h in hosts)
        if self._spend is not None:
            fields["tokens"], fields["cost_usd"] = self._spend.tokens, self._spend.cost_usd
        return self._live.model_copy(update=fields)

    def _write(self) -> None:
        with self._write_lock:
            with self._lock:
                self._timer = None
                live = self._snapshot()
                self._last_write = time.monotonic()
            try:
                atomic_write_json(self.path, live.to_json(), durable=False)
            except OSError as exc:  # progress only: never fail the run for it
                log.warning("live.write_failed", error=str(exc))

    def _changed(self, *, now: bool = False) -> None:
        """Write now when due (or ``now``), else once the interval has passed."""
        with self._lock:
            wait = self.min_interval_s - (time.monotonic() - self._last_write)
            if not now and wait > 0:
                if self._timer is None:
                    self._timer = threading.Timer(wait, self._write)
                    self._timer.daemon = True
                    self._timer.start()
                return
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        self._write()

    def _set(self, *, now: bool = False, **fields: Any) -> None:
        with self._lock:
            self._live = self._live.model_copy(update=fields)
        self._changed(now=now)

    # -- hooks -------------------------------------------------------------------------------

    def on_fit_start(self, event: FitStartEvent) -> None:
        self._spend = event.spend
        self._set(
            now=True,
            phase="baseline" if event.baseline_score is None else "training",
            num_epochs=event.num_epochs,
            total_steps=event.total_steps,
            step=event.resume_from,
            resume_from=event.resume_from,
            simulated=event.simulated,
            mode=event.mode,
            baseline_score=event.baseline_score,
        )

    def on_epoch_start(self, event: EpochStartEvent) -> None:
        self._set(epoch=event.epoch, num_epochs=event.num_epochs)

    def on_step_start(self, event: StepStartEvent) -> None:
        self._set(
            now=True, phase="training", step=event.step, epoch=event.epoch, stages=(), batch=None, stage=""
        )

    def on_stage_start(self, event: StageEvent) -> None:
        phase = {
            "baseline": "baseline",
            "test": "test",
            "slow_update": "epoch_end",
            "meta_skill": "epoch_end",
        }
        with self._lock:
            fields: dict[str, Any] = {
                "stage": event.stage,
                "stage_started_at": time.time(),
                "phase": phase.get(event.stage, "training"),
            }
            if event.stage in phase:
                fields["stages"] = ()
            self._live = self._live.model_copy(update=fields)
            self._spend = event.spend
        self._changed(now=True)

    def on_stage_end(self, event: StageEvent) -> None:
        with self._lock:
            ended = LiveStage(name=event.stage, seconds=round(event.seconds or 0.0, 3))
            fields: dict[str, Any] = {"stages": (*self._live.stages, ended)}
            if event.stage == "baseline":
                fields["baseline_score"] = event.baseline_score
            self._live = self._live.model_copy(update=fields)
            self._spend = event.spend
        self._changed(now=True)

    def on_rollout_batch(self, event: BatchEvent) -> None:
        batch = LiveBatch(label=event.label, total=event.total, done=event.done, resumed=event.done)
        self._set(now=True, batch=batch)

    def on_rollout_result(self, event: RowEvent) -> None:
        p = event.progress
        with self._lock:
            b = self._live.batch
            # Rows are announced from several threads: a count older than the one shown is
            # skipped, so the batch never goes backwards.
            if b is None or b.label != p.label or b.done > p.done:
                return
            batch = LiveBatch(
                label=p.label,
                total=p.total,
                done=p.done,
                resumed=p.resumed,
                passed=p.passed,
                fail=p.failed,
                infra=p.infra,
            )
            self._live = self._live.model_copy(update={"batch": batch})
        self._changed()

    def on_gate_decision(self, event: GateEvent) -> None:
        self._set(
            last_gate=LiveGate(
                step=event.step,
                origin=event.origin,
                action=event.action,
                candidate_score=event.candidate_score,
                current_score=event.current_score,
                best_score=event.best_score,
                reason=event.reason,
            )
        )

    def on_step_end(self, event: StepEndEvent) -> None:
        with self._lock:
            self._spend = event.spend
        self._set(now=True, stage="", last_completed_step=event.step)

    def on_fit_end(self, event: FitEndEvent) -> None:
        status = event.result.status
        self._set(
            now=True, phase="done" if status == "complete" else "stopped", stage="", batch=None, status=status
        )

    def on_exception(self, event: ExceptionEvent) -> None:
        exc = event.error
        message = getattr(exc, "message", "") or f"{type(exc).__name__}: {exc}"
        self._set(now=True, phase="failed", error=redact_text(str(message))[:2000])


class StopWatcher(Callback):
    """Asks the run to stop (its :class:`RunControl`) when a stop request for this process
    appears.

    Looked for at every stage and step boundary (one ``stat`` and a small read), which is
    where the trainer can stop cleanly.
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.pid = os.getpid()
        self._control: RunControl | None = None

    def _check(self) -> None:
        control = self._control
        if control is None or control.stop_requested:
            return
        req = read_stop_request(self.run_dir, self.pid)
        if req is None:
            return
        by = str(req.get("by") or "request")
        why = str(req.get("reason") or "no reason given")[:300]
        reason = f"stop requested ({by}): {why}"
        control.request_stop(reason)
        log.warning("trainer.stop_requested", by=by, reason=reason)

    def on_fit_start(self, event: FitStartEvent) -> None:
        self._control = event.control
        # A request left for an earlier session of this run is not meant for this one.
        stale = read_stop_request(self.run_dir)
        if stale is not None and stale.get("pid") != self.pid:
            clear_stop_request(self.run_dir)
        self._check()

    def on_step_start(self, event: StepStartEvent) -> None:
        self._check()

    def on_stage_start(self, event: StageEvent) -> None:
        self._check()

    def on_stage_end(self, event: StageEvent) -> None:
        self._check()

    def on_step_end(self, event: StepEndEvent) -> None:
        self._check()

    def on_epoch_end(self, event: EpochEndEvent) -> None:
        self._check()

    def on_fit_end(self, event: FitEndEvent) -> None:
        if read_stop_request(self.run_dir, self.pid) is not None:
            clear_stop_request(self.run_dir)
