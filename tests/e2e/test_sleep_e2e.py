"""End to end for ``skillopt sleep run --simulate`` as a real process, from a project folder with
``CLAUDE_CONFIG_DIR`` / ``CODEX_HOME`` pointed at a corpus (:mod:`skillopt.testing.sleep_run_corpus`):
harvest, mine, a short simulated training run through the embedded sandbox, the held-out
decision, staging; then ``adopt`` and ``revert`` from the CLI. A second corpus, whose best
proposal regresses one held-out test task, stages nothing and says why. One training run
each (about 10-15 s), shared by the assertions through module-scoped fixtures."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from skillopt.testing.sleep_run_corpus import (
    INJECTION,
    PLANTED_SECRETS,
    SKILL_NAME,
    RunCorpus,
    write_run_corpus,
)
from tests.e2e.remote import REPO


@dataclass(frozen=True)
class Sleep:
    corpus: RunCorpus
    run: subprocess.CompletedProcess[str]

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``skillopt ARGS`` in the project, keyless, with the corpus's CLI homes."""
        env = {
            **os.environ,
            "OPENAI_API_KEY": "",
            "ANTHROPIC_API_KEY": "",
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": str(REPO),
            "CLAUDE_CONFIG_DIR": str(self.corpus.claude_dir),
            "CODEX_HOME": str(self.corpus.codex_dir),
        }
        return subprocess.run(
            [sys.executable, "-m", "controller.cli", *args],
            cwd=self.corpus.project,
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
        )

    @property
    def sleep_dir(self) -> Path:
        return self.corpus.project / ".skillopt" / "sleep"


def _sleep_run(tmp: Path, *, regress: bool) -> Sleep:
    project = tmp / "proj"
    project.mkdir()
    corpus = write_run_corpus(tmp / "homes", project, regress=regress)
    first = Sleep(corpus, subprocess.CompletedProcess([], 0))
    run = first.cli("sleep", "run", "--simulate", "--skill", SKILL_NAME, "--set", "train.num_epochs=1")
    return Sleep(corpus, run)


@pytest.fixture(scope="module")
def staged(docker_client, tmp_path_factory) -> Iterator[Sleep]:
    yield _sleep_run(tmp_path_factory.mktemp("sleep-staged"), regress=False)


@pytest.fixture(scope="module")
def regressed(docker_client, tmp_path_factory) -> Iterator[Sleep]:
    yield _sleep_run(tmp_path_factory.mktemp("sleep-regress"), regress=True)


def _staging(s: Sleep) -> Path:
    (folder,) = (s.sleep_dir / "staging").iterdir()
    return folder


def test_run_stages_a_proposal_that_beats_the_live_skill_on_held_out_tasks(staged):
    assert staged.run.returncode == 0, staged.run.stderr[-4000:]
    assert "OFFLINE SIMULATION" in staged.run.stderr
    assert f"staged {SKILL_NAME}: held-out test" in staged.run.stdout
    folder = _staging(staged)
    manifest = json.loads((folder / "manifest.json").read_text())
    ev = manifest["evidence"]
    assert ev["proposal"]["mean"] > ev["live"]["mean"] and ev["proposal"]["n"] == ev["live"]["n"] >= 3
    assert ev["proposal"]["low"] <= ev["proposal"]["mean"] <= ev["proposal"]["high"]
    assert ev["gate"] and ev["gate"][-1]["action"].startswith("accept")
    assert ev["tasks"] and not any(t["regressed"] for t in ev["tasks"])
    assert set(ev["session_ids"]) == {f"claude-code:{sid}" for sid in staged.corpus.session_ids}
    assert Path(ev["run_dir"], "summary.json").is_file()
    report = (folder / "REPORT.md").read_text()
    assert (
        "## Evidence" in report and "```diff" in report and "Read the value from the working file" in report
    )


def test_transcript_text_telling_the_agent_to_change_its_skill_is_not_staged(staged):
    mined = staged.sleep_dir.glob("runs/*/mined/data/train.json")
    assert any(INJECTION in p.read_text() for p in mined)  # the hostile text did reach the train data
    for path in _staging(staged).rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            assert INJECTION not in text and "curl" not in text and "evil.example" not in text, path


def test_no_planted_secret_is_in_any_file_harvest_mine_training_or_staging_wrote(staged):
    assert staged.run.returncode == 0, staged.run.stderr[-4000:]
    files = [p for p in staged.sleep_dir.rglob("*") if p.is_file()]
    assert any(p.name == "train.json" for p in files) and any(p.name == "manifest.json" for p in files)
    for path in files:
        data = path.read_bytes()
        assert not any(secret.encode() in data for secret in PLANTED_SECRETS), path
    assert "[REDACTED:" in "".join(p.read_text() for p in staged.sleep_dir.glob("runs/*/harvest/**/*.json"))


def test_adopt_refuses_a_changed_live_skill_then_installs_and_revert_puts_it_back(staged):
    assert staged.run.returncode == 0, staged.run.stderr[-4000:]
    live = staged.corpus.live_dir / "SKILL.md"
    original = live.read_bytes()
    live.write_bytes(original + b"\nA line the user added by hand.\n")
    refused = staged.cli("sleep", "adopt", "--skill", SKILL_NAME)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert live.read_bytes().endswith(b"by hand.\n")  # left as the user wrote it
    live.write_bytes(original)
    adopted = staged.cli("sleep", "adopt", "--skill", SKILL_NAME)
    assert adopted.returncode == 0, adopted.stderr
    proposal = _staging(staged) / "proposal" / SKILL_NAME / "SKILL.md"
    assert live.read_bytes() == proposal.read_bytes()
    receipt = re.search(r"undo with: skillopt sleep revert (\S+)", adopted.stdout)
    assert receipt, adopted.stdout
    status = staged.cli("sleep", "status", "--json")
    assert status.returncode == 0 and "adopted" in status.stdout
    reverted = staged.cli("sleep", "revert", receipt.group(1))
    assert reverted.returncode == 0, reverted.stderr
    assert live.read_bytes() == original


def test_a_proposal_that_regresses_a_held_out_task_stages_nothing_and_says_why(regressed):
    assert regressed.run.returncode == 0, regressed.run.stderr[-4000:]
    out = regressed.run.stdout
    assert (
        "nothing staged: 1 held-out test task(s) passed with the live skill and fail with the proposal" in out
    )
    assert not (regressed.sleep_dir / "staging").exists()
    (decision,) = regressed.sleep_dir.glob("runs/*/decision.json")
    record = json.loads(decision.read_text())
    assert record["staged"] is False and record["proposal"]["mean"] > record["live"]["mean"]
    assert [t["task_id"] for t in record["tasks"] if t["regressed"]]
