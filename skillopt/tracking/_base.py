"""A tracker: a trainer callback that hands what the run logs to one tracker library
(:class:`Backend`) on a thread of its own.

The trainer's thread only builds small :class:`Point` objects and puts them on a bounded
queue; every call into the library (its import too: MLflow's takes seconds) happens on the
tracker's thread. So a slow or unreachable backend never slows the run, and one that fails
never stops it: the first error is said once (a line on stderr and ``tracking.failed`` in the
log), the tracker stops, the run goes on. At the end of the run the tracker gets at most
``tracking.flush_timeout_s`` to send what is still queued.

What a backend saves when it opens its run (its run id) is kept in the run directory's
``tracking.json``, so ``--resume`` continues the same tracker run.
"""

from __future__ import annotations

import contextlib
import json
import queue
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import structlog

from skillopt.durable import atomic_write_json
from skillopt.trainer.callbacks import (
    Callback,
    EpochEndEvent,
    ExceptionEvent,
    FitEndEvent,
    FitStartEvent,
    StageEvent,
    StepEndEvent,
)
from skillopt.trainer.rundir import layout

__all__ = ["ArtifactKind", "Axis", "Backend", "Point", "RunInfo", "Status", "TrackerCallback"]

log = structlog.get_logger("skillopt.tracking")

#: What a point's index counts: steps (0 = the baseline), epochs, or the run's end (the last step).
Axis = Literal["step", "epoch", "final"]
#: ``skill``: the package after a step (``skill_packages/vNNNN``); ``best_skill``: the best
#: package; ``run_file``: a file of the run directory (``summary.json``, ``history.json``).
ArtifactKind = Literal["skill", "best_skill", "run_file"]
#: How the run ended: ``complete``, ``stopped`` (a stop request or budget: resumable), ``failed``.
Status = Literal["complete", "stopped", "failed"]

_STATE_LOCK = threading.Lock()
#: Updates a tracker may have queued before it drops new ones (a backend this far behind is
#: stuck, not slow).
QUEUE_SIZE = 10_000
#: The wait for a tracker's last updates when the run fails (a Ctrl-C should not wait long).
_FAILED_FLUSH_S = 5.0


@dataclass(frozen=True, kw_only=True)
class RunInfo:
    """What a tracker run is opened with."""

    out_dir: Path
    #: The run directory's name (the tracker run's default name).
    name: str
    #: The run's config (``Config.to_dict()``, redacted), nested by section.
    config: Mapping[str, Any]
    #: The config flattened to ``section.key`` → text (``tracking.mlflow.enabled``: ``true``).
    params: Mapping[str, str]
    #: ``env``, ``agent``, ``gate_mode``, ``simulated`` (``simulated`` | ``real``), ``mode``.
    tags: Mapping[str, str]
    #: The run directory held committed steps already (``--resume``).
    resumed: bool
    #: When this process's fit started (seconds since the epoch; a backend opens late).
    wall_time: float = field(default_factory=time.time)


@dataclass(frozen=True, kw_only=True)
class Point:
    """Metrics (and texts) at one index of one axis."""

    axis: Axis
    index: int
    metrics: Mapping[str, float]
    #: Per-step texts: ``gate/action``, ``gate/reason``.
    texts: Mapping[str, str] = field(default_factory=dict)
    #: The step record's JSON (``steps/step_NNNN/step_record.json``), for the step axis.
    record: Mapping[str, Any] | None = None
    #: When the trainer reached it (seconds since the epoch), not when the backend took it.
    wall_time: float = field(default_factory=time.time)


class Backend(ABC):
    """One tracker library. Every method runs on the tracker's thread, never the trainer's; an
    exception from any of them stops this tracker (said once), never the run."""

    #: Its key in the config and in ``tracking.json`` (``mlflow``).
    name: ClassVar[str]
    #: Its name in messages (``MLflow``).
    title: ClassVar[str]

    @abstractmethod
    def start(self, run: RunInfo, saved: Mapping[str, Any]) -> Mapping[str, Any]:
        """Open the tracker run: the one ``saved`` names (what ``start`` returned in an earlier
        process of this run directory) when there is one, else a new one.

        Returns:
            What to save in ``tracking.json`` for ``--resume`` (JSON data, no secrets).
        """

    @abstractmethod
    def log(self, point: Point) -> None:
        """Log a point's metrics (and texts, and step record where the library keeps them)."""

    @abstractmethod
    def artifact(self, path: Path, kind: ArtifactKind, *, step: int) -> None:
        """Log ``path`` (a file or a folder) of the run directory."""

    @abstractmethod
    def finish(self, status: Status, *, wall_time: float) -> None:
        """Close the tracker run, marked with how the run ended (at ``wall_time``)."""


