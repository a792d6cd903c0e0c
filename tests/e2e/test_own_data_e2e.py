"""The new user's path, end to end through the real CLI: ten SpreadsheetBench tasks of one's
own in the original release's layout, converted and checked; an OpenAI-compatible endpoint
(the scripted model server standing in) checked with one real call per role; then a training
run with those models on that data, whose start line names the data and its split counts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from skillopt.envs.datacheck import sample_root
from skillopt.testing.simulation import SIM_OPTIMIZER, SIM_TARGET, simulation_server

REPO = Path(__file__).resolve().parents[2]


def skillopt(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "OPENAI_API_KEY": "", "LOCAL_KEY": "sk-local-not-secret", "PYTHONPATH": str(REPO)},
    )


def _release(tmp: Path, n: int) -> Path:
    """``n`` real tasks (copied from the vendored sample) laid out as SpreadsheetBench releases
    them: ``_init``/``_golden`` workbooks, no splits.json."""
    src = sample_root("spreadsheetbench")
    records = json.loads((src / "dataset.json").read_text())[:n]
    rel = tmp / "release"
    for r in records:
        r.pop("split")
        folder = rel / "spreadsheet" / r["id"]
        folder.mkdir(parents=True)
        for f in (src / "spreadsheet" / r["id"]).iterdir():
            shutil.copy(f, folder / f.name.replace("_input.", "_init.").replace("_answer.", "_golden."))
    (rel / "dataset.json").write_text(json.dumps(records))
    return rel


def test_own_tasks_and_an_openai_compatible_endpoint_to_a_finished_run(tmp_path, docker_client):
    _release(tmp_path, 10)
    res = skillopt(
        "data", "convert", "--from", "spreadsheetbench-release", "release", "my-tasks", cwd=tmp_path
    )
    assert res.returncode == 0 and "train 4, selection 2, test 4" in res.stdout, res.stdout + res.stderr
    res = skillopt("data", "check", "--env", "spreadsheetbench", "my-tasks", cwd=tmp_path)
    assert res.returncode == 0 and "data: ok" in res.stdout, res.stdout + res.stderr
    with simulation_server() as sim:
        (tmp_path / "providers.yaml").write_text(
            yaml.safe_dump(
                {
                    "providers": {
                        "local": {
                            "kind": "openai_compatible",
                            "base_url": sim.base_url,
                            "api_key_env": "LOCAL_KEY",
                        }
                    }
                }
            )
        )
        models = [
            "--config", "spreadsheetbench", "--set", "model.providers_file=providers.yaml",
            "--set", "model.optimizer_provider=local", "--set", f"model.optimizer={SIM_OPTIMIZER}",
            "--set", "model.target_provider=local", "--set", f"model.target={SIM_TARGET}",
        ]  # fmt: skip
        res = skillopt("models", "check", *models, "--call", cwd=tmp_path)
        assert res.returncode == 0 and res.stdout.count("call: ok in") == 2, res.stdout + res.stderr
        assert "sk-local-not-secret" not in res.stdout + res.stderr
        res = skillopt(
            "train", *models, "--set", "env.data_root=my-tasks", "--out", "runs/mine",
            "--set", "train.num_epochs=1", "--set", "train.batch_size=4", "--set", "env.workers=4",
            "--set", "evaluation.eval_test=false", cwd=tmp_path,
        )  # fmt: skip
    assert res.returncode == 0, res.stderr[-4000:]
    assert "skillopt train: real models: optimizer sim-optimizer via local" in res.stderr
    assert f"skillopt train: data {tmp_path / 'my-tasks'}: train 4, selection 2, test 4" in res.stderr
    summary = json.loads((tmp_path / "runs" / "mine" / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["simulated"] is False
