"""Staging a proposal, its status, adopting and reverting it, through the API (files only)."""

from __future__ import annotations

import json
import os

import pytest

from skillopt.errors import AdoptFailed, LiveSkillChanged, ProposalRejected, SkillError, SleepError
from skillopt.skill.package import load_skill
from skillopt.sleep import adopt as adopt_module
from skillopt.sleep import staging as staging_module
from skillopt.sleep.adopt import adopt, pick_proposals, plan_adoption, revert
from skillopt.sleep.proposal import Receipt, Score, StagingManifest
from skillopt.sleep.staging import proposal_states, sleep_dir, staged_proposals
from tests.skillopt.sleep.stage_helpers import (
    NAME,
    T0,
    evidence,
    live_dir,
    project,
    snapshot,
    stage,
    write_skill,
)


def test_stage_writes_the_package_a_manifest_with_hashes_and_a_report(tmp_path):
    root = project(tmp_path)
    live = load_skill(live_dir(root))
    staged = stage(root, tmp_path)
    assert staged.folder == sleep_dir(root) / "staging" / "20261207T120000Z"
    manifest = StagingManifest.model_validate_json((staged.folder / "manifest.json").read_bytes())
    proposal = load_skill(tmp_path / "run/best_skill" / NAME)
    assert manifest.schema_version == 1 and manifest.skill_name == NAME
    assert manifest.proposal_tree_sha256 == proposal.tree_sha256 == load_skill(staged.package_dir).tree_sha256
    assert manifest.live.tree_sha256 == live.tree_sha256
    assert (manifest.live.harness, manifest.live.scope) == ("claude-code", "project")
    assert manifest.live.path == str(live_dir(root).absolute())
    assert manifest.evidence.session_ids == ("s-1", "s-2") and manifest.created_at == T0
    report = (staged.folder / "REPORT.md").read_text()
    assert "2 changed, 0 added, 0 removed" in report
    assert "+Read the failure." in report and "-print('v1')" in report and "+print('v2')" in report
    assert "0.500 [0.300, 0.700] (n=20)" in report and "0.750 [0.530, 0.890] (n=20)" in report
    assert "accept_new_best (paired test p=0.01)" in report and "| t1 | 1.000 | 1.000 | no |" in report
    assert report.index("## What changes") < report.index("## Evidence")
    assert not [p for p in staged.folder.parent.iterdir() if p.name.startswith(".")]


def test_a_proposal_the_gate_rejected_or_that_regressed_is_never_staged(tmp_path):
    root = project(tmp_path)
    with pytest.raises(ProposalRejected, match="the gate rejected the proposal"):
        stage(root, tmp_path, ev=evidence(action="reject"))
    with pytest.raises(ProposalRejected, match="1 task\\(s\\) regressed, 0 allowed \\(t1\\)"):
        stage(root, tmp_path, ev=evidence(regressed=True))
    assert not (sleep_dir(root) / "staging").exists() or not any((sleep_dir(root) / "staging").iterdir())


def test_a_half_written_staging_folder_is_not_listed(tmp_path, log_events):
    root = project(tmp_path)
    stage(root, tmp_path)
    (sleep_dir(root) / "staging" / ".20261207T130000Z.abc").mkdir()  # a crash mid-staging
    (sleep_dir(root) / "staging" / "20261207T140000Z").mkdir()  # no manifest
    assert [s.folder.name for s in staged_proposals(root)] == ["20261207T120000Z"]
    assert [
        e["folder"].rsplit("/", 1)[-1] for e in log_events if e["event"] == "sleep.staging_unreadable"
    ] == ["20261207T140000Z"]


def test_a_crash_while_staging_leaves_nothing_that_looks_staged(tmp_path, monkeypatch):
    root = project(tmp_path)

    def crash(path, text, **_):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(staging_module, "atomic_write_text", crash)
    with pytest.raises(OSError, match="No space"):
        stage(root, tmp_path)
    assert list((sleep_dir(root) / "staging").iterdir()) == []
    assert staged_proposals(root) == []


