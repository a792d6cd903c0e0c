"""Run directories written by every earlier version of the records (``tests/fixtures/rundirs``,
each written by the code of its commit) read whole through today's readers: the runs list,
``skillopt runs``, the run, step, rows and rollout pages, the comparison, the damage check,
and what ``--resume`` and ``eval --run``/``--resume`` read first. An older record reads in its
current shape (migrated on read), never as a damaged file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from controller.cli import parse_args
from controller.commands import eval as eval_command
from controller.rundir.damage import inspect
from controller.rundir.reader import RunDir, RunStatus, list_runs
from controller.rundir.runconfig import recorded_mode, run_config
from controller.webui.compare import compare_runs
from controller.webui.snapshot import run_snapshot
from skillopt.trainer.records import SCHEMA_VERSION
from skillopt.trainer.rundir import layout
from skillopt.types import InfraErrorKind, WorkOutcome
from tests.rundirs import FIXTURES, WRITTEN_BY, copy_run

REPO = Path(__file__).resolve().parents[3]
EVAL = f"{layout.EVALS}/test_best_skill"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """A runs directory holding a copy of every fixture (the readers never write; copied all
    the same, so that no test can change a fixture)."""
    root = tmp_path_factory.mktemp("runs")
    for commit in WRITTEN_BY:
        copy_run(commit, root / commit)
    return root


def test_every_fixture_is_listed_in_the_readme():
    readme = (FIXTURES / "README.md").read_text(encoding="utf-8")
    assert sorted(p.name for p in FIXTURES.iterdir() if p.is_dir()) == sorted(WRITTEN_BY)
    assert all(f"`{commit}/`" in readme for commit in WRITTEN_BY)


@pytest.mark.parametrize("commit", WRITTEN_BY)
def test_a_run_of_every_version_reads_whole(runs, commit):
    run = RunDir(runs / commit)
    assert not inspect(run.path, deep=True)  # every record reads: nothing is damaged
    info = run.info()
    assert (info.status, info.kind, info.env, info.agent) == (RunStatus.FINISHED, "train", "searchqa", "qa")
    assert info.simulated is True and info.mode_reason == "in-process simulation"
    assert (info.steps_done, info.total_steps, info.hosts, info.gate_mode) == (
        4,
        4,
        ("in-process",),
        "strict",
    )
    summary, state = run.summary(), run.state()
    assert summary is not None and state is not None and summary.complete
    assert info.tokens == summary.total_tokens > 0 and info.best_score == state.best_score == 1.0
    assert info.baseline_score == summary.baseline_selection_score == 0.2
    assert [r.step for r in run.history()] == [1, 2, 3, 4]
    # An older step record reads in today's shape: intervals null where none was measured, the
    # gate strict (the only gate there was), the current schema version.
    record = run.step(1)["record"]
    assert record["schema_version"] == SCHEMA_VERSION and record["gate_mode"] == "strict"
    assert "rollout_hard_ci95" in record and record["action"] == "accept_new_best"
    snapshot = run_snapshot(run)
    assert snapshot["summary"]["status"] == "complete" and len(snapshot["history"]) == 4
    assert snapshot["num_epochs"] == 2 and snapshot["live"]["phase"] == "done"
    launch = run.launch()
    assert launch is not None and launch.argv[:3] == ("controller.cli", "train", "--resume")
    mode = recorded_mode(run.path)
    assert mode is not None and mode.simulated and run_config(run.path).env.name == "searchqa"


@pytest.mark.parametrize("commit", WRITTEN_BY)
def test_the_rows_rollouts_and_evaluations_of_every_version_read(runs, commit):
    run = RunDir(runs / commit)
    test = run.eval_summary(layout.TEST_BEST)  # a run's own test evaluation
    assert test is not None and (test.n_items, test.n_scored, test.hard) == (15, 15, 1.0)
    assert sorted(test.categories) == ["answer_1_word", "answer_2_words", "answer_3plus_words"]
    (ev,) = run.evals()  # skillopt eval of the run's best skill
    assert (ev.status, ev.kind, ev.best_score, ev.simulated) == (RunStatus.FINISHED, "eval", 1.0, True)
    rows = run.rows(f"{EVAL}/eval_test")
    infra = [r for r in rows if r.infra_error is not None]
    assert len(rows) == 15 and len(infra) == 1
    # Rows from before outcomes said only "retryable": false, which is final.
    assert infra[0].infra_error is not None and infra[0].infra_error.kind is InfraErrorKind.TIMEOUT
    assert infra[0].infra_error.outcome is WorkOutcome.FINAL and infra[0].schema_version == 1
    summary = run.eval_summary(f"{EVAL}/eval_test")
    assert summary is not None and (summary.n_items, summary.n_infra, summary.n_scored) == (15, 1, 14)
    assert summary.mode is not None and summary.mode.simulated
    first = run.rows("steps/step_0001/rollout")[0]
    found = run.rollout("steps/step_0001/rollout", first.id)
    assert found is not None and found[0].trace.messages and found[0].usage == first.usage


def test_an_eval_of_the_newest_version_resumes_from_its_record(runs):
    """``eval_config.json`` (written first by 341f351) reads back as what ``--resume`` continues."""
    cfg, out = eval_command.load(parse_args(["eval", "--resume", str(runs / "341f351" / EVAL)]))
    assert out == runs / "341f351" / EVAL and cfg.env.name == "searchqa" and cfg.run.simulate == "on"


def test_runs_of_every_version_compare_side_by_side(runs):
    data = compare_runs([RunDir(runs / commit) for commit in WRITTEN_BY])
    assert [r["scores"]["best_selection"] for r in data["runs"]] == [1.0, 1.0, 1.0]
    assert all(len(r["history"]) == 4 for r in data["runs"])
    # Each run shows the config it ran with: a default that changed since (the slow update
    # gated by default from fb6d742 on) differs; a key added since reads as its default.
    rows = {row["key"]: row for row in data["config_rows"]}
    assert rows["optimizer.slow_update_gate_with_selection"]["values"] == ["false", "false", "true"]
    assert rows["optimizer.slow_update_gate_with_selection"]["differs"]
    assert rows["evaluation.gate_mode"]["values"] == ['"strict"'] * 3


def test_skillopt_runs_lists_runs_of_every_version(runs):
    out = subprocess.run(
        [sys.executable, "-m", "controller.cli", "runs", "--runs-dir", str(runs), "--json"],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    lines = [json.loads(line) for line in out.splitlines()]
    assert sorted(line["name"] for line in lines) == sorted(WRITTEN_BY)
    assert {line["status"] for line in lines} == {"finished"}
    assert [line["name"] for line in lines] == [r.name for r in list_runs(runs)]
