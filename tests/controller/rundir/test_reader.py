"""The run-directory reader on hand-made directories in the trainer's layout, and
``skillopt runs`` over it (the same reader the WebUI uses)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

from controller.rundir.reader import RunDir, diff_lines, list_runs
from skillopt.trainer import StepRecord
from tests.rundirs import step_json

REPO = Path(__file__).resolve().parents[3]


def make_run(root: Path, name: str = "r") -> RunDir:
    run = root / name
    (run / "skills").mkdir(parents=True)
    (run / "steps/step_0001/rollout").mkdir(parents=True)
    (run / "config.json").write_text(
        json.dumps(
            {
                "env": {"name": "spreadsheetbench", "agent": "react"},
                "model": {"optimizer": "o", "target": "t", "prices": {"*": {"input": 1.0, "output": 2.0}}},
                "train": {"num_epochs": 1},
                "derived": {"total_steps": 2, "mode": {"simulated": False, "reason": "keys"}},
            }
        )
    )
    (run / "runtime_state.json").write_text(
        json.dumps(
            {
                "last_completed_step": 1,
                "best_score": 0.5,
                "hosts": ["h1"],
                "usage": {"analyst": {"calls": 1, "prompt_tokens": 1_000_000, "completion_tokens": 0}},
                "target_usage": {
                    "target_train": {"calls": 2, "prompt_tokens": 0, "completion_tokens": 500_000}
                },
            }
        )
    )
    (run / "history.json").write_text(json.dumps([step_json(1), step_json(2)]))
    for n, text in enumerate(["# a\nkeep\nold\n", "# a\nkeep\nnew\nmore\n"]):
        (run / f"skills/skill_v{n:04d}.md").write_text(text)
    (run / "steps/step_0001/candidate_skill.md").write_text("# a\n")
    (run / "best_skill.md").write_text("# a\n")
    rows = [{"id": "x", "hard": 1.0}, {"id": "y", "hard": 0.0}, {"id": "x", "hard": 0.0}]
    (run / "steps/step_0001/rollout/results.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows) + '{"id": "z", "ha'  # a torn last line
    )
    return RunDir(run)


def test_a_run_reads_as_the_trainer_wrote_it(tmp_path):
    run = make_run(tmp_path)
    info = run.info()
    assert (info.env, info.agent, info.optimizer, info.target) == ("spreadsheetbench", "react", "o", "t")
    assert info.simulated is False and info.best_score == 0.5 and info.hosts == ("h1",)
    assert (info.steps_done, info.total_steps) == (1, 2)
    # Tokens from the run state, cost from the config's prices (no summary yet).
    assert info.tokens == 1_500_000 and info.cost_usd == 2.0
    assert [r.step for r in run.history()] == [1]  # an uncommitted record is not history
    assert [r.id for r in run.rows("steps/step_0001/rollout")] == ["x", "y"]  # first wins, torn skipped
    labels = [label for label, _ in run.skill_versions()]
    assert labels == ["v0 (initial)", "v1 (after step 1)", "step 1 candidate", "best"]
    assert run.rollout_dirs() == ["steps/step_0001/rollout"]


def test_paths_outside_the_run_are_refused(tmp_path):
    run = make_run(tmp_path / "runs")
    (tmp_path / "outside.txt").write_text("secret")
    (run.path / "link").symlink_to(tmp_path)
    for rel in ("../outside.txt", "/etc/passwd", "link/outside.txt", ".lock", "skills/../../outside.txt", ""):
        assert run.resolve(rel) is None, rel
    assert run.resolve("skills/skill_v0000.md") == (run.path / "skills/skill_v0000.md").resolve()


def test_a_line_diff_with_context():
    diff = diff_lines("a\nb\nc\nd\ne\nf\ng\nh\n", "a\nb\nc\nD\ne\nf\ng\nh\nI\n", context=1)
    assert [(d.kind, d.text) for d in diff] == [
        ("same", "c"), ("del", "d"), ("add", "D"), ("same", "e"), ("gap", "…"), ("same", "h"), ("add", "I"),
    ]  # fmt: skip
    assert diff[1].old_no == 4 and diff[2].new_no == 4
    assert diff_lines("same\n", "same\n") == []


def test_skillopt_runs_lists_what_the_webui_lists(tmp_path):
    make_run(tmp_path, "one")
    (tmp_path / "not_a_run").mkdir()
    assert [r.name for r in list_runs(tmp_path)] == ["one"]
    out = subprocess.run(
        [sys.executable, "-m", "controller.cli", "runs", "--runs-dir", str(tmp_path), "--json"],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    (line,) = out.splitlines()
    assert json.loads(line) | {"path": ""} == list_runs(tmp_path)[0].info().to_dict() | {"path": ""}
    table = subprocess.run(
        [sys.executable, "-m", "controller.cli", "runs", "--runs-dir", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    assert "one" in table and "failed" in table and "real" in table  # no lock, no summary: failed
    stop = subprocess.run(
        [sys.executable, "-m", "controller.cli", "runs", "stop", str(tmp_path / "one")],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert stop.returncode == 1 and "nothing runs" in stop.stderr


def test_a_steps_spend_counts_the_optimizer_and_the_targets_rows(tmp_path):
    run = make_run(tmp_path)
    rows = [
        {"id": "a", "hard": 1.0, "usage": {"calls": 2, "prompt_tokens": 1000, "completion_tokens": 100}},
        {"id": "b", "hard": 0.0, "usage": {"calls": 1, "prompt_tokens": 500, "completion_tokens": 50, "cached_input_tokens": 400}},
    ]  # fmt: skip
    sel = run.path / "steps/step_0001/selection"
    sel.mkdir()
    (sel / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    record = StepRecord.from_json(
        step_json(1, tokens={"analyst": {"calls": 1, "prompt_tokens": 2000, "completion_tokens": 200}})
    )
    spend = run.step_spend(record)
    assert spend["optimizer_tokens"] == 2200 and spend["target_tokens"] == 1650
    # make_run's prices: "*" at $1 in and $2 out per million (cached input at the input price).
    assert spend["cost_usd"] == round((2000 + 200 * 2 + 1500 + 150 * 2) / 1e6, 6)


def test_an_evaluation_reads_the_same_from_either_summary_of_any_version(tmp_path):
    from skillopt.trainer.rundir import CategoryScore, EvalSummary

    run = make_run(tmp_path)
    new = EvalSummary(
        split="test",
        skill="best_skill.md",
        n_items=3,
        n_scored=2,
        n_infra=1,
        hard=0.5,
        soft=0.75,
        hard_ci95=(0.1, 0.9),
        soft_ci95=(0.4, 1.0),
        categories={"easy": CategoryScore(total=1, hard=1.0, hard_ci95=(0.2, 1.0))},
        env={"name": "searchqa", "agent": "qa", "options": {}},
    )
    old_test = {  # a run's test summary before it was skillopt eval's too
        "easy": {"total": 1, "hard_acc": 1.0, "hard_acc_ci95": [0.2, 1.0]},
        "overall": {"total": 2, "hard_acc": 0.5, "hard_acc_ci95": [0.1, 0.9]},
        **{
            k: v
            for k, v in new.to_json().items()
            if k in ("hard", "hard_ci95", "soft", "soft_ci95", "n_infra")
        },
        "n": 2,
        "env_options": {},
    }
    seen = []
    for rel, name, data in (
        ("test_eval", "summary.json", {**new.legacy_json(), **new.to_json()}),
        ("test_eval_baseline", "summary.json", old_test),
        ("evals/e1/eval_test", "../eval_summary.json", new.to_json()),  # an eval dir: beside it
    ):
        (run.path / rel).mkdir(parents=True)
        (run.path / rel / name).write_text(json.dumps(data))
        seen.append(run.eval_summary(rel))
    first = seen[0]
    assert first is not None and first.n_items == 3 and first.n_infra == 1 and first.hard_ci95 == (0.1, 0.9)
    assert first.categories == {"easy": CategoryScore(total=1, hard=1.0, hard_ci95=(0.2, 1.0))}
    for other in seen[1:]:
        assert other is not None
        # The old test summary named only the env's options.
        assert dataclasses.replace(other, skill=first.skill, split=first.split, env=first.env) == first
    assert run.eval_summary("steps/step_0001/rollout") is None  # a training batch has none


def test_skillopt_runs_names_the_package_files_accepted_steps_changed(tmp_path):
    run = make_run(tmp_path, "pkg")
    changed = {"path": "SKILL.md", "status": "changed"}
    history = [
        step_json(1, proposal={"file_changes": (changed, {"path": "references/a.md", "status": "added"})}),
        step_json(
            2, action="reject", proposal={"file_changes": ({"path": "scripts/h.py", "status": "added"},)}
        ),
        step_json(
            3,
            action="accept_new_best",
            proposal={"file_changes": ({"path": "references/a.md", "status": "removed"},)},
        ),
    ]
    (run.path / "history.json").write_text(json.dumps(history))
    (run.path / "runtime_state.json").write_text(json.dumps({"last_completed_step": 3}))
    # A rejected step changed nothing; an accepted file's last change wins.
    assert run.info().files_changed == ("~SKILL.md", "-references/a.md")
    table = subprocess.run(
        [sys.executable, "-m", "controller.cli", "runs", "--runs-dir", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    assert "pkg: package files changed by accepted steps: ~SKILL.md -references/a.md" in table
