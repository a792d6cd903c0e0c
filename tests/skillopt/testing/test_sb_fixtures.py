"""The vendored SpreadsheetBench sample and its reference scripts.

The scripts are OUR trusted fixtures, so they run in a host subprocess here (LLM-written code only
ever runs in the sandbox). Every ``solution.py`` must pass every test case of its task under the
project's grader, every ``wrong.py`` must run cleanly and fail at least one case, every
``crash.py`` must exit non-zero.
"""

from __future__ import annotations

import filecmp
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from skillopt.testing.fixtures.spreadsheetbench import (
    FIXTURES_DIR,
    SAMPLE_DIR,
    crash_task_ids,
    load_catalogue,
    solution_code,
    task_ids,
)
from skillopt.testing.fixtures.spreadsheetbench.verify import (
    PATH_ASSIGNMENT,
    TaskReport,
    case_files,
    harness_code,
    load_tasks,
    verify_all,
)
from skillopt.testing.shared_data import shared_datasets

SPLIT_SIZES = {"train": 10, "val": 5, "test": 3}
SAMPLE_MAX_BYTES = 4 * 1024 * 1024
# The full shared data set the sample was copied from (required: CI has it).
_SHARED = shared_datasets()
SHARED_DIR = (_SHARED / "spreadsheetbench") if _SHARED else FIXTURES_DIR / "missing-shared-datasets"

TASK_IDS = task_ids()
CRASH_IDS = crash_task_ids()


@pytest.fixture(scope="module")
def reports() -> dict[str, TaskReport]:
    return {r.task_id: r for r in verify_all()}


def _splits() -> dict[str, list[str]]:
    return json.loads((SAMPLE_DIR / "splits.json").read_text(encoding="utf-8"))


# ------------------------------------------------------------------------------------------
# the sample data


def test_splits_have_the_expected_sizes_and_are_disjoint() -> None:
    splits = _splits()
    assert {k: len(v) for k, v in splits.items()} == SPLIT_SIZES
    all_ids = [i for ids in splits.values() for i in ids]
    assert len(all_ids) == len(set(all_ids)), "an id appears in two splits"


def test_split_ids_exist_in_dataset_with_their_spreadsheets() -> None:
    tasks = load_tasks()
    split_ids = {i for ids in _splits().values() for i in ids}
    assert split_ids == set(tasks), "splits.json and dataset.json must list the same ids"
    for tid in split_ids:
        cases = case_files(SAMPLE_DIR, tasks[tid])
        assert cases, f"{tid}: no test cases"
        assert [n for n, _, _ in cases] == list(range(1, len(cases) + 1)), f"{tid}: case numbers"
        for _, input_path, answer_path in cases:
            assert input_path.is_file(), input_path
            assert answer_path.is_file(), answer_path


def test_sample_mix_and_size() -> None:
    tasks = load_tasks()
    types = Counter(t["instruction_type"] for t in tasks.values())
    assert types["Cell-Level Manipulation"] >= 3 and types["Sheet-Level Manipulation"] >= 3
    n_cases = {tid: len(case_files(SAMPLE_DIR, t)) for tid, t in tasks.items()}
    assert sum(1 for n in n_cases.values() if n == 3) >= 3, "need >= 3 tasks with 3 test cases"
    assert any(re.search(r"'[^']+'\s*!", t["answer_position"]) for t in tasks.values()), (
        "need an answer_position with a quoted sheet name"
    )
    total = sum(p.stat().st_size for p in SAMPLE_DIR.rglob("*") if p.is_file())
    assert total < SAMPLE_MAX_BYTES


def test_sample_readme_carries_attribution_and_licence() -> None:
    text = (SAMPLE_DIR / "README.md").read_text(encoding="utf-8")
    assert "arXiv:2406.14991" in text
    assert "CC BY-SA 4.0" in text
    for tid in load_tasks():
        assert f"| {tid} |" in text, f"README does not list {tid}"


def test_sample_is_an_unchanged_copy_of_the_shared_data() -> None:
    shared = load_tasks(SHARED_DIR)
    for tid, record in load_tasks().items():
        assert record == shared[tid], f"{tid}: task record differs from the shared data"
        cases = case_files(SAMPLE_DIR, record)
        assert len(cases) == len(case_files(SHARED_DIR, shared[tid])), f"{tid}: cases missing"
        for _, input_path, answer_path in cases:
            for path in (input_path, answer_path):
                original = SHARED_DIR / "spreadsheet" / tid / path.name
                assert filecmp.cmp(path, original, shallow=False), f"{path.name} differs"


# ------------------------------------------------------------------------------------------
# the catalogue and the loader


def test_catalogue_covers_the_sample_with_a_few_general_rules() -> None:
    catalogue = load_catalogue()
    assert set(catalogue["tasks"]) == set(load_tasks())
    used = Counter(entry["rule"] for entry in catalogue["tasks"].values())
    assert set(used) <= set(catalogue["rules"]), "a task names an unknown rule"
    assert len(used) >= 4, "use at least 4 different rules"
    assert min(used.values()) >= 2, f"every rule needs >= 2 tasks: {used}"
    for entry in catalogue["tasks"].values():
        assert entry["why"].strip()
    assert all(text.strip() for text in catalogue["rules"].values())
    assert len(CRASH_IDS) >= 2


def test_every_task_has_a_solution_and_a_wrong_script() -> None:
    for tid in TASK_IDS:
        for kind in ("solution", "wrong"):
            code = solution_code(tid, kind)
            assert "OUTPUT_PATH" in code and "INPUT_PATH" in code
            assert not re.search(r"^\s*from\s+__future__", code, re.MULTILINE), "breaks prepending"


def test_solution_code_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        solution_code(TASK_IDS[0], "answer")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        solution_code("../x")
    no_crash = next(tid for tid in TASK_IDS if tid not in CRASH_IDS)
    with pytest.raises(FileNotFoundError):
        solution_code(no_crash, "crash")


def test_harness_code_strips_path_assignments_and_prepends_real_paths() -> None:
    code = 'import x\nINPUT_PATH = "a.xlsx"\n  OUTPUT_PATH="b.xlsx"  # note\nprint(INPUT_PATH)\n'
    out = harness_code(code, Path("/in/1.xlsx"), Path("/out/1.xlsx"))
    lines = out.splitlines()
    assert lines[0] == "INPUT_PATH = '/in/1.xlsx'"
    assert lines[1] == "OUTPUT_PATH = '/out/1.xlsx'"
    assert "a.xlsx" not in out and "b.xlsx" not in out
    assert "print(INPUT_PATH)" in out
    assert PATH_ASSIGNMENT.search("INPUT_PATH_X = 1") is None  # only the two exact names


# ------------------------------------------------------------------------------------------
# running the reference scripts


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_solution_passes_every_case(reports: dict[str, TaskReport], task_id: str) -> None:
    report = reports[task_id]
    assert report.n_cases >= 1
    assert report.solution_ok, report.problems()


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_wrong_runs_but_fails_grading(reports: dict[str, TaskReport], task_id: str) -> None:
    report = reports[task_id]
    assert all(o.exec_ok for o in report.wrong), report.problems()
    assert any(not o.passed for o in report.wrong), "wrong.py passed every case"


@pytest.mark.parametrize("task_id", CRASH_IDS)
def test_crash_exits_nonzero(reports: dict[str, TaskReport], task_id: str) -> None:
    report = reports[task_id]
    assert report.has_crash and report.crash
    assert report.crash_ok, report.problems()
