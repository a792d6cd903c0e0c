"""``skillopt sleep status`` / ``adopt`` / ``revert`` in process, with HOME and the project in
tmp_path (nothing touches the real home)."""

from __future__ import annotations

import json

import pytest

from controller.cli import main
from skillopt.skill.install import skills_root
from skillopt.skill.package import load_skill
from skillopt.sleep.proposal import Receipt
from skillopt.sleep.staging import sleep_dir, stage_proposal
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


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    root = project(tmp_path)
    monkeypatch.chdir(root)
    return root


def test_adopt_with_nothing_staged_says_how_to_stage_one(root, capsys):
    assert main(["sleep", "adopt"]) == 2
    err = capsys.readouterr().err
    assert "no staged proposal waiting to be adopted: skillopt sleep run stages one" in err
    assert main(["sleep", "status"]) == 0
    assert "no proposals staged" in capsys.readouterr().out


def test_status_adopt_and_revert_end_to_end(root, tmp_path, capsys):
    before = snapshot(live_dir(root))
    stage(root, tmp_path)
    assert main(["sleep", "status"]) == 0
    out = capsys.readouterr().out
    assert (
        NAME in out
        and "0.500 [0.300, 0.700] (n=20) -> 0.750 [0.530, 0.890] (n=20)" in out
        and "pending" in out
    )

    assert main(["sleep", "adopt", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would adopt fix-tests" in out and "nothing changed (--dry-run)" in out and "2 changed" in out
    assert snapshot(live_dir(root)) == before
    assert not (sleep_dir(root) / "receipts").exists() and not (sleep_dir(root) / "backups").exists()

    assert main(["sleep", "adopt", "--skill", NAME]) == 0
    out = capsys.readouterr().out
    assert "adopted fix-tests" in out and "undo with: skillopt sleep revert" in out
    receipt_path = next((sleep_dir(root) / "receipts").glob("*.json"))
    receipt = Receipt.model_validate_json(receipt_path.read_bytes())
    assert load_skill(live_dir(root)).tree_sha256 == receipt.after_sha256

    staged_folder = str(sleep_dir(root) / "staging/20261207T120000Z")
    assert main(["sleep", "adopt", "--staging", staged_folder]) == 2
    assert "is adopted already" in capsys.readouterr().err

    assert main(["sleep", "status", "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)["proposals"]
    assert row["state"] == "adopted" and row["skill"] == NAME and row["receipt"] == str(receipt_path)
    assert row["live_score"]["mean"] == 0.5 and row["proposal_score"]["high"] == 0.89

    assert main(["sleep", "revert", str(receipt_path)]) == 0
    assert "reverted fix-tests" in capsys.readouterr().out
    assert snapshot(live_dir(root)) == before
    assert main(["sleep", "status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["proposals"][0]["state"] == "reverted"


def test_adopt_refuses_a_stale_proposal_and_revert_a_changed_skill(root, tmp_path, capsys):
    stage(root, tmp_path)
    write_skill(live_dir(root), "changed by hand")
    assert main(["sleep", "status"]) == 0
    assert "stale" in capsys.readouterr().out
    assert main(["sleep", "adopt"]) == 1
    assert "Re-run skillopt sleep run" in capsys.readouterr().err
    assert "changed by hand" in (live_dir(root) / "SKILL.md").read_text()

    stage(root, tmp_path, when=T0.replace(hour=14))
    assert main(["sleep", "adopt", "--all"]) == 0
    receipt_path = next((sleep_dir(root) / "receipts").glob("*.json"))
    write_skill(live_dir(root), "changed after adoption")
    capsys.readouterr()
    assert main(["sleep", "revert", str(receipt_path)]) == 1
    assert "--force reverts anyway" in capsys.readouterr().err
    assert main(["sleep", "revert", str(receipt_path), "--force"]) == 0
    assert "changed by hand" in (live_dir(root) / "SKILL.md").read_text()


def test_adopt_installs_a_user_scope_skill_under_the_tmp_home(root, tmp_path, capsys):
    user_dir = skills_root("codex", "user", root) / NAME
    assert str(user_dir).startswith(str(tmp_path / "home"))
    stage_proposal(
        root,
        skill_name=NAME,
        proposal_dir=tmp_path / "run/best_skill" / NAME,
        evidence=evidence(),
        harness="codex",
        scope="user",
        live_dir=user_dir,
        now=T0,
    )
    assert main(["sleep", "adopt", "--staging", str(sleep_dir(root) / "staging/20261207T120000Z")]) == 0
    assert (user_dir / "SKILL.md").is_file()
    assert "backup  none (nothing installed there yet)" in capsys.readouterr().out


def test_revert_of_a_missing_receipt_is_a_usage_error(root, capsys):
    assert main(["sleep", "revert", "nope.json"]) == 2
    assert "not a readable receipt" in capsys.readouterr().err
