"""Hooks into the training loop: one frozen event per hook, order-independent callbacks.

The progress display, the JSON log, the curve plotter, the WebUI's live status and stop
watcher are callbacks; the gate is not (accepting a skill is part of the method, not an
observation). A callback sees events, never the loop: every event carries what a callback
may read (scores, records, usage). To stop the run, a callback keeps the
:class:`RunControl` of :class:`FitStartEvent` and calls :meth:`RunControl.request_stop`; the
loop honours it at the next stage boundary. Adding a field to an event breaks no callback;
a callback method ``on_*`` that is no hook is refused when the callback is registered
(:func:`check_hooks`).

A stage is a named, timed piece of the method (``evaluate``: a step's candidate on the
selection split). Order of hooks in a fit (resumed steps and epochs are skipped, not
announced)::

    on_fit_start
      on_stage_start/end(baseline)                    (once per run)
      on_epoch_start
        on_step_start
          on_stage_start/end(rollout, reflect[, rollout, reflect ...], aggregate, select,
                             update, evaluate)         on_rollout_batch / on_rollout_result
          on_gate_decision                             inside as rows arrive
        on_step_end
        on_stage_start/end(slow_update), on_stage_start/end(meta_skill)
      on_epoch_end
      on_stage_start/end(test)
    on_fit_end                   (or on_exception, when the fit fails)
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from skillopt.config import Config
from skillopt.trainer.records import StepRecord
from skillopt.trainer.rollouts import BatchProgress
from skillopt.trainer.summary import EpochRecord, FitResult
from skillopt.types import RolloutResult, SkillVersion

__all__ = [
    "HOOKS",
    "BatchEvent",
    "Callback",
    "CallbackList",
    "EpochEndEvent",
    "EpochStartEvent",
    "ExceptionEvent",
    "FitEndEvent",
    "FitStartEvent",
    "GateEvent",
    "RowEvent",
    "RunControl",
    "Spend",
    "StageEvent",
    "StepEndEvent",
    "StepStartEvent",
    "check_hooks",
]

log = structlog.get_logger("skillopt.trainer.callbacks")


class RunControl:
    """The one thing a callback may change: ask the run to stop (thread-safe).

    The loop stops at the next stage boundary; inside a step the step is left uncommitted and
    reruns on ``--resume`` from its committed segments and caches.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reason = ""
        self._stop = False

    def request_stop(self, reason: str) -> None:
        """Ask to stop; the first reason given is kept."""
        with self._lock:
            if not self._stop:
                self._stop, self._reason = True, reason

    @property
    def stop_requested(self) -> bool:
        return self._stop

    @property
    def reason(self) -> str:
        return self._reason


@dataclass(frozen=True, kw_only=True)
class Spend:
    """Tokens (optimizer + target) and cost so far."""

    tokens: int = 0
    cost_usd: float = 0.0


@dataclass(frozen=True, kw_only=True)
class FitStartEvent:
    out_dir: Path
    num_epochs: int
    steps_per_epoch: int
    total_steps: int
    #: The last committed step (0 for a new run).
    resume_from: int
    simulated: bool
    #: The run's config (``config.json`` holds it redacted).
    config: Config
    #: Human-readable run mode and its reason (``RunMode.describe()``).
    mode: str
    #: The baseline's selection score, when a resumed run measured it already.
    baseline_score: float | None
    control: RunControl
    spend: Spend = field(default_factory=Spend)
    #: What the user should know before the run spends anything (e.g. that the ``paired``
    #: gate cannot accept on this many selection items), one sentence each.
    notices: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class EpochStartEvent:
    epoch: int
    num_epochs: int


@dataclass(frozen=True, kw_only=True)
class EpochEndEvent:
    epoch: int
    num_epochs: int
    record: EpochRecord
    #: Outcome of each epoch-end segment of this epoch (``slow_update``, ``meta_skill``).
    stages: Mapping[str, str]
    #: Why a segment ended as it did, where known (``slow_update``: the optimizer's error for
    #: ``no_content``, the gate's reason otherwise).
    reasons: Mapping[str, str] = field(default_factory=dict)


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
    #: The current skill's selection score (None until the baseline was measured).
    current_score: float | None = None
    baseline_score: float | None = None
    spend: Spend = field(default_factory=Spend)
    #: 95% interval of ``current_score`` (set when the baseline stage ends).
    current_ci95: tuple[float, float] | None = None