def test_status_says_pending_then_stale_when_the_live_skill_changes(tmp_path):
    root = project(tmp_path)
    stage(root, tmp_path)
    stage(root, tmp_path, when=T0.replace(hour=13))
    assert [(s.staged.folder.name, s.state) for s in proposal_states(root)] == [
        ("20261207T130000Z", "pending"),
        ("20261207T120000Z", "pending"),
    ]
    (live_dir(root) / "SKILL.md").write_text("---\nname: fix-tests\ndescription: x\n---\nedited by hand\n")
    assert {s.state for s in proposal_states(root)} == {"stale"}


def test_adopt_backs_up_installs_checks_the_hash_and_writes_a_receipt(tmp_path):
    root = project(tmp_path)
    before = snapshot(live_dir(root))
    staged = stage(root, tmp_path)
    receipt_path, receipt = adopt(plan_adoption(root, staged))
    installed = load_skill(live_dir(root))
    assert installed.tree_sha256 == staged.manifest.proposal_tree_sha256 == receipt.after_sha256
    assert receipt.before_sha256 == staged.manifest.live.tree_sha256
    assert receipt_path.parent == sleep_dir(root) / "receipts" and receipt_path.name.endswith(f"-{NAME}.json")
    assert Receipt.model_validate_json(receipt_path.read_bytes()) == receipt
    assert snapshot(tmp_path / receipt.backup) == before if receipt.backup else False
    assert [s.state for s in proposal_states(root)] == ["adopted"]
    with pytest.raises(SleepError, match="no staged proposal"):
        pick_proposals(root)


def test_adopt_refuses_when_the_live_skill_changed_since_staging(tmp_path):
    root = project(tmp_path)
    staged = stage(root, tmp_path)
    write_skill(live_dir(root), "someone else's edit")
    edited = snapshot(live_dir(root))
    with pytest.raises(
        LiveSkillChanged, match=r"changed since fix-tests was staged.*Re-run skillopt sleep run"
    ):
        plan_adoption(root, staged)
    assert snapshot(live_dir(root)) == edited


def test_a_failure_mid_install_puts_the_live_skill_back(tmp_path, monkeypatch):
    root = project(tmp_path)
    before = snapshot(live_dir(root))
    plan = plan_adoption(root, stage(root, tmp_path))

    real_install, calls = adopt_module.install_skill, []

    def broken_install(spec, parent, *, force=False):  # fails once, half-way: the disk filled up
        calls.append(spec.tree_sha256)
        if len(calls) > 1:
            return real_install(spec, parent, force=force)
        (parent / spec.name / "SKILL.md").write_text("half written")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(adopt_module, "install_skill", broken_install)
    with pytest.raises(AdoptFailed, match=r"No space left.*put back from .*backups") as info:
        adopt(plan)
    assert info.value.restored
    monkeypatch.undo()
    assert snapshot(live_dir(root)) == before
    assert not (sleep_dir(root) / "receipts").exists()
    assert [s.state for s in proposal_states(root)] == ["pending"]


def test_a_failed_receipt_write_undoes_the_install(tmp_path, monkeypatch):
    root = project(tmp_path)
    before = snapshot(live_dir(root))
    plan = plan_adoption(root, stage(root, tmp_path))
    monkeypatch.setattr(
        adopt_module, "_write_receipt", lambda path, receipt: (_ for _ in ()).throw(OSError("disk"))
    )
    with pytest.raises(AdoptFailed, match="put back"):
        adopt(plan)
    assert snapshot(live_dir(root)) == before


def test_revert_restores_the_live_skill_byte_for_byte_and_marks_the_proposal(tmp_path):
    root = project(tmp_path)
    before = snapshot(live_dir(root))
    receipt_path, _ = adopt(plan_adoption(root, stage(root, tmp_path)))
    assert snapshot(live_dir(root)) != before
    path, receipt = revert(root, receipt_path)
    assert snapshot(live_dir(root)) == before
    assert (
        receipt.kind == "revert"
        and receipt.reverts == receipt_path.name
        and path.name.endswith("-revert.json")
    )
    assert [s.state for s in proposal_states(root)] == ["reverted"]
    with pytest.raises(SleepError, match="reverted already"):
        revert(root, receipt_path)


