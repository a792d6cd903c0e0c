"""End to end: ``skillopt train`` through the embedded sandbox service (a real subprocess, real
containers, real grading) with the scripted model server playing target and optimizer.

Also: ``kill -9`` of the controller mid-step, then ``--resume``: the same step records, no
duplicate result row, and nothing left running. Resume after a crash at every commit and
inside every segment, stops at every stage boundary, budgets, hooks and infrastructure rows are
tested without Docker, on the same trainer, in ``tests/skillopt/trainer/``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.runtime.docker.engine import list_containers

REPO = Path(__file__).resolve().parents[2]
VOLATILE = {"timing", "tokens", "wall_time_s"}


def train(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "controller.cli", "train", *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OPENAI_API_KEY": "", "PYTHONUNBUFFERED": "1", **(env or {})},
    )


def stable(history: list[dict]) -> list[dict]:
    return [{k: v for k, v in rec.items() if k not in VOLATILE} for rec in history]


def skills(run: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((run / "skills").iterdir())}


def result_files(run: Path) -> list[Path]:
    return sorted(run.rglob("results.jsonl"))


def assert_no_duplicate_rows(run: Path) -> None:
    for path in result_files(run):
        ids = [json.loads(line)["id"] for line in path.read_text().splitlines() if line.strip()]
        assert len(ids) == len(set(ids)), f"duplicate rows in {path}"


@pytest.fixture(scope="module")
def full_run(tmp_path_factory, docker_client) -> Path:
    out = tmp_path_factory.mktemp("runs") / "full"
    proc = train("--config", "spreadsheetbench_demo", "--out", str(out))
    _, stderr = proc.communicate(timeout=900)
    assert proc.returncode == 0, stderr[-4000:]
    assert "OFFLINE SIMULATION" in stderr
    # The start line names the data and the items per split.
    sample = "skillopt/envs/spreadsheetbench/data/sample (the vendored sample"
    assert sample in stderr and "train 10, selection 5, test 3" in stderr
    return out


def test_training_accepts_and_rejects_and_improves(full_run):
    history = json.loads((full_run / "history.json").read_text())
    actions = [r["action"] for r in history]
    assert len(history) == 4  # 2 epochs x 2 steps over 10 train tasks with batch 5
    assert any("accept" in a for a in actions) and "reject" in actions, actions
    summary = json.loads((full_run / "summary.json").read_text())
    assert summary["simulated"] is True
    assert summary["mode"]["simulated"] is True and "no provider key" in summary["mode"]["reason"]
    assert summary["status"] == "complete"
    assert summary["best_selection_hard"] >= summary["baseline_selection_hard"]
    assert summary["best_selection_hard"] > summary["baseline_selection_hard"]  # the skill learned
    assert summary["test_hard"] >= summary["baseline_test_hard"]
    assert summary["total_accepts"] >= 1 and summary["total_rejects"] >= 1
    assert summary["token_summary"]["_total"]["total_tokens"] > 0
    # The target's prompts put the system text and the skill first: of a single-turn rollout's
    # input that is most; the optimizer's prompts vary more (trajectories).
    prefix = summary["cacheable_prefix"]
    assert 0.5 < prefix["target"]["share"] < 1 and 0 <= prefix["optimizer"]["share"] < 1
    assert summary["cacheable_prefix_share"] == pytest.approx(
        (prefix["target"]["cacheable_input_tokens"] + prefix["optimizer"]["cacheable_input_tokens"])
        / (prefix["target"]["input_tokens"] + prefix["optimizer"]["input_tokens"]),
        abs=1e-3,
    )
    target = summary["token_summary"]["target"]
    assert prefix["target"]["input_tokens"] == sum(u["prompt_tokens"] for u in target.values())
    assert summary["sandbox_hosts"] and summary["image_digests"][0].startswith("sha256:")
    # The skill that scored best is the one written out, and it states what it learned.
    best = (full_run / "best_skill.md").read_text()
    assert "never Excel formulas" in best


def test_run_directory_is_readable(full_run):
    for rel in [
        "config.json",
        "history.json",
        "runtime_state.json",
        "best_skill.md",
        "summary.json",
        "training_curve.png",
        "train.log",
        "skills/skill_v0000.md",
        "skills/skill_v0004.md",
        "selection_eval_baseline/results.jsonl",
        "steps/step_0001/rollout/results.jsonl",
        "steps/step_0001/patches/minibatch_fail_000.json",
        "steps/step_0001/merged_patch.json",
        "steps/step_0001/ranked_edits.json",
        "steps/step_0001/candidate_skill.md",
        "steps/step_0001/edit_apply_report.json",
        "steps/step_0001/step_record.json",
        "steps/step_0001/trajectory_digest.json",
        "slow_update/epoch_01/slow_result.json",
        "slow_update/epoch_02/slow_result.json",
        "meta_skill/epoch_02/meta_skill_result.json",
        "test_eval_baseline/summary.json",
        "test_eval/summary.json",
    ]:
        assert (full_run / rel).exists(), rel
    one = next((full_run / "steps/step_0001/rollout/predictions").iterdir())
    assert {"conversation.json", "trace.json", "target_system_prompt.txt", "code.py"} <= {
        p.name for p in one.iterdir()
    }
    assert (full_run / "training_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The log is JSON lines with context.
    first = json.loads((full_run / "train.log").read_text().splitlines()[0])
    assert "event" in first and "level" in first
    assert_no_duplicate_rows(full_run)


def test_kill_9_mid_step_then_resume_gives_the_same_records(full_run, tmp_path, docker_client):
    out = tmp_path / "killed"
    proc = train("--config", "spreadsheetbench_demo", "--out", str(out))
    # The progress stream is the synchronisation: once step 1 is reported, step 2 is running.
    for line in proc.stderr:
        if line.startswith("step 1/"):
            break
    else:
        pytest.fail(f"training ended before step 1 was reported: {proc.wait()}")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    state = json.loads((out / "runtime_state.json").read_text())
    assert state["last_completed_step"] == 1

    resumed = train("--resume", str(out))
    _, stderr = resumed.communicate(timeout=900)
    assert resumed.returncode == 0, stderr[-4000:]
    assert "resuming after step 1" in stderr
    assert stable(json.loads((out / "history.json").read_text())) == stable(
        json.loads((full_run / "history.json").read_text())
    )
    assert (out / "best_skill.md").read_text() == (full_run / "best_skill.md").read_text()
    assert skills(out) == skills(full_run)
    assert_no_duplicate_rows(out)
    summary = json.loads((out / "summary.json").read_text())
    full = json.loads((full_run / "summary.json").read_text())
    # The target's usage is its rows' (the rows are its ledger): every row counted once.
    assert summary["token_summary"]["target"] == full["token_summary"]["target"]
    # Both sessions' embedded sandboxes are listed, and every optimizer call of both sessions
    # (the killed step's too) is counted.
    assert len(summary["sandbox_hosts"]) == 2, summary["sandbox_hosts"]
    ledger = [json.loads(x) for x in (out / "optimizer_calls.jsonl").read_text().splitlines() if x.strip()]
    counted = sum(v["calls"] for v in summary["token_summary"]["optimizer"].values())
    assert sum(d["calls"] for d in ledger) == counted
    assert counted >= sum(v["calls"] for v in full["token_summary"]["optimizer"].values())
    # The share is rebuilt from the rows and the ledger: every recorded call counted once.
    prefix = summary["cacheable_prefix"]
    assert prefix["target"]["input_tokens"] == full["cacheable_prefix"]["target"]["input_tokens"]
    assert prefix["optimizer"]["input_tokens"] == sum(d["prompt_tokens"] for d in ledger if "prefix" in d)
    # The killed controller's embedded sandbox went away with it, and so did its containers (of
    # this run's two hosts only: other tests' embedded hosts may be running beside it).
    left = list_containers(docker_client, "skillopt.managed=1")
    assert [c.name for c in left if c.labels.get("skillopt.host", "") in summary["sandbox_hosts"]] == []


def test_fresh_run_prints_its_mode_and_baseline_and_no_callback_fails(full_run):
    log = (full_run / "train.log").read_text()
    assert "callback.failed" not in log
    assert json.loads((full_run / "runtime_state.json").read_text())["mode"]["simulated"] is True
    # Every optimizer call is on the ledger, and the summary counts exactly those.
    ledger = [json.loads(line) for line in (full_run / "optimizer_calls.jsonl").read_text().splitlines()]
    summary = json.loads((full_run / "summary.json").read_text())
    assert sum(d["calls"] for d in ledger) == sum(
        v["calls"] for v in summary["token_summary"]["optimizer"].values()
    )


def test_budget_stop_then_resume_with_a_larger_budget(tmp_path, docker_client):
    out = tmp_path / "budget"
    common = [
        "--set",
        "train.num_epochs=1",
        "--set",
        "evaluation.eval_test=false",
        "--set",
        "gradient.deep_reflect=true",
    ]
    proc = train(
        "--config", "spreadsheetbench_demo", "--out", str(out), "--set", "train.max_tokens=20000", *common
    )
    _, stderr = proc.communicate(timeout=900)
    assert proc.returncode == 0, stderr[-4000:]
    assert "stopped after step 1: token budget reached" in stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "stopped" and "train.max_tokens=20000" in summary["stop_reason"]
    assert summary["total_steps"] == 1 and "test_hard" not in summary
    # Deep reflect: the probe produced edits of its own.
    probe = json.loads((out / "steps/step_0001/probe/probe_patch.json").read_text())
    assert probe["patch"]["edits"], probe
    resumed = train("--resume", str(out), "--set", "train.max_tokens=10000000")
    _, stderr = resumed.communicate(timeout=900)
    assert resumed.returncode == 0, stderr[-4000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["total_steps"] == 2


@pytest.mark.parametrize("agent", ["codex_exec", "claude_code_exec"])
def test_exec_agents_complete_a_demo_run_offline(tmp_path, docker_client, agent):
    out = tmp_path / agent
    # One step over the whole train split, gated on 3 selection items: every CLI rollout is a
    # real agent process in a container, so the run is the fewest that shows the skill learned.
    proc = train(
        "--config", "spreadsheetbench_demo", "--out", str(out),
        "--set", f"env.agent={agent}", "--set", "train.num_epochs=1", "--set", "evaluation.eval_test=false",
        "--set", "train.batch_size=10", "--set", "evaluation.sel_env_num=3",
    )  # fmt: skip
    _, stderr = proc.communicate(timeout=900)
    assert proc.returncode == 0, stderr[-4000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["best_selection_hard"] > summary["baseline_selection_hard"], summary
    rows = [json.loads(line) for p in out.rglob("results.jsonl") for line in p.read_text().splitlines()]
    assert rows and not [r["fail_reason"] for r in rows if r.get("infra_error")]
    cli = "codex" if agent == "codex_exec" else "claude"
    assert {r["metrics"]["cli"] for r in rows} == {cli}
    # The CLI's calls are seen only by the gateway: its rows carry the gateway's usage.
    assert all(r["usage"]["calls"] >= 1 and r["usage"]["prompt_tokens"] > 0 for r in rows)
    assert summary["cacheable_prefix"]["target"]["input_tokens"] > 0
    assert "no scenario rule matched" not in (out / "train.log").read_text()


def test_a_real_run_without_a_key_stops_and_says_how_to_simulate(tmp_path):
    proc = train("--config", "spreadsheetbench", "--out", str(tmp_path / "real"))
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 2
    assert "OPENAI_API_KEY" in stderr and "--simulate on" in stderr
    assert not (tmp_path / "real").exists()


def test_resume_refuses_to_change_the_mode(full_run, tmp_path):
    proc = train("--resume", str(full_run), env={"OPENAI_API_KEY": "sk-not-used"})
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "--simulate on" in stderr, stderr[-2000:]
