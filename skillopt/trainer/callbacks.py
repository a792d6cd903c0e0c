"""Hooks into the training loop: one frozen event per hook, order-independent callbacks.

The progress display, the JSON log, the curve plotter and the WebUI stream are callbacks; the
gate is not (accepting a skill is part of the method, not an observation). A callback may ask
the loop to stop by setting ``trainer.should_stop``; it never raises to stop it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from skillopt.types import RolloutResult

__all__ = [
    "BatchEvent",
    "Callback",
    "CallbackList",
    "EpochEvent",
    "FitEndEvent",
    "FitStartEvent",
    "GateEvent",
    "RowEvent",
    "StageEvent",
    "StepEndEvent",
    "StepStartEvent",
]

log = structlog.get_logger("skillopt.trainer.callbacks")


@dataclass(frozen=True, kw_only=True)
class FitStartEvent:
    out_dir: Path
    num_epochs: int
    steps_per_epoch: int
    total_steps: int
    resume_from: int
    simulated: bool
    config: Mapping[str, Any]
    #: Human-readable run mode and its reason (``RunMode.describe()``).
    mode: str = ""


@dataclass(frozen=True, kw_only=True)
class EpochEvent:
    epoch: int
    num_epochs: int
    stats: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class StepStartEvent:
    step: int
    total_steps: int
    epoch: int
    step_in_epoch: int


@dataclass(frozen=True, kw_only=True)
class StageEvent:
    """A named stage started (``seconds`` is None) or ended."""

    step: int
    stage: str
    seconds: float | None = None
    detail: str = ""


@dataclass(frozen=True, kw_only=True)
class RowEvent:
    label: str
    row: RolloutResult
    done: int = 0
    total: int = 0


@dataclass(frozen=True, kw_only=True)
class BatchEvent:
    """A batch of rollouts starts: ``done`` of its ``total`` rows are on disk already (resume)."""

    label: str
    total: int
    done: int = 0


@dataclass(frozen=True, kw_only=True)
class GateEvent:
    step: int
    origin: str
    action: str
    candidate_score: float
    current_score: float
    best_score: float
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class StepEndEvent:
    step: int
    record: Mapping[str, Any]
    history: Sequence[Mapping[str, Any]]
    usage_total: Mapping[str, Any]
    cost_usd: float


@dataclass(frozen=True, kw_only=True)
class FitEndEvent:
    summary: Mapping[str, Any]
    out_dir: Path


class Callback:
    """Base class: every hook is a no-op. Override what you need."""

    def on_fit_start(self, trainer: Any, event: FitStartEvent) -> None:
        """Before the baseline evaluation."""

    def on_epoch_start(self, trainer: Any, event: EpochEvent) -> None:
        """At the start of every epoch (also a resumed one)."""

    def on_step_start(self, trainer: Any, event: StepStartEvent) -> None:
        """Before a step's rollout."""

    def on_stage_start(self, trainer: Any, event: StageEvent) -> None:
        """A stage (rollout, reflect, aggregate, select, update, evaluate, slow_update…) starts."""

    def on_stage_end(self, trainer: Any, event: StageEvent) -> None:
        """A stage ended (``event.seconds`` is its wall time)."""

    def on_rollout_batch(self, trainer: Any, event: BatchEvent) -> None:
        """A batch of rollouts starts (any stage); its rows follow as ``on_rollout_result``."""

    def on_rollout_result(self, trainer: Any, event: RowEvent) -> None:
        """A rollout row arrived (any stage: training, selection, slow update, test)."""

    def on_gate_decision(self, trainer: Any, event: GateEvent) -> None:
        """The gate decided on a candidate."""

    def on_step_end(self, trainer: Any, event: StepEndEvent) -> None:
        """A step's record was persisted."""

    def on_epoch_end(self, trainer: Any, event: EpochEvent) -> None:
        """After the epoch's slow update and meta skill."""

    def on_fit_end(self, trainer: Any, event: FitEndEvent) -> None:
        """After the test evaluations and summary.json."""

    def on_exception(self, trainer: Any, exc: BaseException) -> None:
        """The loop is failing with ``exc`` (then it re-raises)."""


class CallbackList:
    """Dispatch to every callback; a failing callback is logged, never fatal."""

    def __init__(self, callbacks: Sequence[Callback]) -> None:
        self.callbacks = list(callbacks)

    def __call__(self, hook: str, trainer: Any, event: Any) -> None:
        for cb in self.callbacks:
            try:
                getattr(cb, hook)(trainer, event)
            except Exception:
                log.exception("callback.failed", callback=type(cb).__name__, hook=hook)