def test_revert_refuses_after_a_change_unless_forced(tmp_path):
    root = project(tmp_path)
    before = snapshot(live_dir(root))
    receipt_path, _ = adopt(plan_adoption(root, stage(root, tmp_path)))
    write_skill(live_dir(root), "edited after the adoption")
    with pytest.raises(LiveSkillChanged, match="--force reverts anyway"):
        revert(root, receipt_path)
    assert "edited after the adoption" in (live_dir(root) / "SKILL.md").read_text()
    _, receipt = revert(root, receipt_path, force=True)
    assert snapshot(live_dir(root)) == before
    assert (
        receipt.backup and "edited after the adoption" in (tmp_path / receipt.backup / "SKILL.md").read_text()
    )


def test_adopting_where_nothing_was_installed_and_reverting_removes_it(tmp_path):
    root = project(tmp_path)
    for p in sorted(live_dir(root).rglob("*"), reverse=True):
        p.rmdir() if p.is_dir() else p.unlink()
    live_dir(root).rmdir()
    staged = stage(root, tmp_path)
    assert staged.manifest.live.tree_sha256 is None
    assert "There is no live skill" in (staged.folder / "REPORT.md").read_text()
    receipt_path, receipt = adopt(plan_adoption(root, staged))
    assert receipt.backup is None and receipt.before_sha256 is None
    assert load_skill(live_dir(root)).tree_sha256 == staged.manifest.proposal_tree_sha256
    revert(root, receipt_path)
    assert not live_dir(root).exists()
    assert sorted(os.listdir(live_dir(root).parent)) == []


def test_a_staged_package_changed_after_staging_is_not_adopted(tmp_path):
    root = project(tmp_path)
    staged = stage(root, tmp_path)
    (staged.package_dir / "SKILL.md").write_text("---\nname: fix-tests\ndescription: x\n---\ntampered\n")
    with pytest.raises(SleepError, match="changed after staging"):
        plan_adoption(root, staged)


def test_pick_proposals_asks_which_skill_when_several_are_staged(tmp_path):
    root = project(tmp_path)
    stage(root, tmp_path)
    manifest_path = staged_proposals(root)[0].folder / "manifest.json"
    other = json.loads(manifest_path.read_text())
    other["skill_name"] = "other-skill"
    (root / ".skillopt/sleep/staging/20261207T150000Z").mkdir()
    (root / ".skillopt/sleep/staging/20261207T150000Z/manifest.json").write_text(json.dumps(other))
    with pytest.raises(SleepError, match="--skill NAME, or adopt them all with --all"):
        pick_proposals(root)
    assert [s.manifest.skill_name for s in pick_proposals(root, skill=NAME)] == [NAME]
    assert len(pick_proposals(root, every=True)) == 2


def test_an_invalid_proposal_is_refused_with_its_problems(tmp_path):
    root = project(tmp_path)
    (tmp_path / "run/best_skill" / NAME / "SKILL.md").write_text("no front matter")
    with pytest.raises(SkillError):
        stage(root, tmp_path)


def test_a_score_is_built_from_per_task_values_with_its_interval():
    score = Score.of([1, 0, 1, 1])
    assert (score.mean, score.n) == (0.75, 4) and 0.0 < score.low < 0.75 < score.high <= 1.0
    with pytest.raises(ValueError, match="at least one"):
        Score.of([])


def test_revert_refuses_when_the_installed_folder_is_no_package_even_forced(tmp_path):
    root = project(tmp_path)
    receipt_path, _ = adopt(plan_adoption(root, stage(root, tmp_path)))
    (live_dir(root) / "SKILL.md").write_text("no front matter")
    with pytest.raises(LiveSkillChanged, match="not a valid skill package now"):
        revert(root, receipt_path, force=True)
    assert (live_dir(root) / "SKILL.md").read_text() == "no front matter"
