"""End to end for the code envs (HumanEval, MBPP): ``skillopt eval`` and ``skillopt train`` as
real processes over ``--endpoints`` (a real sandbox service process, real gRPC, real Docker,
the simulation server as the models). Every program is graded in fresh grading containers.

The simulated target answers a catalogued sample item with the reference solution only when
the skill states the item's rule (else with a stub returning ``None``), so an eval scores
right = 1 and wrong = 0 per item, and a short training run gates: the step whose analyst
proposes the missing rules is accepted, later generic advice is rejected."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from skillopt.envs.registry import load_env_data
from skillopt.testing.fixtures.code import code_envs, load_catalogue
from tests.e2e.remote import REPO, remote_service
from tests.e2e.remote import cli as run_cli


def cli(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, timeout=timeout)


@pytest.fixture(scope="module")
def remote(docker_client) -> Iterator[list[str]]:
    """A sandbox service process on a real socket; yields the CLI flags that use it."""
    with remote_service("code", pool_size=2) as flags:
        yield flags


def _rows(out: Path) -> dict[str, dict]:
    return {
        r["id"]: r
        for p in out.rglob("results.jsonl")
        for r in (json.loads(x) for x in p.read_text().splitlines())
    }


@pytest.mark.parametrize("env", code_envs())
def test_eval_over_endpoints_right_is_1_wrong_is_0_with_a_breakdown(remote, tmp_path, env):
    catalogue = load_catalogue(env)
    full = tmp_path / "full.md"
    full.write_text("# Skill\n\n" + "\n".join(f"- {t}" for t in catalogue["rules"].values()) + "\n")
    initial = REPO / "skillopt" / "envs" / env / "skills" / "initial.md"
    val = [it.id for it in load_env_data(env).split("val")]
    for skill, name in ((initial, "initial"), (full, "full")):
        out = tmp_path / name
        res = cli(
            "eval", "--config", env, "--skill", str(skill), "--split", "val", "--out", str(out), *remote
        )
        assert res.returncode == 0, res.stderr[-4000:]
        summary = json.loads((out / "eval_summary.json").read_text())
        assert summary["n_items"] == len(val) and summary["n_infra"] == 0
        assert sum(v["total"] for v in summary["by_task_type"].values()) == len(val)
        rows = _rows(out)
        assert sorted(rows) == sorted(val)
        for tid, row in rows.items():
            right = name == "full" or tid not in catalogue["tasks"]
            assert row["hard"] == (1.0 if right else 0.0), (tid, row["fail_reason"])
            assert row["infra_error"] is None and row["metrics"]["n_tests"] >= 1
            assert "acquire" in row["timings_s"] and row["timings_s"]["grade"] > 0
        if name == "full":
            assert summary["hard"] == 1.0
    assert json.loads((tmp_path / "initial" / "eval_summary.json").read_text())["hard"] < 1.0


@pytest.mark.parametrize("env", code_envs())
def test_a_short_training_run_gates(remote, tmp_path, env):
    out = tmp_path / "run"
    res = cli(
        "train", "--config", f"{env}_demo", "--out", str(out), *remote,
        "--set", "train.num_epochs=1", "--set", "evaluation.eval_test=false",
        "--set", "optimizer.use_slow_update=false", "--set", "optimizer.use_meta_skill=false",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-4000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["total_accepts"] >= 1 and summary["total_rejects"] >= 1, summary["epoch_stats"]
    assert summary["best_selection_hard"] > summary["baseline_selection_hard"]
    assert summary["config"]["env"]["name"] == env and summary["config"]["env"]["agent"] == "codegen_single"
    rows = [json.loads(x) for p in out.rglob("results.jsonl") for x in p.read_text().splitlines()]
    assert rows and all(r["infra_error"] is None for r in rows)


def test_the_codex_cli_solves_the_sample_offline_when_the_skill_states_the_rules(tmp_path, docker_client):
    """The real Codex CLI in its container, driven by the simulation through the gateway: it
    reads the skill, writes solution.py; the program is graded in a fresh container."""
    catalogue = load_catalogue("mbpp")
    rules = "\n".join(f"- {t}" for t in catalogue["rules"].values())
    for name, skill_text, hard in (("initial", "", None), ("full", f"# Skill\n\n{rules}\n", 1.0)):
        skill = tmp_path / f"{name}.md"
        skill.write_text(skill_text or (REPO / "skillopt/envs/mbpp/skills/initial.md").read_text())
        out = tmp_path / name
        res = cli(
            "eval", "--config", "mbpp", "--skill", str(skill), "--split", "val", "--out", str(out),
            "--simulate", "on", "--set", "env.agent=codex_exec",
        )  # fmt: skip
        assert res.returncode == 0, res.stderr[-4000:]
        summary = json.loads((out / "eval_summary.json").read_text())
        assert summary["n_infra"] == 0 and summary["env"]["agent"] == "codex_exec"
        rows = _rows(out)
        for tid, row in rows.items():
            right = name == "full" or tid not in catalogue["tasks"]
            assert row["hard"] == (1.0 if right else 0.0), (tid, row["fail_reason"])
            assert row["metrics"]["solution_file"] is True
        if hard is not None:
            assert summary["hard"] == hard
