"""Real models on an env's vendored sample are refused unless asked for (``--allow-sample``,
``env.allow_sample``); the offline simulation, one's own data and every shipped demo config
are not. The refusal comes before a run directory or a sandbox exists."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from controller.cli import main
from controller.rundata import refuse_sample, run_data
from skillopt.config import list_builtin_configs, load_config
from skillopt.envs.datacheck import sample_root
from skillopt.errors import ConfigError
from skillopt.trainer.planning import load_data
from skillopt.trainer.state import RunMode

REAL = RunMode(simulated=False, reason="optimizer m via openai, target m via openai")


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-a-real-key-0000")  # never called: refused first


def test_train_with_a_key_on_the_sample_is_refused_with_the_ways_on(capsys, key, tmp_path):
    out = tmp_path / "run"
    code = main(["train", "--config", "spreadsheetbench", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert "refusing to train with real models" in err and "vendored sample of spreadsheetbench" in err
    assert "train 10, selection 5, test 3 items" in err
    for way in (
        "--set env.data_root=DIR",
        "skillopt data check --env spreadsheetbench DIR",
        "--allow-sample",
    ):
        assert way in err
    assert "--simulate on" in err


def test_eval_with_a_key_on_the_sample_is_refused(capsys, key, tmp_path):
    skill = sample_root("searchqa").parents[1] / "skills" / "initial.md"
    out = tmp_path / "ev"
    code = main(["eval", "--config", "searchqa", "--skill", str(skill), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists() and "refusing to eval with real models" in err


def test_what_is_not_refused(tmp_path):
    cfg = load_config("searchqa", [])
    used = run_data(cfg, load_data(cfg))
    assert used.sample and used.counts == {"train": 20, "selection": 15, "test": 15}
    assert "(the vendored sample; set env.data_root for your data): train 20" in used.line()
    with pytest.raises(ConfigError, match="refusing to train"):
        refuse_sample(cfg, REAL, used, command="train")
    refuse_sample(cfg, RunMode(simulated=True, reason="chosen"), used, command="train")  # simulation
    allowed = load_config("searchqa", ["env.allow_sample=true"])
    refuse_sample(allowed, REAL, run_data(allowed, load_data(allowed)), command="train")
    # One's own data, even a copy of the sample, is one's own; the run's caps are applied.
    mine = tmp_path / "mine"
    mine.mkdir()
    for f in sample_root("searchqa").glob("*.json"):
        (mine / f.name).write_bytes(f.read_bytes())
    own = load_config("searchqa", [f"env.data_root={mine}", "evaluation.sel_env_num=5"])
    used = run_data(own, load_data(own))
    assert not used.sample and used.counts["selection"] == 5 and str(mine) in used.line()
    refuse_sample(own, REAL, used, command="train")


@pytest.mark.parametrize("name", [n for n in list_builtin_configs() if not n.startswith("_base_")])
def test_every_demo_config_allows_its_sample_and_no_other_config_does(name):
    cfg = load_config(name, [])
    assert cfg.env.allow_sample is name.endswith("_demo"), name
    if name.endswith("_demo"):
        assert not cfg.env.data_root and cfg.run.simulate == "auto"


def test_the_flag_is_the_config_key(tmp_path):
    """--allow-sample gets past the refusal: the run then stops at the next check (here, a
    sandbox endpoint that does not answer), before anything is spent. A real CLI process: a
    run configures the process's logging."""
    out = tmp_path / "run"
    res = subprocess.run(
        [sys.executable, "-m", "controller.cli", "train", "--config", "searchqa", "--out", str(out),
         "--allow-sample", "--endpoints", "127.0.0.1:9", "--set", "sandbox.host_down_timeout_s=0.5"],
        env={**os.environ, "OPENAI_API_KEY": "sk-not-a-real-key-0000"},
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert "refusing" not in res.stderr and "train 20, selection 15, test 15" in res.stderr, res.stderr
    assert res.returncode != 0 and out.exists()
