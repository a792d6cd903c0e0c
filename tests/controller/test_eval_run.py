"""``skillopt eval --run RUN``: a run evaluated as it trained (its own config, mode and skills),
and ``--resume DIR``, on a hand-made run directory in the trainer's layout. The two evals that
roll out go through the real CLI and the embedded sandbox on the QA env (no container per
rollout); the rest fail before any sandbox starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from controller.cli import main
from controller.rundir.runconfig import recorded_mode, run_config, run_skill
from skillopt.config import load_config
from skillopt.errors import ConfigError
from skillopt.trainer.rundir import layout

REPO = Path(__file__).resolve().parents[2]
NAME = "skillopt-target"
INITIAL = (REPO / "skillopt/envs/searchqa/skills/initial.md").read_text()


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``skillopt ARGS`` as a real process, keyless (no provider key reaches it)."""
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", *args],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env={**os.environ, "OPENAI_API_KEY": "", "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip


def package(folder: Path, body: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {NAME}\ndescription: searchqa answers\n---\n\n{body}")
    return folder


def make_run(root: Path, *, packages: bool = True) -> Path:
    """A finished simulated searchqa run of two steps, as ``skillopt train`` writes it. Its
    config says ``run.simulate: off`` while the run was simulated: only the recorded mode makes
    a keyless eval of it possible."""
    run = root / "run"
    (run / layout.SKILLS).mkdir(parents=True)
    cfg = load_config("searchqa_demo", ["run.simulate=off"]).to_dict()
    mode = {"simulated": True, "reason": "chosen (run.simulate=on)"}
    (run / layout.CONFIG).write_text(json.dumps({**cfg, "derived": {"total_steps": 2, "mode": mode}}))
    (run / layout.STATE).write_text(json.dumps({"last_completed_step": 2, "mode": mode}))
    for step in range(3):
        (run / layout.skill_file(step)).write_text(f"{INITIAL}\n<!-- v{step} -->\n")
        if packages:
            package(run / layout.skill_package_dir(step) / NAME, f"{INITIAL}\n<!-- v{step} -->\n")
    (run / layout.BEST_SKILL).write_text(f"{INITIAL}\n<!-- v1 -->\n")
    if packages:
        package(run / layout.BEST_SKILL_DIR / NAME, f"{INITIAL}\n<!-- v1 -->\n")
    return run


def test_best_and_final_are_the_runs_packages_else_its_skill_files(tmp_path):
    run = make_run(tmp_path / "a")
    assert run_skill(run, "best") == run / "best_skill" / NAME
    assert run_skill(run, "final") == run / "skill_packages" / "v0002" / NAME
    old = make_run(tmp_path / "b", packages=False)  # a run written before packages
    assert run_skill(old, "best") == old / "best_skill.md"
    assert run_skill(old, "final") == old / "skills" / "skill_v0002.md"
    assert run_skill(run, "initial") == run / "skill_packages" / "v0000" / NAME
    assert run_skill(run, "v1") == run_skill(run, "v0001") == run / "skill_packages" / "v0001" / NAME
    assert run_skill(old, "initial") == old / "skills" / "skill_v0000.md"
    with pytest.raises(ConfigError, match=r"no skill version v7 \(it has v0 to v2"):
        run_skill(run, "v7")
    with pytest.raises(ConfigError, match=r"vN \(the version after step N\) or a path, got 'latest'"):
        run_skill(run, "latest")
    (old / "best_skill.md").unlink()
    with pytest.raises(ConfigError, match=r"no best skill yet.*--skill final"):
        run_skill(old, "best")


def test_the_runs_config_is_read_without_its_derived_facts_and_its_mode_is_the_recorded_one(tmp_path):
    run = make_run(tmp_path)
    cfg = run_config(run, ["env.workers=3"])
    assert cfg.env.name == "searchqa" and cfg.run.simulate == "off" and cfg.env.workers == 3
    assert recorded_mode(run).flag == "on"
    (run / layout.STATE).unlink()  # a run that never committed: its config's record
    assert recorded_mode(run).flag == "on"
    (run / layout.CONFIG).write_text(json.dumps({**cfg.to_dict(), "derived": {"simulated": False}}))
    assert recorded_mode(run).flag == "off"  # written before the mode was recorded


def test_refusals_say_what_to_give_instead(tmp_path, capsys, monkeypatch):
    """In-process (the CLI's own ``main``): each refusal comes before any sandbox starts."""
    monkeypatch.setenv("OPENAI_API_KEY", "")
    run = make_run(tmp_path)

    def refused(*args: str) -> str:
        assert main(["eval", *args]) == 2
        return capsys.readouterr().err

    assert "skillopt eval --run" in refused(
        "--config", str(run / "config.json"), "--skill", str(run / "best_skill.md")
    )
    assert "--run RUN" in refused("--config", "searchqa_demo", "--skill", "best")
    assert "not a run directory" in refused("--run", str(tmp_path))
    # --simulate overrides the run's mode: real models, and no key here.
    assert "OPENAI_API_KEY" in refused("--run", str(run), "--simulate", "off")
    assert not (run / "evals").exists()


def test_eval_run_follows_the_run_and_resume_keeps_finished_rows(tmp_path, docker_client):
    run = make_run(tmp_path)
    res = cli("eval", "--run", str(run), "--split", "val")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "OFFLINE SIMULATION" in res.stderr  # the run's mode, though its config says off
    (out,) = (run / "evals").iterdir()  # where the WebUI's launcher writes too
    assert out.name.startswith("val_best_skill_")
    summary = json.loads((out / layout.EVAL_SUMMARY).read_text())
    assert summary["skill"] == str((run / "best_skill" / NAME).resolve())
    assert summary["env"]["name"] == "searchqa" and summary["simulated"] is True
    assert summary["n_items"] == 15 and summary["n_infra"] == 0

    # Interrupted after 5 rows: --resume runs the other 10 and keeps those 5 as they were.
    results = out / "eval_val" / layout.RESULTS
    kept = results.read_text().splitlines()[:5]
    results.write_text("".join(line + "\n" for line in kept))
    (out / layout.EVAL_SUMMARY).unlink()
    res = cli("eval", "--resume", str(out))
    assert res.returncode == 0, res.stderr[-3000:]
    assert "OFFLINE SIMULATION" in res.stderr
    lines = results.read_text().splitlines()
    assert lines[:5] == kept and len(lines) == 15
    assert json.loads((out / layout.EVAL_SUMMARY).read_text())["n_items"] == 15


def test_an_eval_folder_takes_one_skills_rows(tmp_path, capsys):
    run = make_run(tmp_path)
    out = tmp_path / "eval"
    out.mkdir()
    (out / layout.EVAL_CONFIG).write_text(
        json.dumps(
            {
                "config": run_config(run).to_dict(),
                "split": "val",
                "skill": {"path": str(run / "best_skill" / NAME), "tree_sha256": "0" * 64},
                "against": None,
                "mode": {"simulated": True},
            }
        )
    )
    assert main(["eval", "--run", str(run), "--skill", "final", "--split", "val", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "another skill" in err and f"skillopt eval --resume {out}" in err, err
    # Its own skill, changed since (the record's hash is not the package's now).
    assert main(["eval", "--resume", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"the skill {run / 'best_skill' / NAME} changed since the eval" in err and "new --out" in err, err
    assert main(["eval", "--resume", str(out), "--skill", "final"]) == 2
    assert "--skill cannot change it" in capsys.readouterr().err
    assert main(["eval", "--resume", str(tmp_path)]) == 2
    assert "not an eval directory" in capsys.readouterr().err
