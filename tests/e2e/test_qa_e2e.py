"""End to end for the question-answering envs: ``skillopt train`` and ``skillopt eval`` as real
processes, over ``--endpoints`` (a real sandbox service process with a provider profile
pointing at the simulation server) for every env, and embedded (the offline simulation) for
one. The simulated target answers an item right only when the skill states the item's rule, so
a run gates: the step whose analyst proposes the missing rules is accepted, later generic
advice is rejected."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from skillopt.envs.registry import env_spec, envs_with_agent
from tests.e2e.remote import REPO, remote_service
from tests.e2e.remote import cli as run_cli


def cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, timeout=timeout)


@pytest.fixture(scope="module")
def remote(docker_client) -> Iterator[list[str]]:
    """A sandbox service process on a real socket; yields the CLI flags that use it."""
    with remote_service("qa", pool_size=1) as flags:
        yield flags


def data_categories(env: str) -> list[str]:
    from skillopt.envs.registry import load_env_data

    return load_env_data(env).task_types()


def _test_eval_options(out: Path) -> dict:
    return json.loads((out / "test_eval" / "summary.json").read_text())["env_options"]


@pytest.mark.parametrize("env", envs_with_agent("qa"))
def test_train_over_endpoints_gates_and_reports_categories(remote, tmp_path, env):
    out = tmp_path / "run"
    res = cli("train", "--config", f"{env}_demo", "--out", str(out), *remote, "--set", "train.num_epochs=1")
    assert res.returncode == 0, res.stderr[-4000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["total_accepts"] >= 1 and summary["total_rejects"] >= 1, summary["epoch_stats"]
    assert summary["best_selection_hard"] > summary["baseline_selection_hard"]
    assert summary["test_hard"] > summary["baseline_test_hard"]
    assert (
        summary["config"]["env"]["name"] == env
        and summary["config"]["env"]["agent"] == env_spec(env).default_agent
    )
    assert _test_eval_options(out) == summary["config"]["env"]["options"]
    test = json.loads((out / "test_eval" / "summary.json").read_text())
    assert (
        test["overall"]["total"] == test["n"]
        and sum(v["total"] for k, v in test.items() if k in data_categories(env)) == test["n"]
    )  # every test item falls in one category
    rows = [json.loads(line) for p in out.rglob("results.jsonl") for line in p.read_text().splitlines()]
    assert rows and all(r["infra_error"] is None for r in rows)
    if env_spec(env).agent(env_spec(env).default_agent).sandbox == "none":
        assert all("acquire" not in r["timings_s"] for r in rows)  # no container for the qa agent
    best = (out / "best_skill.md").read_text()
    assert best != (out / "skills" / "skill_v0000.md").read_text()


@pytest.mark.parametrize("env", envs_with_agent("qa"))
def test_eval_over_endpoints_writes_a_summary_with_categories(remote, tmp_path, env):
    skill = REPO / "skillopt" / "envs" / env / "skills" / "initial.md"
    out = tmp_path / "eval"
    res = cli("eval", "--config", env, "--skill", str(skill), "--split", "val", "--out", str(out), *remote)
    assert res.returncode == 0, res.stderr[-4000:]
    summary = json.loads((out / "eval_summary.json").read_text())
    assert summary["split"] == "val" and summary["n_items"] > 0 and summary["n_infra"] == 0
    assert 0.0 <= summary["hard"] < 1.0  # the initial skill states no rule: some items fail
    assert sum(v["total"] for v in summary["by_task_type"].values()) == summary["n_items"]
    assert summary["env"]["name"] == env and summary["simulated"] is False


def test_demo_trains_offline_on_the_embedded_sandbox(tmp_path, docker_client):
    out = tmp_path / "demo"
    res = cli("train", "--config", "searchqa_demo", "--out", str(out))
    assert res.returncode == 0, res.stderr[-4000:]
    assert "OFFLINE SIMULATION" in res.stderr
    history = json.loads((out / "history.json").read_text())
    actions = [r["action"] for r in history]
    assert any("accept" in a for a in actions) and "reject" in actions, actions
    # The best skill as the package the run wrote (a folder, as a harness installs it).
    assert (out / "best_skill" / "skillopt-target" / "SKILL.md").is_file()
    # Evaluated as it trained: its config and its (simulated) mode, its best package.
    evaluated = cli("eval", "--run", str(out), "--split", "val")
    assert evaluated.returncode == 0, evaluated.stderr[-4000:]
    (ev,) = (out / "evals").iterdir()
    summary = json.loads((ev / "eval_summary.json").read_text())
    assert summary["simulated"] is True and summary["env"]["name"] == "searchqa"
    assert summary["skill"] == str((out / "best_skill" / "skillopt-target").resolve())
    # Every question shares the system prompt and the skill before it differs.
    assert 0 < summary["cacheable_prefix_share"] < 1
    assert summary["cacheable_prefix"]["target"]["input_tokens"] > 0


def test_deep_reflect_reruns_see_their_earlier_attempt_but_no_gold(remote, tmp_path):
    out = tmp_path / "deep"
    res = cli(
        "train", "--config", "searchqa_demo", "--out", str(out), *remote,
        "--set", "train.num_epochs=1", "--set", "gradient.deep_reflect=true",
        "--set", "optimizer.use_slow_update=false", "--set", "evaluation.eval_test=false",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-4000:]
    prompts = sorted(out.glob("steps/*/**/probe/rollout/predictions/*/target_user_prompt.txt"))
    assert prompts, sorted(str(p.relative_to(out)) for p in out.rglob("probe*"))
    for path in prompts:
        text = path.read_text()
        assert "# Your earlier attempt at this task" in text and "# Diagnostic instruction" in text
        assert "[EVALUATION RESULT]" not in text and "Gold answers" not in text


def test_noisy_simulation_repeat_gate_and_a_paired_eval_through_the_sandbox(tmp_path, docker_client):
    """`--simulate noisy` through the embedded sandbox host: the seed reaches the target through
    the gateway, the repeat gate measures each item three times, the truth is recorded; then
    `skillopt eval --against` compares the best skill with the initial one on the same items."""
    out = tmp_path / "noisy"
    res = cli(
        "train", "--config", "searchqa_demo", "--out", str(out), "--simulate", "noisy",
        "--set", "evaluation.gate_mode=repeat", "--set", "train.num_epochs=1", "--set", "evaluation.eval_test=false",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-4000:]
    assert "noisy target" in res.stderr and "repeat; bootstrap test" in res.stdout + res.stderr
    for k in ("", "_r2", "_r3"):
        assert len((out / f"selection_eval_baseline{k}" / "results.jsonl").read_text().splitlines()) == 15
    history = json.loads((out / "history.json").read_text())
    gated = [r for r in history if r.get("gate_test")]
    assert gated and all(r["gate_test"]["mode"] == "repeat" and r["gate_test"]["repeats"] == 3 for r in gated)
    truth = json.loads((out / "simulation_truth.json").read_text())
    assert truth["ground_truth"].startswith("SIMULATION ONLY") and truth["best"] in truth["skills"]

    ev = tmp_path / "eval"
    res = cli(
        "eval", "--config", "searchqa_demo", "--simulate", "noisy", "--split", "all", "--out", str(ev),
        "--skill", str(out / "best_skill.md"), "--against", str(out / "skills" / "skill_v0000.md"),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-4000:]
    summary = json.loads((ev / "eval_summary.json").read_text())
    diff = summary["against"]["difference"]
    assert diff["n"] == summary["n_items"] == 50 and diff["name"] == "sign"
    assert diff["ci95"][0] <= diff["effect"] <= diff["ci95"][1] and 0 < diff["p_value"] <= 1
    assert summary["hard_ci95"][0] <= summary["hard"] <= summary["hard_ci95"][1]
    assert f"one-sided p = {diff['p_value']:.3g}" in res.stderr

    listed = cli("runs", "--runs-dir", str(tmp_path))
    line = next(x for x in listed.stdout.splitlines() if x.startswith("noisy "))
    assert "noisy sim" in line and "repeat" in line and "[" in line


def test_officeqa_trains_over_endpoints_on_the_shared_data(remote, tmp_path):
    """The full config on the shared data root (70 questions, 69 bulletins): each rollout's
    cited bulletins travel to the host; the simulation answers the questions it has no rule for
    generically, so they are scored on their merits, never as infrastructure errors."""
    from skillopt.testing.shared_data import shared_datasets

    root = shared_datasets()
    assert root is not None and (root / "officeqa").is_dir(), "the shared OfficeQA data are missing"
    out = tmp_path / "run"
    res = cli(
        "train", "--config", "officeqa", "--out", str(out), *remote,
        "--set", f"env.data_root={root / 'officeqa'}", "--set", "train.num_epochs=1",
        "--set", "train.batch_size=6", "--set", "evaluation.eval_test=false",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-4000:]
    data = json.loads((out / "config.json").read_text())["derived"]["data"]
    assert data["sizes"] == {"train": 12, "val": 9, "test": 49} and data["corpus_files"] == 69
    rows = [json.loads(line) for p in out.rglob("results.jsonl") for line in p.read_text().splitlines()]
    assert len(rows) >= 12 + 9 and all(r["infra_error"] is None for r in rows)
    assert any(r["hard"] == 1.0 for r in rows) and any(r["metrics"]["tool_calls"] for r in rows)
