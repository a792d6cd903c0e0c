"""Training curve PNG written as the run goes (a trainer callback).

Drawing the curve costs a few hundred milliseconds of CPU (matplotlib), which is nothing next
to a real step (minutes of rollouts) but most of a simulated one. So the picture is redrawn
after a step only when ``min_interval_s`` has passed since the last drawing, and always once
more when the run ends, finished or failed: the last picture shows every step."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from skillopt.trainer.callbacks import Callback, ExceptionEvent, FitEndEvent, FitStartEvent, StepEndEvent
from skillopt.trainer.rundir import layout

__all__ = ["CurvePlotter", "plot_history"]


def plot_history(history: Sequence[Mapping[str, Any]], baseline: float | None, path: Path) -> None:
    """Selection score of the current skill per step with its 95% interval as a band,
    accept/reject marks (with interval bars) for each candidate, and rollout accuracy of the
    training batches."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    steps = [0] + [r["step"] for r in history]
    current = [baseline if baseline is not None else 0.0] + [r.get("current_score") or 0.0 for r in history]
    ax.step(steps, current, where="post", color="#1f77b4", label="selection score (current skill)")
    first = history[0].get("current_score_before_ci95") if history else None
    bands = [first] + [r.get("current_score_ci95") for r in history]
    if any(b for b in bands):
        lo = [b[0] if b else c for b, c in zip(bands, current, strict=True)]
        hi = [b[1] if b else c for b, c in zip(bands, current, strict=True)]
        ax.fill_between(steps, lo, hi, step="post", color="#1f77b4", alpha=0.15, label="95% interval")
    for kind, color, marker in (("accept", "#2ca02c", "o"), ("reject", "#d62728", "x")):
        pts = [
            (r["step"], r["candidate_gate_score"])
            for r in history
            if r.get("candidate_gate_score") is not None
            and (kind in r["action"] if kind == "accept" else r["action"] == "reject")
        ]
        if pts:
            xs, ys = zip(*pts, strict=True)
            ax.scatter(
                xs,
                ys,
                color=color,
                marker=marker,
                s=60,
                zorder=3,
                label=f"candidate {kind}ed",
            )
        bars = [
            (r["step"], r["candidate_gate_score"], r["candidate_gate_score_ci95"])
            for r in history
            if r.get("candidate_gate_score_ci95")
            and (kind in r["action"] if kind == "accept" else r["action"] == "reject")
        ]
        if bars:
            ax.errorbar(
                [b[0] for b in bars],
                [b[1] for b in bars],
                yerr=[[b[1] - b[2][0] for b in bars], [b[2][1] - b[1] for b in bars]],
                fmt="none",
                ecolor=color,
                alpha=0.5,
                capsize=3,
                zorder=2,
            )
    ax.plot(
        [r["step"] for r in history],
        [r.get("rollout_hard", 0.0) for r in history],
        color="#ff7f0e",
        linestyle="--",
        marker=".",
        label="rollout accuracy (train batch)",
    )
    ax.set_xlabel("step")
    ax.set_ylabel("score")
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlim(-0.2, max(steps) + 0.5)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title("skillopt training curve")
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp.png")
    try:
        fig.savefig(tmp)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a full disk: no half picture left behind
        raise
    finally:
        plt.close(fig)


class CurvePlotter(Callback):
    """Writes ``training_curve.png`` into the run directory: after a step when
    ``min_interval_s`` has passed since the last drawing, and at the end of the run.

    Args:
        min_interval_s: the least time between two drawings during the run (0: every step).
    """

    def __init__(self, *, min_interval_s: float = 60.0) -> None:
        self.min_interval_s = min_interval_s
        self.path: Path | None = None
        self._pending: tuple[list[dict[str, Any]], float | None] | None = None
        self._last_drawn = 0.0

    def on_fit_start(self, event: FitStartEvent) -> None:
        self.path = event.out_dir / layout.CURVE
        self._last_drawn = time.monotonic()  # the first picture after the interval, or at the end

    def on_step_end(self, event: StepEndEvent) -> None:
        self._pending = ([r.to_json() for r in event.history], event.baseline_score)
        if time.monotonic() - self._last_drawn >= self.min_interval_s:
            self._draw()

    def on_fit_end(self, event: FitEndEvent) -> None:
        self._draw()

    def on_exception(self, event: ExceptionEvent) -> None:
        self._draw()  # the steps done before the failure

    def _draw(self) -> None:
        if self.path is None or self._pending is None:
            return
        history, baseline = self._pending
        self._pending = None
        plot_history(history, baseline, self.path)
        self._last_drawn = time.monotonic()
