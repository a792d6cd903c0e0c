"""Damaged run directories: the one reader says ``damaged``, names the file and what is wrong
with it, what the directory still proves and what ``skillopt train --resume`` repairs; the
runs list, ``skillopt runs`` and the WebUI all show that."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from controller.rundir.damage import inspect
from controller.rundir.reader import RunStatus, is_run_dir, list_runs
from tests.controller.rundir.test_reader import REPO, make_run
from tests.rundirs import step_json, summary_json


def finished(root: Path, name: str) -> Path:
    run = make_run(root, name).path
    (run / "history.json").write_text(json.dumps([step_json(1)]))
    (run / "steps/step_0001/step_record.json").write_text(json.dumps(step_json(1)))
    (run / "summary.json").write_text(json.dumps(summary_json("complete")))
    return run


def cut(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize(
    ("rel", "problem", "resumable", "repair"),
    [
        ("history.json", "is not valid JSON", True, "rebuilds it from the steps' own records"),
        ("summary.json", "is not valid JSON", True, "writes it again"),
        ("runtime_state.json", "is not valid JSON", False, "not repairable"),
        ("steps/step_0001/step_record.json", "is not valid JSON", True, "writes it again from history.json"),
        ("config.json", "is not valid JSON", False, "not repairable"),
    ],
)
def test_each_truncated_file_makes_the_run_damaged_and_says_what_to_do(
    tmp_path, rel, problem, resumable, repair
):
    run = finished(tmp_path, "r")
    assert run_status_of(run) is RunStatus.FINISHED and not inspect(run)
    cut(run / rel)
    report = inspect(run)
    (damage,) = report.problems
    assert damage.file == rel and problem in damage.problem and "cut off" in damage.problem
    assert repair in damage.repair and report.resumable is resumable
    assert report.last_committed_step == 1  # what the directory still proves
    assert report.headline().startswith(f"{rel}: is not valid JSON")
    assert ("`skillopt train --resume` repairs" in report.advice()) is resumable
    info = list_runs(tmp_path)[0].info()
    assert info.status is RunStatus.DAMAGED and info.damage == report
    assert info.to_dict()["damage"]["problems"][0]["file"] == rel


def run_status_of(run: Path) -> RunStatus:
    from controller.rundir.reader import run_status

    return run_status(run).status


def test_a_damaged_history_still_shows_the_committed_steps_from_their_records(tmp_path):
    run = finished(tmp_path, "r")
    (run / "history.json").write_text("")
    assert inspect(run).problems[0].problem == "is empty (0 bytes)"
    assert [r.step for r in list_runs(tmp_path)[0].history()] == [1]


def test_folders_that_are_not_runs_are_not_listed_and_wrong_json_types_are_damage(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "readme.txt").write_text("mine")
    run = finished(tmp_path, "r")
    assert [r.name for r in list_runs(tmp_path)] == ["r"] and not is_run_dir(tmp_path / "empty")
    (run / "summary.json").write_text("[1, 2]")
    (damage,) = inspect(run).problems
    assert damage.problem == "holds a JSON list, not a JSON dict"


def test_skillopt_runs_says_damaged_and_why(tmp_path):
    cut(finished(tmp_path, "broken") / "runtime_state.json")
    finished(tmp_path, "fine")
    out = subprocess.run(
        [sys.executable, "-m", "controller.cli", "runs", "--runs-dir", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    rows = {line.split()[0]: line.split()[1] for line in out.splitlines()[1:3]}
    assert rows == {"broken": "damaged", "fine": "finished"}
    assert "broken: damaged: the directory still proves steps 1-1 committed; the run cannot be resumed" in out
    assert "  runtime_state.json is not valid JSON" in out


def test_resuming_a_run_that_cannot_be_resumed_says_why_at_once(tmp_path):
    """No sandbox is started for it, and no "continue with --resume" advice is given."""
    run = finished(tmp_path, "broken")
    cut(run / "runtime_state.json")
    res = subprocess.run(
        [sys.executable, "-m", "controller.cli", "train", "--resume", str(run)],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert "runtime_state.json: is not valid JSON" in res.stderr
    assert "the run cannot be resumed: start a new run" in res.stderr
    assert "--resume" not in res.stderr.replace(f"train --resume {run}", "")
    assert "sandbox" not in res.stderr.lower()