class TrackerCallback(Callback):
    """Logs a run to one :class:`Backend`: config and tags at the start, per step the
    selection score and its interval, the gate's decision, effect and p-value, tokens, cost
    and time; per epoch its summary; the skill versions and the best skill as artifacts.

    Args:
        backend: the tracker library's adapter.
        flush_timeout_s: at the end of the run, the longest wait for updates still queued.
        queue_size: updates that may wait for the backend before new ones are dropped.
    """

    def __init__(
        self, backend: Backend, *, flush_timeout_s: float = 30.0, queue_size: int = QUEUE_SIZE
    ) -> None:
        self.backend = backend
        self.flush_timeout_s = flush_timeout_s
        self._queue: queue.Queue[Callable[[], None] | None] = queue.Queue(maxsize=queue_size)
        self._thread: threading.Thread | None = None
        self._out: Path | None = None
        self._failed = threading.Event()
        self._said: set[str] = set()
        self._said_lock = threading.Lock()
        #: The last step whose skill version was handed to the backend.
        self._skill_step = -1
        #: Updates dropped because the queue was full.
        self.dropped = 0

    @property
    def failed(self) -> bool:
        """The backend failed: this tracker logs nothing more (the run goes on)."""
        return self._failed.is_set()

    # -- hooks (the trainer's thread: build a point, queue it, return) --------------------------

    def on_fit_start(self, event: FitStartEvent) -> None:
        self._out = event.out_dir
        self._skill_step = event.resume_from if event.resume_from else -1
        info = run_info(event)
        self._thread = threading.Thread(
            target=self._work, name=f"skillopt-tracking-{self.backend.name}", daemon=True
        )
        self._thread.start()
        self._submit(lambda: self._start(info))

    def on_stage_end(self, event: StageEvent) -> None:
        if event.stage == "baseline" and event.current_score is not None:
            point = baseline_point(event)
            self._submit(lambda: self.backend.log(point))

    def on_step_end(self, event: StepEndEvent) -> None:
        point = step_point(event)
        self._submit(lambda: self.backend.log(point))
        self._skill_versions(event.record.step)

    def on_epoch_end(self, event: EpochEndEvent) -> None:
        point = epoch_point(event)
        self._submit(lambda: self.backend.log(point))

    def on_fit_end(self, event: FitEndEvent) -> None:
        result = event.result
        last = result.total_steps
        self._skill_versions(last)
        point = final_point(event)
        self._submit(lambda: self.backend.log(point))
        out = event.out_dir
        files: tuple[tuple[Path, ArtifactKind], ...] = (
            (out / layout.BEST_SKILL_DIR, "best_skill"),
            (out / layout.SUMMARY, "run_file"),
            (out / layout.HISTORY, "run_file"),
        )
        for path, kind in files:
            if path.exists():
                self._artifact(path, kind, last)
        status: Status = "complete" if result.status == "complete" else "stopped"
        ended = time.time()
        self._submit(lambda: self.backend.finish(status, wall_time=ended))
        self._close(self.flush_timeout_s)

    def on_exception(self, event: ExceptionEvent) -> None:
        if self._thread is None:
            return
        ended = time.time()
        self._submit(lambda: self.backend.finish("failed", wall_time=ended))
        self._close(min(self.flush_timeout_s, _FAILED_FLUSH_S))

    # -- the trainer's side of the queue ----------------------------------------------------------

    def _skill_versions(self, step: int) -> None:
        """Hand over each skill version written since the last one (``v0000`` with step 1)."""
        if self._out is None:
            return
        for version in range(self._skill_step + 1, step + 1):
            path = self._out / layout.skill_package_dir(version)
            if not path.is_dir():
                path = self._out / layout.skill_file(version)
            if path.exists():
                self._artifact(path, "skill", version)
        self._skill_step = max(self._skill_step, step)

    def _artifact(self, path: Path, kind: ArtifactKind, step: int) -> None:
        self._submit(lambda: self.backend.artifact(path, kind, step=step))

    def _submit(self, op: Callable[[], None]) -> None:
        if self._failed.is_set() or self._thread is None:
            return
        try:
            self._queue.put_nowait(op)
        except queue.Full:
            self.dropped += 1
            self._say_once(
                "behind",
                f"{self.backend.title} tracking falls behind (a slow backend): updates are dropped "
                "until it catches up; the run goes on",
            )

    def _close(self, timeout_s: float) -> None:
        """Let the queued updates go out, waiting at most ``timeout_s``."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        deadline = time.monotonic() + timeout_s
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=max(0.0, timeout_s))
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            self._failed.set()  # anything it still sends is not waited for
            self._say_once(
                "timeout",
                f"{self.backend.title} tracking was still sending after {timeout_s:g} s "
                "(tracking.flush_timeout_s); the run ends without waiting for it",
            )

    # -- the tracker's thread -----------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            op = self._queue.get()
            if op is None:
                return
            if self._failed.is_set():
                continue  # drain: a failed backend is not called again
            try:
                op()
            except Exception as exc:
                self._failed.set()
                log.warning("tracking.failed", tracker=self.backend.name, error=repr(exc), exc_info=True)
                self._say_once(
                    "failed",
                    f"{self.backend.title} tracking failed ({_short(exc)}); the run goes on without it "
                    f"(details in train.log; to run without it: --set tracking.{self.backend.name}.enabled=false)",
                )

    def _start(self, info: RunInfo) -> None:
        saved = load_state(info.out_dir).get(self.backend.name) or {}
        state = self.backend.start(info, saved if isinstance(saved, Mapping) else {})
        if self._failed.is_set():
            return  # the run ended without waiting for this start: it is not the run's tracker run
        save_state(info.out_dir, self.backend.name, state)
        log.info("tracking.started", tracker=self.backend.name, resumed=bool(saved), **dict(state))

    def _say_once(self, what: str, message: str) -> None:
        with self._said_lock:
            if what in self._said:
                return
            self._said.add(what)
        log.warning(f"tracking.{what}", tracker=self.backend.name, message=message)
        print(f"skillopt: {message}", file=sys.stderr, flush=True)


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    text = text if len(text) <= 200 else text[:197] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# -- tracking.json ----------------------------------------------------------------------------------


def load_state(out_dir: Path) -> dict[str, Any]:
    """``tracking.json``: tracker name → what its backend saved (``{}`` when absent or damaged)."""
    try:
        data = json.loads((out_dir / layout.TRACKING).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_state(out_dir: Path, name: str, state: Mapping[str, Any]) -> None:
    with _STATE_LOCK:
        data = load_state(out_dir)
        data[name] = dict(state)
        atomic_write_json(out_dir / layout.TRACKING, data)


# -- events → points ----------------------------------------------------------------------------


def run_info(event: FitStartEvent) -> RunInfo:
    cfg = event.config
    config = cfg.to_dict(redacted=True)
    tags = {
        "env": cfg.env.name,
        "agent": cfg.env.agent,
        "gate_mode": cfg.evaluation.gate_mode,
        "simulated": "simulated" if event.simulated else "real",
        "mode": event.mode,
    }
    return RunInfo(
        out_dir=event.out_dir,
        name=event.out_dir.name,
        config=config,
        params=flatten(config),
        tags=tags,
        resumed=event.resume_from > 0,
    )


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """``{"train": {"seed": 42}}`` → ``{"train.seed": "42"}`` (values as JSON text, strings bare)."""
    out: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return out


def _put(metrics: dict[str, float], name: str, value: Any) -> None:
    if isinstance(value, bool):
        metrics[name] = 1.0 if value else 0.0
    elif isinstance(value, int | float) and value == value and abs(value) != float("inf"):
        metrics[name] = float(value)


def _put_ci(metrics: dict[str, float], name: str, interval: Any) -> None:
    if isinstance(interval, list | tuple) and len(interval) == 2:
        _put(metrics, f"{name}_ci95_low", interval[0])
        _put(metrics, f"{name}_ci95_high", interval[1])


def baseline_point(event: StageEvent) -> Point:
    """Step 0: the initial skill's selection score, which is also the best so far."""
    metrics: dict[str, float] = {}
    for name in ("score/current", "score/best"):
        _put(metrics, name, event.current_score)
        _put_ci(metrics, name, event.current_ci95)
    return Point(axis="step", index=0, metrics=metrics)


