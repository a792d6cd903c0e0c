"""End to end for TextWorld: ``skillopt train --config textworld_demo`` as a real process on the
embedded sandbox (real containers from ``skillopt-textworld:latest``, real gRPC, the game
engine in each rollout's container), offline simulation as target and optimizer. The simulated
target wins a game only when the skill states the rule of its challenge, so the run gates: the
step whose analyst proposes the missing rules is accepted, later generic advice is rejected;
the test summary breaks the result down by challenge and level."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from skillopt.envs.registry import load_env_data

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory, docker_client) -> Path:
    load_env_data("textworld").split("train")  # generate (or find) the games before timing the run
    out = tmp_path_factory.mktemp("tw") / "demo"
    # One epoch of the shipped demo: it gates (accepts and rejects) and evaluates on test (every
    # challenge x level). Half the selection split tells the gate's two verdicts apart as well
    # (the initial skill wins no game, the rules win every one); without the slow update
    # (epoch 1's only adds an empty block) the final skill is the best one, so the test split
    # is played twice (initial, best), not three times.
    argv = ["train", "--config", "textworld_demo", "--out", str(out), "--set", "train.num_epochs=1",
            "--set", "evaluation.sel_env_num=3", "--set", "optimizer.use_slow_update=false"]  # fmt: skip
    res = subprocess.run(
        [sys.executable, "-m", "controller.cli", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1500,
        env={**os.environ, "OPENAI_API_KEY": "", "PYTHONUNBUFFERED": "1"},
    )
    assert res.returncode == 0, res.stderr[-4000:]
    assert "OFFLINE SIMULATION" in res.stderr
    return out


def test_the_demo_trains_gates_and_reports_challenges_and_levels(demo_run):
    summary = json.loads((demo_run / "summary.json").read_text())
    assert summary["total_accepts"] >= 1 and summary["total_rejects"] >= 1, summary["epoch_stats"]
    assert summary["best_selection_hard"] > summary["baseline_selection_hard"]
    assert summary["test_hard"] > summary["baseline_test_hard"]
    assert summary["config"]["env"]["name"] == "textworld" and summary["config"]["env"]["agent"] == "play"
    test = json.loads((demo_run / "test_eval" / "summary.json").read_text())
    categories = load_env_data("textworld").task_types()
    assert {k for k in test if k in categories} == set(categories)  # one row per challenge x level
    assert sum(v["total"] for k, v in test.items() if k in categories) == test["n"]
    best = (demo_run / "best_skill.md").read_text()
    assert "examine the cookbook first" in best.lower() or "unvisited exit" in best.lower(), best


def test_every_row_played_its_game_in_a_container_and_traced_each_step(demo_run):
    rows = [json.loads(line) for p in demo_run.rglob("results.jsonl") for line in p.read_text().splitlines()]
    assert rows and all(r["infra_error"] is None for r in rows)
    assert all("acquire" in r["timings_s"] for r in rows)  # each rollout leased its own container
    for r in rows:
        assert r["hard"] in (0.0, 1.0) and 0.0 <= r["soft"] <= 1.0
        assert r["hard"] == 1.0 or r["fail_reason"].startswith("Timeout after 10 steps")
    pred = next(demo_run.rglob("predictions/*/steps.txt"))
    steps = json.loads(pred.read_text())
    assert steps and {"step", "action", "env_feedback", "reasoning", "reward", "done"} <= set(steps[0])
    conversation = json.loads((pred.parent / "conversation.json").read_text())
    assert conversation[-1]["content"].startswith("[EVALUATION RESULT]")
