"""The hook surface: the order every hook fires in, what the events carry, and that callbacks
see events, never the trainer (they stop a run through the RunControl they were given)."""

from __future__ import annotations

import inspect
import json
from typing import Any

import pytest

from skillopt.trainer import FitResult, StepRecord
from skillopt.trainer.callbacks import Callback, ExceptionEvent, GateEvent, StepEndEvent
from skillopt.trainer.rundir import layout
from tests.skillopt.trainer.conftest import Crash, crash_at


class Recorder(Callback):
    """Records every hook call as ``hook:detail`` (rows are counted, not listed)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.events: list[tuple[str, Any]] = []

    def __getattribute__(self, name: str) -> Any:
        if not name.startswith("on_"):
            return object.__getattribute__(self, name)

        def record(event: Any) -> None:
            self.events.append((name, event))
            if name == "on_rollout_result":
                return
            detail = next(
                (
                    getattr(event, a)
                    for a in ("stage", "step", "epoch")
                    if getattr(event, a, None) not in (None, "")
                ),
                None,
            )
            self.calls.append(name if detail is None else f"{name}:{detail}")

        return record


def _step_hooks(step: int) -> list[str]:
    stages = ["rollout", "reflect", "aggregate", "select", "update", "evaluate"]
    out = [f"on_step_start:{step}"]
    for s in stages:
        out.append(f"on_stage_start:{s}")
        if s in ("rollout", "evaluate"):
            out.append("on_rollout_batch")
        out.append(f"on_stage_end:{s}")
    return [*out, f"on_gate_decision:{step}", f"on_step_end:{step}"]


def test_hooks_fire_in_the_documented_order(fit, tmp_path):
    rec = Recorder()
    fit(tmp_path / "run", "train.num_epochs=1", callbacks=[rec])
    assert rec.calls == [
        "on_fit_start",
        "on_stage_start:baseline",
        "on_rollout_batch",
        "on_stage_end:baseline",
        "on_epoch_start:1",
        *_step_hooks(1),
        *_step_hooks(2),
        "on_stage_start:slow_update",
        "on_stage_end:slow_update",
        "on_stage_start:meta_skill",
        "on_stage_end:meta_skill",
        "on_epoch_end:1",
        "on_stage_start:test",
        # The initial skill and the best one; the final one is the best plus epoch 1's empty
        # slow-update block, which its test evaluation stands for (no third batch).
        "on_rollout_batch",
        "on_rollout_batch",
        "on_stage_end:test",
        "on_fit_end",
    ]
    out = tmp_path / "run"
    assert (out / layout.TEST_BEST).is_dir() and not (out / layout.TEST_FINAL).exists()


def test_a_resumed_run_announces_only_what_it_does(fit, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(Crash):
        fit(out, failpoint=crash_at(layout.STATE, 8))  # just before epoch 1's slow update commits
    rec = Recorder()
    fit(out, callbacks=[rec])
    start = rec.events[0][1]
    assert start.resume_from == 2 and start.baseline_score is not None
    # No baseline again, no step of epoch 1 again; epoch 1's end is redone, then epoch 2.
    assert rec.calls[:4] == [
        "on_fit_start",
        "on_epoch_start:1",
        "on_stage_start:slow_update",
        "on_stage_end:slow_update",
    ]
    assert "on_stage_start:baseline" not in rec.calls and "on_step_start:1" not in rec.calls
    assert rec.calls.count("on_step_start:3") == 1


def test_events_carry_what_callbacks_read(fit, tmp_path):
    rec = Recorder()
    result, _ = fit(tmp_path / "run", "train.num_epochs=1", callbacks=[rec])
    gates = [e for n, e in rec.events if n == "on_gate_decision"]
    ends = [e for n, e in rec.events if n == "on_step_end"]
    assert all(isinstance(e, GateEvent) for e in gates) and all(isinstance(e, StepEndEvent) for e in ends)
    for gate, end in zip(gates, ends, strict=True):
        assert isinstance(end.record, StepRecord) and end.record.action == gate.action
        assert (gate.current_score, gate.best_score) == (end.record.current_score, end.record.best_score)
        assert end.history[-1] == end.record and end.spend.tokens > 0
        assert end.baseline_score == result.baseline_selection_score
    fit_end = rec.events[-1][1]
    assert isinstance(fit_end.result, FitResult) and fit_end.result == result
    stage_end = next(e for n, e in rec.events if n == "on_stage_end" and e.stage == "baseline")
    assert stage_end.current_score == stage_end.baseline_score == result.baseline_selection_score
    epoch_end = next(e for n, e in rec.events if n == "on_epoch_end")
    assert epoch_end.stages == {"slow_update": "inject_placeholder", "meta_skill": "skip_first_epoch"}
    assert epoch_end.record.steps == 2


def test_every_hook_takes_the_event_alone():
    for name, fn in inspect.getmembers(Callback, inspect.isfunction):
        if name.startswith("on_"):
            assert list(inspect.signature(fn).parameters) == ["self", "event"], name


def test_a_failing_callback_is_logged_and_the_run_goes_on(fit, tmp_path):
    class Broken(Callback):
        def on_step_end(self, event: StepEndEvent) -> None:
            raise RuntimeError("a bug in a callback")

    result, _ = fit(tmp_path / "run", "train.num_epochs=1", callbacks=[Broken()])
    assert result.status == "complete" and result.total_steps == 2


def test_on_exception_sees_the_error_that_ends_the_fit(fit, tmp_path):
    rec = Recorder()
    with pytest.raises(Crash):
        fit(tmp_path / "run", callbacks=[rec], failpoint=crash_at(layout.STATE, 3))
    name, event = rec.events[-1]
    assert name == "on_exception" and isinstance(event, ExceptionEvent) and isinstance(event.error, Crash)


def test_the_curve_and_live_status_callbacks_run_on_events(fit, tmp_path):
    from controller.rundir.live import LiveStatus
    from controller.ui.curve import CurvePlotter

    out = tmp_path / "run"
    out.mkdir()
    fit(
        out,
        "train.num_epochs=1",
        "run.plot=true",
        callbacks=[CurvePlotter(), LiveStatus(out, min_interval_s=0.0)],
    )
    assert (out / layout.CURVE).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    live = json.loads((out / layout.LIVE).read_text())
    assert live["phase"] == "done" and live["tokens"] > 0 and live["last_completed_step"] == 2
    assert live["baseline_score"] is not None and live["last_gate"]["step"] == 2


def test_the_curve_is_drawn_at_the_end_and_after_a_failure_not_after_every_fast_step(fit, tmp_path):
    from controller.ui.curve import CurvePlotter

    drawn: list[int] = []

    class Counting(CurvePlotter):
        def _draw(self) -> None:
            if self._pending is not None:
                drawn.append(len(self._pending[0]))
            super()._draw()

    fit(tmp_path / "ok", "train.num_epochs=1", callbacks=[Counting(min_interval_s=3600)])
    assert drawn == [2]  # once, at the end, with both steps
    drawn.clear()
    fit(tmp_path / "every", "train.num_epochs=1", callbacks=[Counting(min_interval_s=0)])
    assert drawn == [1, 2]  # no interval: after every step
    drawn.clear()
    with pytest.raises(Crash):
        fit(
            tmp_path / "crash", callbacks=[Counting(min_interval_s=3600)], failpoint=crash_at(layout.STATE, 5)
        )
    assert drawn == [1] and (tmp_path / "crash" / layout.CURVE).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_misspelt_hook_fails_when_the_trainer_is_built(sim, tmp_path):
    from skillopt.testing.inprocess import simulated_trainer
    from tests.skillopt.trainer.conftest import config

    class Typo(Callback):
        def on_stpe_end(self, event: StepEndEvent) -> None:
            raise AssertionError("never called")

    with pytest.raises(
        TypeError, match=r"Typo\.on_stpe_end is not a callback hook; the hooks are: .*on_step_end"
    ):
        simulated_trainer(config(), tmp_path / "run", base_url=sim.base_url, callbacks=[Typo()])


def test_a_hook_that_cannot_take_its_event_fails_when_registered():
    from skillopt.trainer.callbacks import CallbackList, check_hooks

    class NoEvent(Callback):
        def on_step_end(self) -> None:  # type: ignore[override]  # the mistake under test
            pass

    with pytest.raises(TypeError, match=r"NoEvent\.on_step_end\(\) cannot take the hook's event"):
        CallbackList([NoEvent()])

    class Fine(Callback):
        on_time = True  # data named on_*, not a hook attempt

        def on_step_end(self, event: StepEndEvent) -> None:
            pass

    check_hooks(Fine())
    with pytest.raises(ValueError, match="no such hook: on_stpe_end"):
        CallbackList([Fine()])("on_stpe_end", None)


def test_rows_carry_their_batch_progress_typed(fit, tmp_path):
    rec = Recorder()
    fit(tmp_path / "run", "train.num_epochs=1", callbacks=[rec])
    starts = {e.label: e for n, e in rec.events if n == "on_rollout_batch"}
    rows = [e for n, e in rec.events if n == "on_rollout_result"]
    assert rows and all(e.progress.label == e.label for e in rows)
    last: dict[str, Any] = {}
    for e in rows:
        p = e.progress
        assert p.total == starts[p.label].total and p.resumed == starts[p.label].done
        if p.label not in last or last[p.label].done < p.done:
            last[p.label] = p
    for label, p in last.items():  # every batch ran to its end, each row counted once
        assert p.done == p.total and p.passed + p.failed + p.infra == p.done - p.resumed, label
        assert p.passed == sum(1 for e in rows if e.label == label and e.row.ok)


def test_the_epoch_end_says_why_the_slow_update_ended_and_the_console_shows_an_empty_one(fit, tmp_path):
    import dataclasses
    import io

    from rich.console import Console

    from controller.ui.progress import ProgressDisplay

    rec = Recorder()
    out = tmp_path / "run"
    fit(out, callbacks=[rec])
    second = [e for n, e in rec.events if n == "on_epoch_end"][-1]
    slow = json.loads((out / layout.epoch_dir("slow_update", 2) / layout.Epoch.SLOW_RESULT).read_text())
    assert second.epoch == 2 and second.stages["slow_update"] == slow["action"]
    assert second.reasons["slow_update"] == (slow.get("error") or slow["gate_reason"]) != ""

    # An optimizer answer that gave nothing to try: the console line names the cause, which
    # before was only in train.log.
    buf = io.StringIO()
    shown = ProgressDisplay(Console(file=buf, width=200))
    empty = dataclasses.replace(
        second,
        stages={**second.stages, "slow_update": "no_content"},
        reasons={"slow_update": "unparsable answer: no JSON object found"},
    )
    shown.on_epoch_end(empty)
    assert "slow update no_content (unparsable answer: no JSON object found)" in buf.getvalue()