def step_point(event: StepEndEvent) -> Point:
    r = event.record
    m: dict[str, float] = {}
    _put(m, "score/current", r.current_score)
    _put_ci(m, "score/current", r.current_score_ci95)
    _put(m, "score/best", r.best_score)
    _put_ci(m, "score/best", r.best_score_ci95)
    texts = {"gate/action": r.action}
    if r.selection is not None:
        s = r.selection
        _put(m, "selection/score", s.candidate_score)
        _put_ci(m, "selection/score", s.candidate_score_ci95)
        _put(m, "selection/hard", s.hard)
        _put(m, "selection/soft", s.soft)
        _put(m, "selection/n_infra", s.n_infra)
        test = s.gate_test or {}
        _put(m, "gate/effect", test.get("effect"))
        _put(m, "gate/p_value", test.get("p_value"))
        texts["gate/reason"] = s.gate_reason
    _put(m, "gate/accepted", r.accepted)
    _put(m, "rollout/hard", r.rollout.hard)
    _put(m, "rollout/soft", r.rollout.soft)
    _put(m, "rollout/n_infra", r.rollout.n_infra)
    if r.proposal is not None:
        _put(m, "edits/merged", r.proposal.n_edits_merged)
    _put(m, "skill/chars", r.skill_len)
    step_tokens = 0
    for usage in r.tokens.values():
        if isinstance(usage, Mapping):
            step_tokens += int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0)
    _put(m, "tokens/step_optimizer", step_tokens)
    _put(m, "tokens/total", event.spend.tokens)
    _put(m, "cost/total_usd", event.spend.cost_usd)
    _put(m, "time/step_s", r.wall_time_s)
    for stage, seconds in r.timing.items():
        _put(m, f"time/{stage if stage.endswith('_s') else stage + '_s'}", seconds)
    return Point(axis="step", index=r.step, metrics=m, texts=texts, record=r.to_json())


