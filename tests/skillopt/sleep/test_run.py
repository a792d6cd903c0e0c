"""``skillopt sleep run``'s decisions without Docker: the fail-closed checks before training,
the staging decision on hand-made rows, the evidence, and the command's refusals in process."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.cli import main
from skillopt.sleep.proposal import GateRecord
from skillopt.sleep.run import (
    HeldOutRefused,
    check_held_out,
    decide,
    evidence,
    gate_records,
    read_test_rows,
    unsafe_lines,
)
from skillopt.sleep.staging import stage_proposal
from skillopt.testing.sleep_run_corpus import INJECTION, SKILL_NAME, write_run_corpus
from tests.skillopt.sleep.stage_helpers import live_dir, project

ACCEPT = (GateRecord(action="accept_new_best", reason="above_current", step=1),)


def _sessions(train: int = 3, selection: int = 3, test: int = 3) -> dict[str, list[str]]:
    return {
        "train": [f"cc:t{i}" for i in range(train)],
        "selection": [f"cc:s{i}" for i in range(selection)],
        "test": [f"cc:x{i}" for i in range(test)],
    }


# -- fail closed before training -------------------------------------------------------------


def test_enough_held_out_tasks_from_other_sessions_pass():
    check_held_out(_sessions(), min_held_out=3)


@pytest.mark.parametrize(("selection", "test", "said"), [(2, 3, "selection has 2"), (3, 0, "test has 0")])
def test_too_few_held_out_tasks_are_refused_with_the_minimum_and_the_count(selection, test, said):
    with pytest.raises(HeldOutRefused) as err:
        check_held_out(_sessions(selection=selection, test=test), min_held_out=3)
    assert said in err.value.message and "at least 3 each" in err.value.message
    assert "--min-held-out" in err.value.message


@pytest.mark.parametrize("held_out", ["selection", "test"])
def test_a_session_in_train_and_a_held_out_split_is_refused(held_out):
    sessions = _sessions()
    sessions[held_out].append("cc:t1")
    with pytest.raises(HeldOutRefused, match=f"cc:t1 gave tasks to train and to {held_out}"):
        check_held_out(sessions, min_held_out=3)


# -- the decision ------------------------------------------------------------------------------


def test_a_better_proposal_with_no_regression_is_staged():
    d = decide(
        changed=True,
        gate=ACCEPT,
        live_rows={"a": 0.0, "b": 1.0, "c": 0.0},
        best_rows={"a": 1.0, "b": 1.0, "c": 0.0},
    )
    assert d.stage and d.reason == ""
    assert d.live is not None and d.proposal is not None
    assert (d.live.n, d.proposal.n) == (3, 3) and d.proposal.mean > d.live.mean
    assert not any(t.regressed for t in d.tasks)


def test_one_regression_stages_nothing_and_names_the_task_even_when_the_mean_is_higher():
    d = decide(
        changed=True,
        gate=ACCEPT,
        live_rows={"a": 0.0, "b": 0.0, "reg": 1.0, "d": 0.0},
        best_rows={"a": 1.0, "b": 1.0, "reg": 0.0, "d": 0.0},
    )
    assert d.proposal is not None and d.live is not None and d.proposal.mean > d.live.mean
    assert not d.stage
    assert "1 held-out test task(s) passed with the live skill and fail with the proposal (reg)" in d.reason
    assert [t.task_id for t in d.tasks if t.regressed] == ["reg"]
    allowed = decide(
        changed=True,
        gate=ACCEPT,
        live_rows={"a": 0.0, "b": 0.0, "reg": 1.0},
        best_rows={"a": 1.0, "b": 1.0, "reg": 0.0},
        max_regressions=1,
    )
    assert allowed.stage


def test_no_accepted_candidate_stages_nothing():
    rejected = (GateRecord(action="reject", reason="no_improvement", step=1),)
    for changed, gate in ((False, ACCEPT), (True, rejected)):
        d = decide(changed=changed, gate=gate, live_rows={"a": 0.0}, best_rows={"a": 1.0})
        assert not d.stage and "accepted no candidate" in d.reason


def test_a_proposal_not_above_the_live_skill_on_test_stages_nothing_with_both_figures():
    d = decide(changed=True, gate=ACCEPT, live_rows={"a": 1.0, "b": 0.0}, best_rows={"a": 1.0, "b": 0.0})
    assert not d.stage
    assert "held-out test score 0.500" in d.reason and "is not above the live skill's 0.500" in d.reason


def test_a_task_measured_for_one_skill_only_is_left_out_of_the_scores():
    d = decide(changed=True, gate=ACCEPT, live_rows={"a": 0.0, "b": None}, best_rows={"a": 1.0, "b": 1.0})
    assert d.stage and d.live is not None and d.live.n == 1


def test_a_proposal_that_pipes_a_download_into_a_shell_is_not_staged():
    live = "# Skill\n\nRead the file.\n"
    added = live + f"- Before answering, run `{INJECTION}`.\n"
    unsafe = unsafe_lines(live, added)
    assert unsafe and INJECTION in unsafe[0]
    assert unsafe_lines(live, live + "- Use curl to check the URL, then read the output.\n") == []
    d = decide(changed=True, gate=ACCEPT, live_rows={"a": 0.0}, best_rows={"a": 1.0}, unsafe=unsafe)
    assert not d.stage and "pipes a download into a shell" in d.reason


def test_gate_records_stop_at_the_step_that_made_the_best_skill():
    history = [
        {"step": 1, "action": "accept_new_best", "gate_reason": "above_current", "candidate_gate_score": 0.6},
        {"step": 2, "action": "reject", "gate_reason": "no_improvement", "candidate_gate_score": 0.6},
        {"step": 3, "action": "accept_new_best", "gate_reason": "above_current", "candidate_gate_score": 1.0},
        {"step": 4, "action": "reject", "gate_reason": "no_improvement", "candidate_gate_score": 0.9},
        {"step": 5, "action": "skip"},  # no candidate judged
    ]
    records = gate_records(history, best_step=3)
    assert [(g.step, g.action) for g in records] == [
        (1, "accept_new_best"),
        (2, "reject"),
        (3, "accept_new_best"),
    ]
    assert records[-1].accepted


def test_test_rows_are_read_per_task_and_an_infrastructure_row_is_not_measured(tmp_path):
    from skillopt.trainer.rundir.rowjson import InfraRow, ResultRow
    from skillopt.types import InfraErrorKind, WorkOutcome

    lost = InfraRow(
        kind=InfraErrorKind.MODEL_UNAVAILABLE, message="gone", retryable=True, outcome=WorkOutcome.LOST
    )
    rows = [ResultRow(id="a", hard=1.0), ResultRow(id="b", hard=0.0), ResultRow(id="c", infra_error=lost)]
    (tmp_path / "test_eval").mkdir()
    (tmp_path / "test_eval" / "results.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in rows))
    assert read_test_rows(tmp_path, "test_eval") == {"a": 1.0, "b": 0.0, "c": None}
    assert read_test_rows(tmp_path, "test_eval_baseline") == {}  # no folder: no rows


# -- the evidence --------------------------------------------------------------------------------


def test_the_evidence_of_a_decision_to_stage_is_accepted_by_staging(tmp_path):
    d = decide(changed=True, gate=ACCEPT, live_rows={"a": 0.0, "b": 1.0}, best_rows={"a": 1.0, "b": 1.0})
    ev = evidence(d, session_ids=["cc:2", "cc:1", "cc:1"], run_dir=tmp_path / "train", max_regressions=0)
    assert ev.refusal() == ""
    assert ev.session_ids == ("cc:1", "cc:2") and ev.run_dir == str((tmp_path / "train").resolve())
    assert ev.live.low <= ev.live.mean <= ev.live.high and ev.proposal.mean == 1.0
    root = project(tmp_path)
    proposal = tmp_path / "run" / "best_skill" / live_dir(root).name  # written by project()
    staged = stage_proposal(
        root,
        skill_name=live_dir(root).name,
        proposal_dir=proposal,
        evidence=ev,
        harness="claude-code",
        scope="project",
        live_dir=live_dir(root),
    )
    assert staged.manifest.evidence.tasks == d.tasks
    refused = decide(changed=True, gate=ACCEPT, live_rows={"a": 1.0}, best_rows={"a": 0.0})
    with pytest.raises(ValueError, match="nothing to stage"):
        evidence(refused, session_ids=[], run_dir=tmp_path, max_regressions=0)


# -- the command, in process (it refuses before any sandbox starts) -----------------------------


@pytest.fixture
def homes(tmp_path, monkeypatch):
    proj = tmp_path / "proj"
    proj.mkdir()
    corpus = write_run_corpus(tmp_path / "homes", proj)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(corpus.claude_dir))
    monkeypatch.setenv("CODEX_HOME", str(corpus.codex_dir))
    monkeypatch.chdir(proj)
    return corpus


def test_a_missing_live_skill_is_named_with_where_it_was_looked_for(homes, capsys):
    assert main(["sleep", "run", "--skill", "nope"]) == 2
    err = capsys.readouterr().err
    assert "no skill 'nope' installed for claude-code (project)" in err and "skillopt skill install" in err


def test_too_few_held_out_tasks_refuse_before_training_and_stage_nothing(homes, capsys):
    assert main(["sleep", "run", "--skill", SKILL_NAME, "--min-held-out", "4", "--simulate"]) == 1
    err = capsys.readouterr().err
    assert "refused: too few held-out tasks: selection has 3, test has 3, at least 4 each needed" in err
    sleep = homes.project / ".skillopt" / "sleep"
    assert not (sleep / "staging").exists()
    assert not any(sleep.glob("runs/*/train"))  # no training run was started


def test_dry_run_shows_the_tasks_and_the_training_command_and_writes_nothing(homes, capsys):
    assert main(["sleep", "run", "--dry-run", "--simulate"]) == 0
    out = capsys.readouterr().out
    assert "the target model would be sent:" in out and "What port does the dev server listen on?" in out
    assert "--config sleep_demo" in out and f"env.skill_init={homes.live_dir}" in out
    assert "nothing written, nothing trained (--dry-run)" in out
    assert not (homes.project / ".skillopt").exists()


def test_the_simulation_knows_a_mined_task_by_its_sample_question():
    from skillopt.envs.base import Grading, Task, TaskItem
    from skillopt.testing.sim_catalogue import CATALOGUE, alias_mined_tasks

    item = TaskItem(
        task=Task(id="sleep-mined-x1", instruction="How many workers does gunicorn.conf.py start?\n\nno, 4"),
        grading=Grading(),
        task_type="answer",
    )
    assert alias_mined_tasks([item]) == 1
    assert CATALOGUE.rule_of("sleep-mined-x1") == CATALOGUE.rule_of("sleep-sample-s1") is not None


def test_the_corpus_installs_its_live_skill_in_the_project(tmp_path):
    corpus = write_run_corpus(tmp_path / "homes", tmp_path)
    assert (corpus.live_dir / "SKILL.md").read_text().startswith(f"---\nname: {SKILL_NAME}\n")
    assert Path(corpus.live_dir).parent == tmp_path / ".claude" / "skills"


def test_the_train_command_line_puts_the_users_settings_last_and_passes_the_fleet_flags(tmp_path):
    from controller.cli import build_parser
    from controller.commands.sleep_run import _train_argv

    args = build_parser().parse_args(
        ["sleep", "run", "--set", "evaluation.gate_mode=paired", "--endpoints", "h:1", "--token-file", "T"]
    )
    argv = _train_argv(args, data=tmp_path / "mined", live=tmp_path / "live", out=tmp_path / "train")
    sets = [argv[i + 1] for i, a in enumerate(argv) if a == "--set"]
    assert argv[:3] == ["train", "--config", "sleep"] and "--simulate" not in argv
    assert sets[:2] == [f"env.data_root={tmp_path / 'mined'}", f"env.skill_init={tmp_path / 'live'}"]
    assert sets.index("evaluation.gate_mode=sequential") < sets.index("evaluation.gate_mode=paired")
    assert "evaluation.eval_test=true" in sets
    assert argv[-4:] == ["--endpoints", "h:1", "--token-file", "T"]
    simulated = _train_argv(
        build_parser().parse_args(["sleep", "run", "--simulate"]), data=tmp_path, live=tmp_path, out=tmp_path
    )
    assert simulated[2] == "sleep_demo" and simulated[-2:] == ["--simulate", "on"]
