"""Live progress of a training run (rich), as a trainer callback.

A status line that follows the run (epoch/step, stage, rollout progress and accuracy,
selection score, last gate action, tokens, cost) and one permanent line per step and per gate
decision, so the terminal keeps a readable history. Without a TTY it prints plain lines.
"""

from __future__ import annotations

import threading
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.text import Text

from skillopt.stats import format_score
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
        self.rows_done = 0
        self.rows_ok = 0
        self.label = ""
        self.sel: float | None = None
        self.best: float | None = None
        self.last_action = "-"
        self.tokens = 0
        self.cost = 0.0

    def _status(self) -> Text:
        t = Text()
        t.append(f"epoch {self.epoch}/{self.num_epochs}  step {self.step}/{self.total}  ", style="bold")
        t.append(f"{self.stage:<12}", style="cyan")
        if self.rows_done:
            t.append(f" rollouts {self.rows_done} ({self.rows_ok} pass)")
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
            self.rows_done = self.rows_ok = 0
            self._refresh()

    def on_stage_start(self, event: StageEvent) -> None:
        with self._lock:
            self.stage = event.stage
            self.rows_done = self.rows_ok = 0
            self._refresh()

    def on_stage_end(self, event: StageEvent) -> None:
        score = event.current_score
        if event.stage == "baseline" and score is not None:  # None: the baseline failed
            self.sel = self.best = score
            self._print(
                f"baseline selection score {format_score(score, event.current_ci95)} ({event.seconds or 0.0:.1f}s)"
            )

    def on_rollout_result(self, event: RowEvent) -> None:
        with self._lock:
            self.rows_done += 1
            self.rows_ok += 1 if event.row.ok else 0
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
            )
        if detail:
            t.append(f" ({'; '.join(detail)})", style="dim")
        self._print(t)

    def on_step_end(self, event: StepEndEvent) -> None:
        r = event.record.to_json()
        with self._lock:
            self.tokens = event.spend.tokens
            self.cost = event.spend.cost_usd
            self.stage = "done"
            self._refresh()
        edits = r.get("edit_apply_summary") or {}
        self._print(
            f"step {r['step']}/{self.total} (epoch {r['epoch']}): rollout acc {r.get('rollout_hard', 0):.2f} "
            f"on {r.get('rollout_n', 0)}, {r.get('n_edits_merged', 0)} edits merged, "
            f"{r.get('n_edits_ranked', 0)} selected (budget {r.get('edit_budget')}), "
            f"applied {edits.get('applied', '-')}, action {r['action']}, "
            f"selection {format_score(r.get('current_score', 0), r.get('current_score_ci95'))}, "
            f"{r.get('wall_time_s', 0):.1f}s"
        )

    def on_epoch_end(self, event: EpochEndEvent) -> None:
        s = event.record.to_json()
        slow = event.stages.get("slow_update", "-")
        self._print(
            f"epoch {event.epoch}: {s.get('accepts', 0)} accepted, {s.get('rejects', 0)} rejected, "
            f"{s.get('skips', 0)} skipped; slow update {slow}; best selection "
            f"{format_score(s.get('best_score_at_epoch_end'), s.get('best_score_at_epoch_end_ci95'))}"
        )

    def on_fit_end(self, event: FitEndEvent) -> None:
        self._stop()
        s = event.result.to_json()
        what = "done" if s.get("status", "complete") == "complete" else "stopped early"
        best = s.get("best_selection_score")
        lines = [
            f"{what} in {s.get('total_wall_time_s', 0):.0f}s: best selection score "
            f"{format_score(best, s.get('best_selection_score_ci95'))} at step {s.get('best_step')}"
        ]
        if "test_hard" in s:
            lines.append(
                f"test: initial {format_score(s['baseline_test_hard'], s.get('baseline_test_hard_ci95'))} → best "
                f"{format_score(s['test_hard'], s.get('test_hard_ci95'))} (final {s['final_test_hard']:.3f}); "
                f"change {format_score(s['test_delta_hard'], s.get('test_delta_hard_ci95'))}"
                + (
                    f", p={s['test_delta_hard_p_value']:.3g}"
                    if s.get("test_delta_hard_p_value") is not None
                    else ""
                )
            )
        lines.append(f"best skill: {event.out_dir / 'best_skill.md'}")
        for line in lines:
            self._print(line)

    def on_exception(self, event: ExceptionEvent) -> None:
        self._stop()

    def _stop(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


class RowProgress:
    """Rows of one batch as they arrive (``skillopt eval``): a live line on a terminal, a plain
    line every tenth of the batch otherwise. Use as ``RolloutStage.on_row``."""

    def __init__(self, total: int, label: str, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True, soft_wrap=True)
        self.total, self.label = total, label
        self.done = self.ok = self.infra = 0
        self._lock = threading.Lock()
        self._every = max(1, total // 10)
        self.live: Live | None = None
        if self.console.is_terminal:
            self.live = Live(self._text(), console=self.console, refresh_per_second=4, transient=True)
            self.live.start()

    def _text(self) -> Text:
        return Text(
            f"{self.label}: {self.done}/{self.total} rollouts ({self.ok} pass, {self.infra} infrastructure)"
        )

    def __call__(self, row: Any, label: str) -> None:
        with self._lock:
            self.done += 1
            self.ok += 1 if row.ok else 0
            self.infra += 1 if row.infra_error is not None else 0
            if self.live is not None:
                self.live.update(self._text())
            elif self.done % self._every == 0 or self.done == self.total:
                self.console.print(self._text())

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None