def epoch_point(event: EpochEndEvent) -> Point:
    r = event.record
    m: dict[str, float] = {}
    _put(m, "epoch/steps", r.steps)
    _put(m, "epoch/accepts", r.accepts)
    _put(m, "epoch/rejects", r.rejects)
    _put(m, "epoch/skips", r.skips)
    _put(m, "epoch/best_score", r.best_score_at_epoch_end)
    _put_ci(m, "epoch/best_score", r.best_score_at_epoch_end_ci95)
    _put(m, "epoch/current_score", r.current_score_at_epoch_end)
    _put_ci(m, "epoch/current_score", r.current_score_at_epoch_end_ci95)
    return Point(axis="epoch", index=r.epoch, metrics=m)


def final_point(event: FitEndEvent) -> Point:
    """The run's summary (``summary.json``'s numbers), at its last step."""
    r = event.result
    m: dict[str, float] = {}
    for name in ("baseline", "best", "final"):
        _put(m, f"final/{name}_selection_score", getattr(r, f"{name}_selection_score"))
        _put_ci(m, f"final/{name}_selection_score", getattr(r, f"{name}_selection_score_ci95"))
        _put(m, f"final/{name}_selection_hard", getattr(r, f"{name}_selection_hard"))
    _put(m, "final/best_step", r.best_step)
    _put(m, "final/steps", r.total_steps)
    _put(m, "final/accepts", r.total_accepts)
    _put(m, "final/rejects", r.total_rejects)
    _put(m, "final/skips", r.total_skips)
    _put(m, "final/wall_time_s", r.total_wall_time_s)
    _put(m, "final/cost_usd", r.cost_usd)
    if r.tests is not None:
        for key, value in r.tests.to_json().items():
            if key.endswith("_ci95"):
                _put_ci(m, f"final/{key.removesuffix('_ci95')}", value)
            else:
                _put(m, f"final/{key}", value)
    return Point(axis="final", index=r.total_steps, metrics=m)
