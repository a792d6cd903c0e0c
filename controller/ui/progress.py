"""Live progress of a training run (rich), as a trainer callback.

A status line that follows the run (epoch/step, stage, the batch's rollouts and passes,
selection score, last gate action, tokens, cost) and one permanent line per step and per gate
decision, so the terminal keeps a readable history. Without a TTY it prints plain lines.
"""

from __future__ import annotations

import threading

from rich.console import Console
from rich.live import Live
from rich.text import Text

from skillopt.gate import format_score
from skillopt.trainer.callbacks import (
    Callback,
    EpochEndEvent,
    EpochStartEvent,
    ExceptionEvent,
    FitEndEvent,
    FitStartEvent,
    GateEvent,
    RowEvent,
    StageEvent,
    StepEndEvent,
    StepStartEvent,
)
from skillopt.trainer.rollouts import BatchProgress
from skillopt.types import RolloutResult

__all__ = ["ProgressDisplay", "RowProgress"]

_ACTION_STYLE = {
    "accept_new_best": "bold green",
    "accept": "green",
    "force_accept": "yellow",
    "reject": "red",
}


def _tokens(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


class ProgressDisplay(Callback):
    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True, soft_wrap=True)
        self.live: Live | None = None
        self._lock = threading.Lock()
        self.epoch = self.num_epochs = self.step = self.total = 0
        self.stage = "starting"
        #: The rollouts of the stage's current batch (None before its first row).
        self.batch: BatchProgress | None = None
        self.sel: float | None = None
        self.best: float | None = None
        self.last_action = "-"
        self.tokens = 0
        self.cost = 0.0

    def _status(self) -> Text:
        t = Text()
        t.append(f"epoch {self.epoch}/{self.num_epochs}  step {self.step}/{self.total}  ", style="bold")
        t.append(f"{self.stage:<12}", style="cyan")
        if self.batch is not None:
            b = self.batch
            t.append(f" rollouts {b.done}/{b.total} ({b.passed} pass)")
        if self.sel is not None:
            t.append(f"  selection {self.sel:.3f} (best {self.best:.3f})")
        t.append(f"  last gate {self.last_action}", style=_ACTION_STYLE.get(self.last_action, ""))
        t.append(f"  tokens {_tokens(self.tokens)}  ${self.cost:.4f}")
        return t

    def _refresh(self) -> None:
        if self.live is not None:
            self.live.update(self._status())

    def _print(self, text: Text | str) -> None:
        if self.live is not None:
            self.live.console.print(text)
        else:
            self.console.print(text)

    def on_fit_start(self, event: FitStartEvent) -> None:
        self.num_epochs, self.total = event.num_epochs, event.total_steps
        if event.simulated:
            self._print(
                Text(
                    "OFFLINE SIMULATION: a scripted model server plays the target and the optimizer; "
                    "the sandbox, containers, grading and the gate are real.",
                    style="bold yellow",
                )
            )
        resume = f", resuming after step {event.resume_from}" if event.resume_from else ""
        self._print(
            f"run dir {event.out_dir}: {event.num_epochs} epochs x {event.steps_per_epoch} steps{resume}"
        )
        for notice in event.notices:
            self._print(Text(notice, style="yellow"))
        if self.console.is_terminal:
            self.live = Live(self._status(), console=self.console, refresh_per_second=4, transient=True)
            self.live.start()

    def on_epoch_start(self, event: EpochStartEvent) -> None:
        with self._lock:
            self.epoch = event.epoch
            self._refresh()

    def on_step_start(self, event: StepStartEvent) -> None:
        with self._lock:
            self.step = event.step
            self.batch = None
            self._refresh()

    def on_stage_start(self, event: StageEvent) -> None:
        with self._lock:
            self.stage = event.stage
            self.batch = None
            self._refresh()

    def on_stage_end(self, event: StageEvent) -> None:
        score = event.current_score
        if event.stage == "baseline" and score is not None:  # None: the baseline failed
            self.sel = self.best = score
            self._print(
                f"baseline selection score {format_score(score, event.current_ci95)} ({event.seconds or 0.0:.1f}s)"
            )

    def on_rollout_result(self, event: RowEvent) -> None:
        p = event.progress
        with self._lock:
            # Rows are announced from several threads: never show an older count of a batch.
            if self.batch is None or self.batch.label != p.label or self.batch.done <= p.done:
                self.batch = p
            self._refresh()

    def on_gate_decision(self, event: GateEvent) -> None:
        with self._lock:
            self.last_action = event.action
            self.sel, self.best = event.current_score, event.best_score
        t = Text(
            f"  {event.origin}: candidate {format_score(event.candidate_score, event.candidate_ci95)} vs current → "
        )
        t.append(event.action, style=_ACTION_STYLE.get(event.action, ""))
        test = event.gate_test or {}
        detail = [event.reason] if event.reason else []
        if test:
            detail.append(
                f"{test['mode']}; {test['name']} test: effect {test['effect']:+.3f} "
                f"[{test['ci95'][0]:+.3f}, {test['ci95'][1]:+.3f}], p={test['p_value']:.3g}"
                + (
                    f", look {test['looks']}/{test['max_looks']}: {test['boundary']}"
                    if test.get("looks")
                    else ""
                )
            )
        if detail:
            t.append(f" ({'; '.join(detail)})", style="dim")
        self._print(t)

    def on_step_end(self, event: StepEndEvent) -> None:
        r = event.record
        with self._lock:
            self.tokens = event.spend.tokens
            self.cost = event.spend.cost_usd
            self.stage = "done"
            self._refresh()
        p = r.proposal
        edits = (p.edit_apply_summary if p else None) or {}
        self._print(
            f"step {r.step}/{self.total} (epoch {r.epoch}): rollout acc {r.rollout.hard:.2f} "
            f"on {r.rollout.n}, {p.n_edits_merged if p else 0} edits merged, "
            f"{p.n_edits_ranked if p else 0} selected (budget {p.edit_budget if p else None}), "
            f"applied {edits.get('applied', '-')}, action {r.action}, "
            f"selection {format_score(r.current_score, r.current_score_ci95)}, {r.wall_time_s:.1f}s"
        )
        if p and p.file_changes:
            marks = {"added": "+", "removed": "-", "changed": "~"}
            files = " ".join(f"{marks.get(c.get('status', ''), '~')}{c.get('path')}" for c in p.file_changes)
            self._print(f"  files: {files}")
        for c in p.script_checks if p else ():
            if not c.get("ok"):
                self._print(
                    f"  script check failed, its edits dropped: {c.get('path')} (rule {c.get('rule')})"
                )

    def on_epoch_end(self, event: EpochEndEvent) -> None:
        r = event.record
        slow = event.stages.get("slow_update", "-")
        if slow == "no_content" and (why := event.reasons.get("slow_update")):
            # The optimizer's answer gave nothing to try: say why here, not only in train.log.
            slow = f"{slow} ({why})"
        self._print(
            f"epoch {event.epoch}: {r.accepts} accepted, {r.rejects} rejected, {r.skips} skipped; "
            f"slow update {slow}; best selection "
            f"{format_score(r.best_score_at_epoch_end, r.best_score_at_epoch_end_ci95)}"
        )

    def on_fit_end(self, event: FitEndEvent) -> None:
        self._stop()
        r = event.result
        what = "done" if r.complete else "stopped early"
        lines = [
            f"{what} in {r.total_wall_time_s:.0f}s: best selection score "
            f"{format_score(r.best_selection_score, r.best_selection_score_ci95)} at step {r.best_step}"
        ]
        if (t := r.tests) is not None:
            p_value = t.p_values.get("delta_hard")
            lines.append(
                f"test: initial {format_score(t.baseline_hard, t.ci95.get('baseline_hard'))} → best "
                f"{format_score(t.best_hard, t.ci95.get('best_hard'))} (final {t.final_hard:.3f}); "
                f"change {format_score(t.best_hard - t.baseline_hard, t.ci95.get('delta_hard'))}"
                + (f", p={p_value:.3g}" if p_value is not None else "")
            )
        packages = sorted((event.out_dir / "best_skill").glob("*/SKILL.md"))
        package = f" (package: {packages[0].parent}/)" if packages else ""
        lines.append(f"best skill: {event.out_dir / 'best_skill.md'}{package}")
        for line in lines:
            self._print(line)

    def on_exception(self, event: ExceptionEvent) -> None:
        self._stop()

    def _stop(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


class RowProgress:
    """The rollouts of ``skillopt eval`` as they arrive, from each batch's typed progress: a live
    line on a terminal, a plain line every tenth of a batch otherwise. Use as ``Rollouts.on_row``."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True, soft_wrap=True)
        self.shown: BatchProgress | None = None
        self._lock = threading.Lock()
        self.live: Live | None = None
        if self.console.is_terminal:
            self.live = Live(Text(""), console=self.console, refresh_per_second=4, transient=True)
            self.live.start()

    @staticmethod
    def _text(p: BatchProgress) -> Text:
        return Text(f"{p.label}: {p.done}/{p.total} rollouts ({p.passed} pass, {p.infra} infrastructure)")

    def __call__(self, row: RolloutResult, progress: BatchProgress) -> None:
        p = progress
        with self._lock:
            if self.shown is not None and self.shown.label == p.label and self.shown.done > p.done:
                return  # rows are announced from several threads: an older count is skipped
            self.shown = p
            if self.live is not None:
                self.live.update(self._text(p))
            elif p.done % max(1, p.total // 10) == 0 or p.done == p.total:
                self.console.print(self._text(p))

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None
