"""``skillopt skill validate | show | diff | install`` through the CLI's entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from controller.cli import main
from skillopt.skill.package import SKILL_MD, front_matter, load_skill
from skillopt.trainer.rundir import layout

REPO = Path(__file__).resolve().parents[2]
AGENTSKILLS = Path(sys.executable).parent / "agentskills"  # skills-ref's CLI

SKILL = (
    "---\nname: sheet-rules\ndescription: Rules for editing spreadsheets, with a checker script.\n"
    "license: MIT\nmetadata:\n  author: skillopt\n---\n\n# Sheet rules\nRead references/rules.md.\n"
)
FILES = {
    "references/rules.md": b"# Rules\nTotals go in column F.\n",
    "scripts/check.py": b"#!/usr/bin/env python3\nprint('checked')\n",
    "assets/blank.xlsx": b"PK\x03\x04\x00\x00binary",
}


def make_package(
    parent: Path, name: str = "sheet-rules", text: str = SKILL, files: dict | None = None
) -> Path:
    root = parent / name
    root.mkdir(parents=True)
    (root / SKILL_MD).write_text(text)
    for rel, data in (FILES if files is None else files).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    if (root / "scripts" / "check.py").exists():
        (root / "scripts" / "check.py").chmod(0o755)
    return root


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["skill", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def package(tmp_path) -> Path:
    return make_package(tmp_path / "src")


@pytest.fixture
def run_dir(tmp_path, package) -> Path:
    """A run directory as the trainer leaves it: best skill as a package and as SKILL.md,
    versions as packages (v0001) or, as older runs have them, only as text (v0002)."""
    run = tmp_path / "runs" / "demo"
    run.mkdir(parents=True)
    (run / layout.CONFIG).write_text("{}")
    best = make_package(run / layout.BEST_SKILL_DIR)
    (best / "references" / "rules.md").write_bytes(b"# Rules\nTotals go in column G.\n")
    (run / layout.BEST_SKILL).write_text((best / SKILL_MD).read_text())
    make_package(run / layout.skill_package_dir(1))
    (run / layout.skill_file(2)).parent.mkdir(parents=True, exist_ok=True)
    (run / layout.skill_file(2)).write_text("# Sheet rules\nOld text-only version.\n")
    return run


# ── validate ──────────────────────────────────────────────────────────────────────────────


def test_validate_ok_is_one_line_with_name_files_and_bytes(capsys, package):
    code, out, _ = cli(capsys, "validate", str(package))
    size = len(SKILL.encode()) + sum(len(d) for d in FILES.values())
    assert code == 0
    assert out == f"OK sheet-rules: 4 file(s), {size} bytes ({package})\n"
    code, out, _ = cli(capsys, "validate", str(package), "--json")
    data = json.loads(out)
    assert data["ok"] and data["files"] == 4 and data["bytes"] == size and data["problems"] == []
    assert data["tree_sha256"] == load_skill(package).tree_sha256


def test_validate_lists_every_problem_with_file_and_rule(capsys, tmp_path):
    bad = make_package(
        tmp_path,
        "other-name",
        text=SKILL.replace("license: MIT\n", "version: 3\n"),
        files={"references/latin1.md": b"caf\xe9\n"},
    )
    (bad / "references" / "passwd").symlink_to("/etc/passwd")
    code, out, _ = cli(capsys, "validate", str(bad))
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == f"INVALID {bad}: 4 problem(s)"
    rows = {tuple(line.split()[:2]) for line in lines[1:]}
    assert rows == {
        ("SKILL.md", "fields"),
        ("SKILL.md", "name-folder"),
        ("references/latin1.md", "utf-8"),
        ("references/passwd", "symlink"),
    }
    assert any("/etc/passwd" in line for line in lines)
    code, out, _ = cli(capsys, "validate", str(bad), "--json")
    data = json.loads(out)
    assert code == 1 and data["ok"] is False
    assert {(p["path"], p["rule"]) for p in data["problems"]} == rows


def test_validate_limits_a_lone_file_and_a_missing_path(capsys, tmp_path, package):
    code, out, _ = cli(capsys, "validate", str(package), "--max-files", "2")
    assert code == 1 and "too-many-files" in out
    lone = tmp_path / "SKILL.md"
    lone.write_text("# Rules\nAlways F.\n")
    code, out, _ = cli(capsys, "validate", str(lone))
    assert code == 0 and out.startswith("OK skillopt-target: 1 file(s)") and "without front matter" in out
    code, out, err = cli(capsys, "validate", str(tmp_path / "absent"))
    assert code == 2 and out == "" and "no such file or folder" in err


# ── show ──────────────────────────────────────────────────────────────────────────────────


def test_show_prints_front_matter_and_a_tree_with_sizes_and_executables(capsys, package):
    code, out, _ = cli(capsys, "show", str(package))
    assert code == 0
    assert out.startswith("sheet-rules: 4 file(s), ")
    assert "  description: Rules for editing spreadsheets, with a checker script.\n" in out
    assert "  metadata:\n    author: skillopt\n" in out
    tree = out[out.index("sheet-rules/\n") :].splitlines()
    assert [line.split()[0:2] for line in tree[1:8]] == [
        ["├──", "SKILL.md"],
        ["├──", "assets/"],
        ["│", "└──"],
        ["├──", "references/"],
        ["│", "└──"],
        ["└──", "scripts/"],
        ["└──", "check.py"],
    ]
    check = next(line for line in tree if "check.py" in line)
    assert check.endswith(f"{len(FILES['scripts/check.py'])} B  *")
    assert not next(line for line in tree if "rules.md" in line).endswith("*")


def test_show_json_lists_files_with_hashes(capsys, package):
    code, out, _ = cli(capsys, "show", str(package), "--json")
    data = json.loads(out)
    assert code == 0 and data["name"] == "sheet-rules" and data["front_matter"]["license"] == "MIT"
    assert [(f["path"], f["executable"]) for f in data["files"]] == [
        ("SKILL.md", False),
        ("assets/blank.xlsx", False),
        ("references/rules.md", False),
        ("scripts/check.py", True),
    ]
    assert data["tree_sha256"] == load_skill(package).tree_sha256


def test_show_a_run_prefers_the_package_and_falls_back_to_the_text(capsys, run_dir):
    code, out, _ = cli(capsys, "show", str(run_dir), "--json")
    data = json.loads(out)
    assert code == 0 and data["path"] == str(run_dir / "best_skill" / "sheet-rules")
    assert "best skill" in data["source"]
    code, out, _ = cli(capsys, "show", str(run_dir), "--version", "1", "--json")
    assert json.loads(out)["path"] == str(run_dir / "skill_packages" / "v0001" / "sheet-rules")
    code, out, _ = cli(capsys, "show", str(run_dir), "--version", "2", "--json")
    data = json.loads(out)
    assert data["path"] == str(run_dir / "skills" / "skill_v0002.md") and data["front_matter"] is None
    code, _, err = cli(capsys, "show", str(run_dir), "--version", "7")
    assert code == 2 and "no skill after step 7" in err
    # An older run: best_skill.md only.
    import shutil

    shutil.rmtree(run_dir / "best_skill")
    code, out, _ = cli(capsys, "show", str(run_dir), "--json")
    assert json.loads(out)["path"] == str(run_dir / "best_skill.md")


def test_show_a_broken_package_shows_it_and_warns(capsys, tmp_path):
    bad = make_package(tmp_path, "other")
    code, out, err = cli(capsys, "show", str(bad))
    assert code == 0 and "other/" in out and "name-folder" in err


# ── diff ──────────────────────────────────────────────────────────────────────────────────


def test_diff_prints_each_file_with_a_unified_diff_or_sizes(capsys, tmp_path, package):
    new = make_package(tmp_path / "new")
    (new / "references" / "rules.md").write_bytes(b"# Rules\nTotals go in column G.\n")
    (new / "assets" / "blank.xlsx").write_bytes(b"PK\x03\x04\x00\x00binary, larger")
    (new / "scripts" / "check.py").unlink()
    (new / "scripts" / "fix.sh").write_bytes(b"#!/bin/sh\necho fixed\n")
    (new / "scripts" / "fix.sh").chmod(0o755)
    code, out, _ = cli(capsys, "diff", str(package), str(new))
    assert code == 0
    assert "\n2 changed, 1 added, 1 removed\n" in out
    assert "changed assets/blank.xlsx (12 B -> 20 B, binary)\n" in out
    assert "-Totals go in column F.\n+Totals go in column G.\n" in out
    assert "added scripts/fix.sh (21 B, executable)\n--- /dev/null\n+++ b/scripts/fix.sh\n" in out
    assert "removed scripts/check.py (" in out
    code, out, _ = cli(capsys, "diff", str(package), str(new), "--json")
    data = json.loads(out)
    assert code == 0 and data["summary"] == "2 changed, 1 added, 1 removed"
    assert [(c["path"], c["status"]) for c in data["changes"]] == [
        ("assets/blank.xlsx", "changed"),
        ("references/rules.md", "changed"),
        ("scripts/check.py", "removed"),
        ("scripts/fix.sh", "added"),
    ]
    code, out, _ = cli(capsys, "diff", str(package), str(package))
    assert code == 0 and out.rstrip().endswith("no changes")


def test_diff_a_run_against_its_first_version(capsys, run_dir):
    code, out, _ = cli(
        capsys, "diff", str(run_dir / "skill_packages" / "v0001" / "sheet-rules"), str(run_dir)
    )
    assert code == 0 and "1 changed, 0 added, 0 removed" in out and "+Totals go in column G." in out
    code, same, _ = cli(capsys, "diff", str(run_dir), str(run_dir), "--a-version", "1")
    assert code == 0 and same.splitlines()[2:] == out.splitlines()[2:]
    code, _, err = cli(capsys, "diff", str(run_dir), str(run_dir), "--b-version", "9")
    assert code == 2 and "no skill after step 9" in err


# ── install ───────────────────────────────────────────────────────────────────────────────


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    return home


@pytest.mark.parametrize(
    ("harness", "scope", "where"),
    [
        ("claude-code", "project", "project/.claude/skills"),
        ("codex", "project", "project/.agents/skills"),
        ("claude-code", "user", "home/.claude/skills"),
        ("codex", "user", "home/.agents/skills"),
    ],
)
def test_install_puts_the_package_where_the_harness_looks(
    capsys, tmp_path, home, package, harness, scope, where
):
    project = tmp_path / "project"
    project.mkdir()
    args = ["install", str(package), "--harness", harness, "--scope", scope]
    code, out, _ = cli(capsys, *args, *(["--dir", str(project)] if scope == "project" else []))
    dest = tmp_path / where / "sheet-rules"
    assert code == 0 and f"at {dest}/" in out
    assert load_skill(dest) == load_skill(package)
    assert os.stat(dest / "scripts" / "check.py").st_mode & 0o111
    assert subprocess.run([str(AGENTSKILLS), "validate", str(dest)], capture_output=True).returncode == 0


def test_install_honours_claude_config_dir_and_the_current_folder(
    capsys, tmp_path, home, package, monkeypatch
):
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "cfg"))
    code, out, _ = cli(capsys, "install", str(package), "--harness", "claude-code", "--scope", "user")
    assert code == 0 and (tmp_path / "cfg" / "skills" / "sheet-rules" / SKILL_MD).is_file()
    monkeypatch.chdir(tmp_path)
    code, out, _ = cli(capsys, "install", str(package), "--harness", "codex")
    assert code == 0 and (tmp_path / ".agents" / "skills" / "sheet-rules" / SKILL_MD).is_file()
    assert f"for Codex run in {tmp_path}" in out


def test_install_leaves_the_same_skill_and_refuses_a_different_one_without_force(
    capsys, tmp_path, home, package
):
    project = tmp_path / "project"
    project.mkdir()
    args = ["install", str(package), "--harness", "claude-code", "--dir", str(project)]
    assert cli(capsys, *args)[0] == 0
    dest = project / ".claude" / "skills" / "sheet-rules"
    code, out, _ = cli(capsys, *args)
    assert code == 0 and out.startswith("already installed")
    (dest / "references" / "rules.md").write_bytes(b"edited by hand\n")
    code, out, err = cli(capsys, *args)
    assert code == 1 and "holds a different skill (1 changed, 0 added, 0 removed)" in err and "--force" in err
    assert (dest / "references" / "rules.md").read_bytes() == b"edited by hand\n"
    code, out, _ = cli(capsys, *args, "--force")
    assert code == 0 and load_skill(dest) == load_skill(package)
    assert sorted(p.name for p in dest.parent.iterdir()) == ["sheet-rules"]  # no temporaries left


def test_install_refuses_an_invalid_skill_and_writes_nothing(capsys, tmp_path, home):
    bad = make_package(tmp_path, "bad", text=SKILL)  # name differs from its folder
    project = tmp_path / "project"
    project.mkdir()
    code, _, err = cli(capsys, "install", str(bad), "--harness", "codex", "--dir", str(project))
    assert code == 1 and "name-folder" in err
    assert not (project / ".agents").exists()
    code, _, err = cli(
        capsys, "install", str(bad), "--harness", "codex", "--scope", "user", "--dir", str(project)
    )
    assert code == 2 and "--dir" in err


def test_install_from_a_run_and_from_a_one_file_skill(capsys, tmp_path, home, run_dir):
    project = tmp_path / "project"
    project.mkdir()
    code, out, _ = cli(capsys, "install", str(run_dir), "--harness", "claude-code", "--dir", str(project))
    dest = project / ".claude" / "skills" / "sheet-rules"
    assert code == 0 and load_skill(dest) == load_skill(run_dir / "best_skill" / "sheet-rules")
    code, out, _ = cli(
        capsys, "install", str(run_dir), "--version", "2", "--harness", "codex", "--dir", str(project)
    )
    one = project / ".agents" / "skills" / "skillopt-target"
    assert code == 0, out
    fields, body = front_matter((one / SKILL_MD).read_text())
    assert fields == {"name": "skillopt-target", "description": "Sheet rules"}
    assert body == "# Sheet rules\nOld text-only version."
    assert subprocess.run([str(AGENTSKILLS), "validate", str(one)], capture_output=True).returncode == 0


# ── the command line itself ───────────────────────────────────────────────────────────────


def test_the_commands_are_registered_and_their_help_teaches(package):
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "controller.cli", *args], cwd=REPO, capture_output=True, text=True
        )

    top = run("--help")
    assert top.returncode == 0 and "skill" in top.stdout
    helped = run("skill", "--help")
    assert helped.returncode == 0
    for action in ("validate", "show", "diff", "install"):
        assert action in helped.stdout
    assert "skillopt skill install runs/demo --harness claude-code" in helped.stdout
    install = run("skill", "install", "--help")
    assert ".claude/skills/<name>/" in install.stdout and "~/.agents/skills/<name>/" in install.stdout
    res = run("skill", "validate", str(package))
    assert res.returncode == 0 and res.stdout.startswith("OK sheet-rules:")


def test_the_worked_example_in_the_docs_is_valid_and_shown_as_it_is(capsys, monkeypatch):
    """docs/skills.md prints `skillopt skill show docs/examples/sheet-totals`: it must stay true."""
    monkeypatch.chdir(REPO)
    code, out, _ = cli(capsys, "show", "docs/examples/sheet-totals")
    assert code == 0
    doc = (REPO / "docs" / "skills.md").read_text()
    assert f"$ skillopt skill show docs/examples/sheet-totals\n{out}```" in doc
    code, out, _ = cli(capsys, "validate", "docs/examples/sheet-totals")
    assert code == 0 and out in doc
    example = REPO / "docs" / "examples" / "sheet-totals"
    assert subprocess.run([str(AGENTSKILLS), "validate", str(example)], capture_output=True).returncode == 0
    assert os.stat(example / "scripts" / "check_totals.py").st_mode & 0o111


def test_a_real_training_run_is_validated_shown_diffed_and_installed(capsys, tmp_path, home):
    """The run directory the trainer writes (the simulated target and optimizer over the
    scripted server, in process), read by every command."""
    from skillopt.config import load_config
    from skillopt.testing.inprocess import simulated_trainer
    from skillopt.testing.simulation import simulation_server
    from skillopt.trainer.planning import load_data

    settings = ["train.batch_size=10", "run.simulate=on", "run.plot=false", "run.progress=false"]
    body = load_data(load_config("searchqa_demo", settings)).initial_skill()
    pkg = make_package(tmp_path / "in", text=SKILL.split("\n---\n")[0] + "\n---\n\n" + body)
    run = tmp_path / "run"
    with simulation_server(max_records=100) as sim:
        cfg = load_config("searchqa_demo", [*settings, "train.num_epochs=1", f"env.skill_init={pkg}"])
        trainer, _ = simulated_trainer(cfg, run, base_url=sim.base_url)
        assert trainer.fit().status == "complete"
    capsys.readouterr()  # the trainer's log

    code, out, _ = cli(capsys, "validate", str(run))
    assert code == 0 and out.startswith("OK sheet-rules: 4 file(s)") and "best skill" in out
    code, out, _ = cli(capsys, "show", str(run), "--version", "0", "--json")
    assert code == 0 and json.loads(out)["path"] == str(run / "skill_packages" / "v0000" / "sheet-rules")
    code, out, _ = cli(
        capsys, "diff", str(run / "skill_packages" / "v0000" / "sheet-rules"), str(run), "--json"
    )
    changes = json.loads(out)["changes"]
    assert code == 0 and {c["path"] for c in changes} <= {"SKILL.md"}  # training edits the body only
    project = tmp_path / "project"
    project.mkdir()
    code, out, _ = cli(capsys, "install", str(run), "--harness", "claude-code", "--dir", str(project))
    assert code == 0
    installed = load_skill(project / ".claude" / "skills" / "sheet-rules")
    assert installed == load_skill(run / "best_skill" / "sheet-rules")
    assert installed.files == load_skill(pkg).files


def test_a_reader_that_goes_away_ends_the_command_quietly():
    """`skillopt skill show … | head`: the pipe's reader is gone before the first write."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        res = subprocess.run(
            [
                sys.executable,
                "-m",
                "controller.cli",
                "skill",
                "show",
                str(REPO / "docs/examples/sheet-totals"),
            ],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    assert res.returncode == 141 and "Traceback" not in res.stderr, res.stderr
