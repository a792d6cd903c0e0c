"""``skillopt sleep harvest`` end to end, in process, with CLAUDE_CONFIG_DIR and CODEX_HOME
pointed at the corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.cli import main


@pytest.fixture
def homes(corpus, monkeypatch, tmp_path):
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(corpus.claude_dir))
    monkeypatch.setenv("CODEX_HOME", str(corpus.codex_dir))
    monkeypatch.chdir(tmp_path)
    return corpus


def test_harvest_writes_under_the_default_folder_and_says_what_it_did(homes, capsys, tmp_path):
    assert main(["sleep", "harvest"]) == 0
    out = capsys.readouterr().out
    assert "sessions seen: 10" in out and "  harvested: 7" in out
    assert "unknown format version: 3" in out and "written by Codex 9.0.0" in out
    assert "lines skipped (corrupt or cut-off JSON): 2" in out
    assert "secrets redacted: anthropic_key 1, bearer 1" in out  # (the AWS key is in a tool output)
    assert (tmp_path / ".skillopt/sleep/harvest/index.json").is_file()
    assert main(["sleep", "harvest"]) == 0
    again = capsys.readouterr().out
    assert "  harvested: 0" in again and "unchanged since the last harvest: 7" in again


def test_a_dry_run_prints_the_redacted_sessions_and_writes_nothing(homes, capsys, tmp_path):
    assert main(["sleep", "harvest", "--dry-run", "--include-tool-output"]) == 0
    out = capsys.readouterr().out
    assert "--- would harvest" in out and "## Task" in out and "[REDACTED:slack_token]" in out
    assert "would harvest: 7" in out and "nothing written (--dry-run)" in out
    assert all(secret not in out for _, secret in homes.secrets)
    assert not (tmp_path / ".skillopt").exists()


def test_source_since_and_project_narrow_the_harvest(homes, capsys, tmp_path):
    args = ["sleep", "harvest", "--source", "codex", "--since", "2026-12-01", "--out", str(tmp_path / "h")]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "  harvested: 1" in out and "left out by --since: 2" in out
    assert main(["sleep", "harvest", "--project", "/home/dev/api", "--out", str(tmp_path / "p")]) == 0
    assert "  harvested: 2" in capsys.readouterr().out  # cc-correction, cx-abandoned (cc-future: unknown)


def test_one_missing_source_folder_is_a_note(homes, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "nowhere"))
    assert main(["sleep", "harvest"]) == 0
    assert (
        f"note: no codex transcripts: {tmp_path / 'nowhere' / 'sessions'} does not exist"
        in capsys.readouterr().out
    )


def test_no_source_folder_at_all_exits_2_saying_what_to_set(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "x"))
    assert main(["sleep", "harvest", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "no agent session folders found" in err and "set CODEX_HOME" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [("--source", "cursor", "comma-separated list of claude-code, codex"), ("--since", "soon", "30m, 24h")],
)
def test_bad_flags_exit_2_with_the_allowed_values(homes, capsys, flag, value, message):
    assert main(["sleep", "harvest", flag, value]) == 2
    assert message in capsys.readouterr().err


def test_sleep_needs_an_action_and_lists_them(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["sleep"])
    assert exit_.value.code == 2
    assert "required: ACTION" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["sleep", "--help"])
    assert "harvest" in capsys.readouterr().out


def test_the_help_names_the_sources_and_the_folder(capsys):
    with pytest.raises(SystemExit):
        main(["sleep", "harvest", "--help"])
    text = capsys.readouterr().out
    assert "CLAUDE_CONFIG_DIR" in text and "CODEX_HOME" in text and ".skillopt/sleep/harvest" in text
    assert Path("docs/sleep.md").name in text
