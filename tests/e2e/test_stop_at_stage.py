"""A stop asked for in the middle of a step (between two of its stages) stops the run cleanly
(summary ``stopped``, the step left uncommitted) and ``--resume`` then reaches exactly the
decisions of an uninterrupted run: the step reruns from its on-disk caches, and what it had
changed in memory (the edit-budget schedule, the step buffer, the gate cache) was rolled back.

The trainer runs in-process here with the real embedded sandbox and the scripted model server
(the same wiring as ``skillopt train``); the stop is asked by a callback at an exact stage, the
way the WebUI's StopWatcher asks when it sees a stop request.
"""

from __future__ import annotations

import json
from pathlib import Path

from controller.session import decide_simulation, open_session
from skillopt.config import load_config
from skillopt.envs.registry import load_env_data
from skillopt.trainer.callbacks import Callback, StageEvent
from skillopt.trainer.loop import Trainer

OVERRIDES = ["train.num_epochs=1", "evaluation.eval_test=false", "run.simulate=on", "run.plot=false"]
VOLATILE = {"timing", "tokens", "wall_time_s"}


class StopAfter(Callback):
    """Asks the trainer to stop once ``stage`` of ``step`` has ended."""

    def __init__(self, step: int, stage: str) -> None:
        self.step, self.stage = step, stage

    def on_stage_end(self, trainer, event: StageEvent) -> None:
        if (event.step, event.stage) == (self.step, self.stage):
            trainer.should_stop = True
            trainer.stop_reason = "stop requested (test)"


def fit(out: Path, callbacks=()) -> dict:
    cfg = load_config("spreadsheetbench_demo", OVERRIDES)
    e = cfg.env
    data = load_env_data(
        e.name,
        data_root=e.data_root,
        split_mode=e.split_mode,
        split_ratio=e.split_ratio,
        split_seed=e.split_seed,
    )
    with open_session(cfg, out_dir=out, mode=decide_simulation(cfg)) as session:
        return Trainer(
            cfg,
            data=data,
            rollouts=session.rollouts,
            optimizer=session.optimizer,
            out_dir=out,
            initial_skill=data.initial_skill(),
            callbacks=list(callbacks),
            mode=session.mode,
        ).fit()


def decisions(run: Path) -> dict:
    state = json.loads((run / "runtime_state.json").read_text())
    history = json.loads((run / "history.json").read_text())
    return {
        "history": [{k: v for k, v in r.items() if k not in VOLATILE} for r in history],
        "epoch_stages": state["epoch_stages"],
        "scheduler": state["scheduler"],
        "best_skill": (run / "best_skill.md").read_text(),
        "skills": {p.name: p.read_text() for p in sorted((run / "skills").iterdir())},
    }


def test_a_stop_between_stages_resumes_to_the_decisions_of_an_uninterrupted_run(tmp_path, docker_client):
    reference = tmp_path / "reference"
    assert fit(reference)["status"] == "complete"

    run = tmp_path / "stopped"
    # After select (which advanced the edit-budget schedule) and update, before the gate.
    summary = fit(run, [StopAfter(1, "update")])
    assert summary["status"] == "stopped"
    assert "before the evaluate stage of step 1" in summary["stop_reason"]
    state = json.loads((run / "runtime_state.json").read_text())
    assert state["last_completed_step"] == 0 and state["scheduler"].get("current_step", 0) == 0
    assert not (run / "steps/step_0001/step_record.json").exists()
    assert (run / "steps/step_0001/candidate_skill.md").exists()  # the stages' outputs are kept

    assert fit(run)["status"] == "complete"
    assert decisions(run) == decisions(reference)
    first = json.loads((run / "history.json").read_text())[0]
    assert first["selection_cached"] is False  # the rolled-back gate cache did not leak into the rerun
