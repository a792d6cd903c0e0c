"""A run whose initial skill is an Agent Skills package (SKILL.md with front matter, a
reference, a script): every rollout carries the whole package, the agent is told what files
it has (never their contents), and every version the run writes is a package the standard's
own validator (skills-ref's ``agentskills validate``) accepts, ready to install."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from skillopt.skill.package import load_skill
from skillopt.trainer.planning import load_data
from skillopt.trainer.rundir import layout
from skillopt.trainer.rundir.results import load_rows
from tests.skillopt.trainer.conftest import config

NAME = "qa-helper"
RULES = "# Answer format\nGive the shortest exact answer span, no extra words.\n"
SCRIPT = "#!/usr/bin/env python3\n# Normalise an answer.\nimport sys\nprint(sys.argv[1].strip().lower())\n"


def make_package(root: Path) -> Path:
    pkg = root / NAME
    (pkg / "references").mkdir(parents=True)
    (pkg / "scripts").mkdir()
    body = load_data(config()).initial_skill()
    (pkg / "SKILL.md").write_text(
        f"---\nname: {NAME}\ndescription: Answer trivia questions from search snippets.\n---\n\n{body}",
        encoding="utf-8",
    )
    (pkg / "references" / "answer-format.md").write_text(RULES, encoding="utf-8")
    (pkg / "scripts" / "normalise.py").write_text(SCRIPT, encoding="utf-8")
    (pkg / "scripts" / "normalise.py").chmod(0o755)
    return pkg


def validate_cli(folder: Path) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("agentskills")
    return subprocess.run([str(exe), "validate", str(folder)], capture_output=True, text=True, check=False)


def test_a_package_trains_rolls_out_whole_and_every_version_is_a_valid_package(fit, tmp_path):
    pkg = make_package(tmp_path / "in")
    initial = load_skill(pkg)
    out = tmp_path / "run"

    result, executor = fit(out, f"env.skill_init={pkg}", "train.num_epochs=1")

    assert result.status == "complete"
    # Every rollout carried the package: its name, its front matter, its files unchanged.
    assert executor.requests
    for req in executor.requests:
        assert req.skill.name == NAME
        assert req.skill.content.startswith(f"---\nname: {NAME}\n")
        assert req.skill.files == initial.files
    # A batch's requests carry one version: its hashes were computed once, inside it.
    baseline = [r.skill for r in executor.requests if f"/{layout.BASELINE_SELECTION}/" in r.rollout_id]
    assert len(baseline) > 1 and all(s == baseline[0] for s in baseline)
    # The agent was told what the package holds, never the contents.
    rows = load_rows(out / layout.BASELINE_SELECTION)
    system = next(iter(rows.values())).trace.system_prompt
    assert "/skill/references/answer-format.md" in system
    assert "/skill/scripts/normalise.py" in system and "executable" in system
    assert "sys.path.insert(0, '/skill/scripts')" in system  # its modules can be imported
    assert "no extra words" not in system  # the reference's body stays on disk
    assert "name: qa-helper" not in system  # the front matter is for the harness

    # Every version is a package in a folder named after the skill, valid by the standard.
    versions = sorted((out / layout.SKILL_PACKAGES).iterdir())
    assert [v.name for v in versions][:1] == ["v0000"]
    assert len(versions) == len(list((out / layout.SKILLS).glob("skill_v*.md")))
    best = out / layout.BEST_SKILL_DIR / NAME
    for folder in [*(v / NAME for v in versions), best]:
        checked = validate_cli(folder)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    assert load_skill(best).files == initial.files
    assert (out / layout.BEST_SKILL).read_text(encoding="utf-8") == (best / "SKILL.md").read_text(
        encoding="utf-8"
    )
    assert os.access(best / "scripts" / "normalise.py", os.X_OK)
    # A file no version changed is stored once: later versions hard-link it.
    first, last = versions[0] / NAME, versions[-1] / NAME
    assert len(versions) > 1
    assert (first / "references" / "answer-format.md").stat().st_ino == (
        last / "references" / "answer-format.md"
    ).stat().st_ino


def test_a_one_file_skill_is_written_as_a_valid_package_too(fit, tmp_path):
    out = tmp_path / "run"
    result, executor = fit(out, "train.num_epochs=1")

    assert result.status == "complete"
    assert all(req.skill.name == "skillopt-target" and not req.skill.files for req in executor.requests)
    # What the agent got is the text as before (no front matter added on the wire)...
    assert not executor.requests[0].skill.content.startswith("---")
    # ...and what the run writes is a package a harness can install.
    best = out / layout.BEST_SKILL_DIR / "skillopt-target"
    checked = validate_cli(best)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert (best / "SKILL.md").read_text(encoding="utf-8").startswith("---\nname: skillopt-target\n")
    # best_skill.md stays what it was for a one-file skill: the text, without a front matter.
    assert not (out / layout.BEST_SKILL).read_text(encoding="utf-8").startswith("---")
