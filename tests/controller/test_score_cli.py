"""``skillopt score``: one raw item exactly as in the data files, one response, one JSON object
on stdout; run as a real process for every question-answering env."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from skillopt.testing.shared_data import shared_datasets

REPO = Path(__file__).resolve().parents[2]


def _score(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", "score", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )


def _first_item(env: str, name: str) -> str:
    """The first item of a shared data file, as its exact text."""
    path = shared_datasets() / env / name
    if path.suffix == ".jsonl":
        return path.read_text(encoding="utf-8").splitlines()[0]
    return json.dumps(json.loads(path.read_text(encoding="utf-8"))[0], ensure_ascii=False)


# env, file, a right response, a wrong response, the answer the right one yields
ENVS = [
    ("searchqa", "train.json", "<answer>Tom Clancy</answer>", "<answer>Clive Cussler</answer>", "Tom Clancy"),
    ("livemathematicianbench", "train.json", "Thus <answer>A</answer>", "<answer>B</answer>", "A"),
    ("gsm8k", "test.jsonl", "So she makes <answer>$18.00</answer> a day.", "<answer>17</answer>", "18"),
    ("math500", "test.jsonl", "\\boxed{\\left(3, \\dfrac{\\pi}{2}\\right)}", "\\boxed{(3, \\pi)}", None),
    ("hotpotqa", "dev.jsonl", "<answer>Beer and whisky</answer>", "<answer>gin</answer>", "Beer and whisky"),
]


@pytest.mark.parametrize(("env", "name", "right", "wrong", "answer"), ENVS)
def test_one_json_object_with_hard_soft_and_the_answer(tmp_path, env, name, right, wrong, answer):
    item = tmp_path / "item.json"
    item.write_text(_first_item(env, name), encoding="utf-8")
    for response, hard in ((right, 1.0), (wrong, 0.0)):
        (tmp_path / "response.txt").write_text(response, encoding="utf-8")
        res = _score("--env", env, "--item", str(item), "--response", str(tmp_path / "response.txt"))
        assert res.returncode == 0, res.stderr
        lines = res.stdout.splitlines()
        assert len(lines) == 1
        out = json.loads(lines[0])
        assert out["hard"] == hard and 0.0 <= out["soft"] <= 1.0
        assert out["env"] == env and out["answer"] == out["predicted_answer"]
        if hard and answer is not None:
            assert out["answer"] == answer
        assert (out["fail_reason"] == "") == bool(hard)


def test_unusable_input_is_exit_2_with_a_message_and_nothing_on_stdout(tmp_path):
    item = tmp_path / "item.json"
    response = tmp_path / "r.txt"
    response.write_text("<answer>x</answer>")
    cases = []
    item.write_text('{"question": "What?"}')  # no answer field
    cases.append((["--env", "gsm8k", "--item", str(item), "--response", str(response)], "'answer'"))
    cases.append((["--env", "nope", "--item", str(item), "--response", str(response)], "unknown env"))
    cases.append(
        (["--env", "spreadsheetbench", "--item", str(item), "--response", str(response)], "skillopt grade")
    )
    cases.append(
        (
            ["--env", "gsm8k", "--item", str(tmp_path / "missing.json"), "--response", str(response)],
            "cannot read",
        )
    )
    (tmp_path / "bad.json").write_text("{not json")
    cases.append(
        (["--env", "gsm8k", "--item", str(tmp_path / "bad.json"), "--response", str(response)], "not JSON")
    )
    (tmp_path / "list.json").write_text("[1, 2]")
    cases.append(
        (
            ["--env", "gsm8k", "--item", str(tmp_path / "list.json"), "--response", str(response)],
            "one JSON object",
        )
    )
    for args, needle in cases:
        res = _score(*args)
        assert res.returncode == 2, (args, res.stdout, res.stderr)
        assert res.stdout == "" and needle in res.stderr, (args, res.stderr)


# -- code envs: graded by running the program in fresh grading containers --------------------------


def _code_item(env: str) -> dict:
    if env == "humaneval":
        return json.loads((shared_datasets() / "humaneval" / "HumanEval.jsonl").read_text().splitlines()[2])
    return json.loads((shared_datasets() / "mbpp" / "sanitized-mbpp.json").read_text())[5]


@pytest.mark.parametrize("env", ["humaneval", "mbpp"])
def test_a_code_env_grades_the_program_in_a_container(tmp_path, env, docker_client):
    raw = _code_item(env)
    reference = raw["prompt"] + raw["canonical_solution"] if env == "humaneval" else raw["code"]
    item = tmp_path / "item.json"
    item.write_text(json.dumps(raw), encoding="utf-8")
    entry = raw.get("entry_point") or reference.split("def ", 1)[1].split("(", 1)[0]
    wrong = f"def {entry}(*args):\n    return None\n"
    for response, hard in ((f"Here:\n```python\n{reference}\n```\n", 1.0), (wrong, 0.0)):
        (tmp_path / "response.txt").write_text(response, encoding="utf-8")
        res = _score("--env", env, "--item", str(item), "--response", str(tmp_path / "response.txt"))
        assert res.returncode == 0, res.stderr
        (line,) = res.stdout.splitlines()
        out = json.loads(line)
        assert out["env"] == env and out["hard"] == hard and 0.0 <= out["soft"] <= 1.0
        assert out["n_tests"] == len(out["cases"]) >= 1 and out["answer"] == out["predicted_answer"]
        assert bool(out["fail_reason"]) == (hard == 0.0)


def test_a_code_env_without_docker_says_so(tmp_path):
    item = tmp_path / "item.json"
    item.write_text(json.dumps(_code_item("mbpp")), encoding="utf-8")
    (tmp_path / "response.txt").write_text("def f():\n    return 1\n", encoding="utf-8")
    res = subprocess.run(
        [sys.executable, "-m", "controller.cli", "score", "--env", "mbpp", "--item", str(item), "--response",
         str(tmp_path / "response.txt")],
        capture_output=True, text=True, cwd=REPO, timeout=120, check=False,
        env={**__import__("os").environ, "DOCKER_HOST": "unix:///nonexistent/docker.sock"},
    )  # fmt: skip
    assert res.returncode == 2 and res.stdout == ""
    assert "Docker is not reachable" in res.stderr


def test_textworld_replays_an_action_list_on_the_game_of_a_seed(tmp_path, docker_client):
    from skillopt.envs.textworld.games import GameSpec, ensure_game

    game = {"challenge": "tw-treasure_hunter", "level": 1, "seed": 203}
    walkthrough = ensure_game(GameSpec(**game, split="val")).walkthrough
    item = tmp_path / "game.json"
    item.write_text(json.dumps(game))
    right, wrong = tmp_path / "right.txt", tmp_path / "wrong.json"
    right.write_text("\n".join(walkthrough) + "\n")
    wrong.write_text(json.dumps(["look", "inventory"]))
    won = _score("--env", "textworld", "--item", str(item), "--response", str(right))
    assert won.returncode == 0, won.stderr
    out = json.loads(won.stdout)
    assert out["won"] is True and out["hard"] == 1.0 and out["score"] == out["max_score"] >= 1
    assert out["actions"] == len(walkthrough) and out["id"] == "treasure_hunter-l1-s203"
    lost = json.loads(_score("--env", "textworld", "--item", str(item), "--response", str(wrong)).stdout)
    assert lost["won"] is False and lost["hard"] == 0.0 and lost["fail_reason"].startswith("not won")
    item.write_text(json.dumps({"challenge": "tw-treasure_hunter", "seed": 1}))
    bad = _score("--env", "textworld", "--item", str(item), "--response", str(right))
    assert bad.returncode == 2 and "'level' is missing" in bad.stderr and bad.stdout == ""


def test_the_help_lists_every_env_score_takes_from_the_registry(capsys):
    from controller.cli import main
    from skillopt.envs.registry import available_envs, env_spec

    with pytest.raises(SystemExit):
        main(["score", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    listed = text.split("the env whose grader scores:", 1)[1].split("--item", 1)[0]
    takes = [e for e in available_envs() if env_spec(e).raw_item] + ["textworld"]
    assert all(env in listed for env in takes), listed
    assert "spreadsheetbench" not in listed  # graded with `skillopt grade`, not here
    assert "humaneval (164 problems)" in text and "mbpp (427 problems)" in text
    assert "plus tests are not run" in text
