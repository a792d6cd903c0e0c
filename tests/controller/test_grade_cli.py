"""``skillopt grade``: the JSON-on-stdout contract and its exit codes, run as a real process."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import openpyxl
import pytest

REPO = Path(__file__).resolve().parents[2]


def _xlsx(path: Path, cells: dict[str, object], title: str = "Sheet1") -> Path:
    wb = openpyxl.Workbook()
    wb.active.title = title
    for coord, value in cells.items():
        wb.active[coord] = value
    buf = io.BytesIO()
    wb.save(buf)
    path.write_bytes(buf.getvalue())
    return path


def _grade(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", "grade", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )


@pytest.fixture
def gold(tmp_path: Path) -> Path:
    return _xlsx(tmp_path / "gold.xlsx", {"A1": "total", "B1": 42, "B2": 1.5})


def test_pass(tmp_path: Path, gold: Path) -> None:
    pred = _xlsx(tmp_path / "pred.xlsx", {"A1": "total", "B1": 42.0, "B2": "1.50"})
    proc = _grade(str(pred), str(gold), "--answer-position", "'Sheet1'!A1:B2")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)  # exactly one JSON document
    assert out["pass"] is True and out["reason"] == ""
    assert out["n_cells"] == 4 and out["n_mismatches"] == 0 and out["mismatches"] == []


def test_fail(tmp_path: Path, gold: Path) -> None:
    pred = _xlsx(tmp_path / "pred.xlsx", {"A1": "total", "B1": 41})
    proc = _grade(str(pred), str(gold), "--answer-position", "A1:B2", "--answer-sheet", "Sheet1", "--report")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["pass"] is False
    assert out["reason"] == "value@Sheet1!B1: gt=42.0 pred=41.0"
    assert out["n_mismatches"] == 2
    assert out["mismatches"][0] == {"sheet": "Sheet1", "cell": "B1", "expected": 42.0, "got": 41.0}
    assert "Sheet1!B2: got=None, expected=1.5 ✗" in out["report"]


def test_missing_sheet_is_a_fail_not_an_error(tmp_path: Path, gold: Path) -> None:
    pred = _xlsx(tmp_path / "pred.xlsx", {"A1": "total"}, title="Other")
    proc = _grade(str(pred), str(gold), "--answer-position", "'Sheet1'!A1")
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["reason"] == "worksheet not found: Sheet1"


@pytest.mark.parametrize("which", ["pred", "gold"])
@pytest.mark.parametrize("problem", ["missing", "not_xlsx"])
def test_unreadable_file_exits_2(tmp_path: Path, gold: Path, which: str, problem: str) -> None:
    good = _xlsx(tmp_path / "good.xlsx", {"A1": "total"})
    bad = tmp_path / "bad.xlsx"
    if problem == "not_xlsx":
        bad.write_text("a,b\n1,2\n")
    pred, gold_arg = (bad, gold) if which == "pred" else (good, bad)
    proc = _grade(str(pred), str(gold_arg), "--answer-position", "A1")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "bad.xlsx" in proc.stderr or "gold" in proc.stderr
    assert proc.stderr.strip()


def test_bad_answer_position_exits_2(tmp_path: Path, gold: Path) -> None:
    proc = _grade(str(gold), str(gold), "--answer-position", "BD2:308")
    assert proc.returncode == 2 and "BD2:308" in proc.stderr and proc.stdout == ""


def test_help_lists_grade() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "controller.cli", "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert proc.returncode == 0 and "grade" in proc.stdout


def test_mode_selects_official_or_corrected_verdicts(tmp_path: Path, gold: Path) -> None:
    pred = _xlsx(tmp_path / "pred.xlsx", {"A1": "total", "B1": 42, "B2": 1.5}, title="sheet1")
    verdicts = {}
    for mode in ("corrected", "official"):
        proc = _grade(str(pred), str(gold), "--answer-position", "'Sheet1'!A1:B2", "--mode", mode)
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)
        assert out["mode"] == mode
        verdicts[mode] = (out["pass"], out["reason"])
    # Sheet names match case-insensitively only in the corrected mode (the deliberate difference).
    assert verdicts == {"corrected": (True, ""), "official": (False, "worksheet not found: Sheet1")}
    default = json.loads(_grade(str(pred), str(gold), "--answer-position", "'Sheet1'!A1:B2").stdout)
    assert default["mode"] == "corrected" and default["pass"] is True