@dataclass(frozen=True, kw_only=True)
class RowEvent:
    """A new rollout row, and where its batch stands with it."""

    label: str
    row: RolloutResult
    #: The batch's counts, this row included.
    progress: BatchProgress


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
    #: The candidate and the current version (before the decision) the gate compared.
    candidate_skill: SkillVersion | None = None
    current_skill: SkillVersion | None = None
    #: 95% interval of ``candidate_score``.
    candidate_ci95: tuple[float, float] | None = None
    #: The paired test (``gate_test`` of the step record).
    gate_test: Mapping[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class StepEndEvent:
    step: int
    record: StepRecord
    history: Sequence[StepRecord]
    baseline_score: float | None
    usage_total: Mapping[str, Any]
    spend: Spend


@dataclass(frozen=True, kw_only=True)
class FitEndEvent:
    result: FitResult
    out_dir: Path


@dataclass(frozen=True, kw_only=True)
class ExceptionEvent:
    error: BaseException


class Callback:
    """Base class: every hook is a no-op. Override what you need."""

    def on_fit_start(self, event: FitStartEvent) -> None:
        """Before the baseline evaluation (or the first step a resumed run reruns)."""

    def on_epoch_start(self, event: EpochStartEvent) -> None:
        """At the start of every epoch that still has work (also a resumed one)."""

    def on_step_start(self, event: StepStartEvent) -> None:
        """Before a step's rollout."""

    def on_stage_start(self, event: StageEvent) -> None:
        """A stage (rollout, reflect, aggregate, select, update, evaluate, slow_update…) starts."""

    def on_stage_end(self, event: StageEvent) -> None:
        """A stage ended (``event.seconds`` is its wall time)."""

    def on_rollout_batch(self, event: BatchEvent) -> None:
        """A batch of rollouts starts (any stage); its rows follow as ``on_rollout_result``."""

    def on_rollout_result(self, event: RowEvent) -> None:
        """A rollout row arrived (any stage: training, selection, slow update, test)."""

    def on_gate_decision(self, event: GateEvent) -> None:
        """The gate decided on a candidate."""

    def on_step_end(self, event: StepEndEvent) -> None:
        """A step's record was committed."""

    def on_epoch_end(self, event: EpochEndEvent) -> None:
        """After the epoch's slow update and meta skill."""

    def on_fit_end(self, event: FitEndEvent) -> None:
        """After the test evaluations and summary.json."""

    def on_exception(self, event: ExceptionEvent) -> None:
        """The fit is failing with ``event.error`` (then it re-raises)."""


#: Every hook a callback may define: the ``on_*`` methods of :class:`Callback`.
HOOKS = frozenset(name for name in vars(Callback) if name.startswith("on_"))


def check_hooks(callback: object) -> None:
    """Refuse a callback whose ``on_*`` methods are not all hooks, or cannot take the event.

    A misspelt hook (``on_stpe_end``) would never be called: it fails here, when the callback
    is registered, rather than going unnoticed for a whole run.

    Raises:
        TypeError: naming the method and the hooks there are.
    """
    name = type(callback).__name__
    for attr in sorted(a for a in dir(callback) if a.startswith("on_")):
        method = getattr(callback, attr)
        if not callable(method):
            continue  # data, not a hook attempt
        if attr not in HOOKS:
            raise TypeError(
                f"{name}.{attr} is not a callback hook; the hooks are: {', '.join(sorted(HOOKS))}"
            )
        try:
            signature = inspect.signature(method)
        except (TypeError, ValueError):  # a builtin or C callable: nothing to check
            continue
        try:
            signature.bind(None)
        except TypeError:
            params = ", ".join(signature.parameters)
            raise TypeError(
                f"{name}.{attr}({params}) cannot take the hook's event: a hook takes one argument, "
                "the event (see skillopt.trainer.callbacks)"
            ) from None


class CallbackList:
    """Dispatch to every callback; a callback's ``Exception`` is logged, never fatal (a
    ``BaseException`` such as ``KeyboardInterrupt`` passes through).

    Raises:
        TypeError: a callback defines a method ``on_*`` that is no hook (:func:`check_hooks`).
    """

    def __init__(self, callbacks: Sequence[Callback]) -> None:
        for cb in callbacks:
            check_hooks(cb)
        self.callbacks = list(callbacks)

    def __call__(self, hook: str, event: Any) -> None:
        if hook not in HOOKS:  # the trainer's own mistake: never a silent no-op
            raise ValueError(f"no such hook: {hook}")
        for cb in self.callbacks:
            try:
                getattr(cb, hook)(event)
            except Exception:
                log.exception("callback.failed", callback=type(cb).__name__, hook=hook)
