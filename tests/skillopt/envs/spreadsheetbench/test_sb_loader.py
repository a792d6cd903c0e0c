"""Data root, splits and task building (a synthetic root, the vendored sample and the shared set)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sb_xlsx import build_xlsx

from skillopt.envs.spreadsheetbench.loader import (
    ROOT_ENV_VAR,
    SAMPLE_ROOT,
    SpreadsheetBenchData,
    SpreadsheetBenchDataError,
    default_data_root,
    discover_cases,
    largest_remainder,
    task_type_of,
)
from skillopt.errors import ConfigError
from skillopt.types import Grading, Task


def _record(tid: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": tid,
        "instruction": f"do {tid}",
        "instruction_type": "Cell-Level Manipulation",
        "answer_position": "A1",
        "spreadsheet_path": f"spreadsheet/{tid}",
        "release": "verified_400",
        "split": "train",
        **extra,
    }


def _write_root(root: Path, records: list[dict[str, Any]], splits: dict[str, list[str]]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "dataset.json").write_text(json.dumps(records))
    (root / "splits.json").write_text(json.dumps(splits))
    wb = build_xlsx({"S": {"A1": 1}})
    for rec in records:
        folder = root / rec.get("spreadsheet_path", f"spreadsheet/{rec['id']}")
        folder.mkdir(parents=True, exist_ok=True)
        for n in (1, 2):
            (folder / f"{n}_{rec['id']}_input.xlsx").write_bytes(wb)
            (folder / f"{n}_{rec['id']}_answer.xlsx").write_bytes(wb)
    return root


@pytest.fixture
def root(tmp_path: Path) -> Path:
    records = [_record(f"t{i}") for i in range(10)]
    records[1]["instruction_type"] = "Sheet-Level Manipulation"
    records[2]["answer_sheet"] = "Sheet1"
    return _write_root(
        tmp_path / "root",
        records,
        {"train": ["t0", "t1", "t2"], "val": ["t3", "t4"], "extra": ["t5", "t6", "t7", "t8", "t9"]},
    )


def test_tasks_and_splits(root: Path) -> None:
    data = SpreadsheetBenchData(root)
    assert len(data) == 10 and "t3" in data and data.ids[0] == "t0"
    assert [r.id for r in data.split("train")] == ["t0", "t1", "t2"]
    for alias in ("val", "valid_seen", "selection"):
        assert [r.id for r in data.split(alias)] == ["t3", "t4"]
    # No 'test' in splits.json: test means 'extra', and describe() says so.
    assert data.test_split_key == "extra"
    for alias in ("test", "valid_unseen", "extra"):
        assert [r.id for r in data.split(alias)] == ["t5", "t6", "t7", "t8", "t9"]
    assert "'test' maps to 'extra'" in data.describe()
    assert data.task("t6").split == "extra"


def test_unknown_split_lists_the_available_ones(root: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"unknown split 'dev'.*available: extra, selection, test, train, val"
    ):
        SpreadsheetBenchData(root).split("dev")


def test_real_test_split_wins_over_extra(tmp_path: Path) -> None:
    records = [_record(t) for t in ("a", "b", "c")]
    data = SpreadsheetBenchData(
        _write_root(tmp_path, records, {"train": ["a"], "test": ["b"], "extra": ["c"]})
    )
    assert [r.id for r in data.split("test")] == ["b"] and [r.id for r in data.split("extra")] == ["c"]
    assert "maps to" not in data.describe()


def test_build_task(root: Path) -> None:
    data = SpreadsheetBenchData(root)
    task, grading = data.build_task("t2")
    assert isinstance(task, Task) and isinstance(grading, Grading)
    assert task.id == "t2" and task.instruction == "do t2"
    assert [c.name for c in task.cases] == ["1", "2"] == [c.name for c in grading.cases]
    assert [f.name for c in task.cases for f in c.files] == ["input.xlsx", "input.xlsx"]
    assert [f.name for c in grading.cases for f in c.files] == ["answer.xlsx", "answer.xlsx"]
    assert task.cases[0].files[0].content.startswith(b"PK")
    assert dict(task.attributes) == {
        "instruction_type": "Cell-Level Manipulation",
        "task_type": "cell_level",
        "answer_position": "A1",
        "answer_sheet": "Sheet1",
        "release": "verified_400",
        "split": "train",
    }
    assert dict(grading.attributes) == {"answer_position": "A1", "answer_sheet": "Sheet1"}
    assert data.build_task("t0")[0].attributes["answer_sheet"] == ""  # absent → ""
    assert data.build_task("t2") is data.build_task(data.task("t2"))  # cached


def test_task_type() -> None:
    assert task_type_of("Cell-Level Manipulation") == "cell_level"
    assert task_type_of("Sheet-Level Manipulation") == "sheet_level"
    assert task_type_of("Formatting") == "other"


def test_case_patterns(tmp_path: Path) -> None:
    wb = build_xlsx({"S": {}})
    d = tmp_path / "x"
    d.mkdir()
    for name in ("3_x_input.xlsx", "3_x_answer.xlsx", "10_x_init.xlsx", "10_x_golden.xlsx", "2_x_init.xlsx"):
        (d / name).write_bytes(wb)
    (d / "2_x_golden.xlsx").write_bytes(wb)
    (d / "notes.txt").write_text("ignored")
    cases = discover_cases(d, "x")
    assert [c.name for c in cases] == ["2", "3", "10"]  # numeric order, not text order
    assert cases[1].input_path.name == "3_x_input.xlsx" and cases[0].answer_path.name == "2_x_golden.xlsx"
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "initial.xlsx").write_bytes(wb)
    (bare / "golden.xlsx").write_bytes(wb)
    assert [(c.name, c.input_path.name, c.answer_path.name) for c in discover_cases(bare, "whatever")] == [
        ("1", "initial.xlsx", "golden.xlsx")
    ]


def test_incomplete_or_missing_cases_are_errors(tmp_path: Path) -> None:
    d = tmp_path / "y"
    d.mkdir()
    with pytest.raises(SpreadsheetBenchDataError, match="no test case"):
        discover_cases(d, "y")
    (d / "1_y_input.xlsx").write_bytes(b"PK")
    with pytest.raises(SpreadsheetBenchDataError, match=r"case 1 has only 1_y_input\.xlsx"):
        discover_cases(d, "y")
    with pytest.raises(SpreadsheetBenchDataError, match="does not exist"):
        discover_cases(tmp_path / "nope", "nope")


def test_absolute_spreadsheet_path(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    rec = _record("abs", spreadsheet_path=str(elsewhere))
    root = _write_root(tmp_path / "r", [rec], {"train": ["abs"]})
    assert SpreadsheetBenchData(root).task("abs").directory == elsewhere
    assert len(SpreadsheetBenchData(root).task("abs").cases) == 2


def test_bad_roots_say_what_to_set(tmp_path: Path) -> None:
    with pytest.raises(SpreadsheetBenchDataError, match=f"dataset.json not found.*{ROOT_ENV_VAR}"):
        SpreadsheetBenchData(tmp_path / "missing")
    (tmp_path / "dataset.json").write_text("[")
    (tmp_path / "splits.json").write_text("{}")
    with pytest.raises(SpreadsheetBenchDataError, match=r"cannot read dataset\.json"):
        SpreadsheetBenchData(tmp_path)
    (tmp_path / "dataset.json").write_text(json.dumps([_record("a"), _record("a")]))
    with pytest.raises(SpreadsheetBenchDataError, match="duplicate task id 'a'"):
        SpreadsheetBenchData(tmp_path)
    (tmp_path / "dataset.json").write_text(json.dumps([_record("a")]))
    (tmp_path / "splits.json").write_text(json.dumps({"train": ["a", "ghost"]}))
    with pytest.raises(SpreadsheetBenchDataError, match="ghost"):
        SpreadsheetBenchData(tmp_path)


def test_default_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(ROOT_ENV_VAR, raising=False)
    assert default_data_root() == SAMPLE_ROOT
    monkeypatch.setenv(ROOT_ENV_VAR, str(tmp_path))
    assert default_data_root() == tmp_path


def test_largest_remainder() -> None:
    assert largest_remainder(256, [2, 1, 7]) == [51, 26, 179]  # quotas 51.2, 25.6, 179.2
    assert largest_remainder(10, [1, 1, 1]) == [4, 3, 3]  # equal remainders: first position
    assert largest_remainder(3, [1, 2, 0]) == [1, 2, 0]
    assert largest_remainder(5, [1, 3]) == [1, 4]  # 1.25 / 3.75
    # Tie on the remainder (0.5 each): the larger weight gets the item.
    assert largest_remainder(3, [1, 3, 2]) == [0, 2, 1]  # quotas 0.5, 1.5, 1.0
    assert largest_remainder(2, [1, 3]) == [0, 2]  # 0.5 / 1.5 → tie broken by weight 3
    assert sum(largest_remainder(17, [0.2, 0.1, 0.7])) == 17
    with pytest.raises(ValueError):
        largest_remainder(3, [0, 0])


def test_ratio_split_is_seeded_and_complete(root: Path) -> None:
    data = SpreadsheetBenchData(root)
    a = data.ratio_split("2:1:7", seed=42)
    assert {k: len(v) for k, v in a.items()} == {"train": 2, "val": 1, "test": 7}
    ids = [r.id for part in a.values() for r in part]
    assert sorted(ids) == sorted(data.ids)  # a partition of all tasks
    assert a == data.ratio_split("2:1:7", seed=42)
    assert {k: [r.id for r in v] for k, v in a.items()} != {
        k: [r.id for r in v] for k, v in data.ratio_split("2:1:7", seed=7).items()
    }
    assert {k: len(v) for k, v in data.ratio_split((1, 1, 0)).items()} == {"train": 5, "val": 5, "test": 0}
    for bad in ("2:1", "a:b:c", "1:-1:1"):
        with pytest.raises(ValueError):
            data.ratio_split(bad)


def test_vendored_sample_builds() -> None:
    data = SpreadsheetBenchData(SAMPLE_ROOT)
    assert len(data) > 0
    for name in ("train", "val", "test"):
        assert data.split(name)
    for rec in data.records:
        task, grading = data.build_task(rec)
        assert task.cases and len(task.cases) == len(grading.cases)


def test_shared_dataset(shared_root: Path) -> None:
    data = SpreadsheetBenchData(shared_root)
    assert len(data) == 256
    assert (len(data.split("train")), len(data.split("val")), len(data.split("test"))) == (80, 40, 136)
    assert sum(len(r.cases) for r in data.records) == 526
    assert {r.task_type for r in data.records} == {"cell_level", "sheet_level"}
