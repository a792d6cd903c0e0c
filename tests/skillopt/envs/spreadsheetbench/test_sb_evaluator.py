"""Grading behaviour beyond single values: sheets, merges, formulas, reports, scores, gold errors."""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Callable
from pathlib import Path

import openpyxl
import pytest
from sb_xlsx import build_xlsx

from skillopt.envs.spreadsheetbench import evaluator, workbook
from skillopt.envs.spreadsheetbench.evaluator import (
    CaseVerdict,
    GradingDataError,
    case_result,
    feedback_report,
    grade_case,
    score_cases,
    verification_report,
)
from skillopt.errors import ConfigError
from skillopt.types import CaseResult

MakeXlsx = Callable[..., Path]


def test_defusedxml_protects_openpyxl() -> None:
    import defusedxml.ElementTree
    from openpyxl.xml import functions

    assert workbook.DEFUSEDXML_ACTIVE
    assert functions.iterparse is defusedxml.ElementTree.iterparse


def test_missing_sheet_is_reported(make_xlsx: MakeXlsx) -> None:
    gold = make_xlsx({"Input": {"A1": 1}, "Result": {"B2": 5}})
    pred = make_xlsx({"Input": {"A1": 1}})
    v = grade_case(pred, gold, "'Input'!A1,'Result'!B2")
    assert not v.ok
    assert v.reason == "worksheet not found: Result"
    assert v.missing_sheets == ("Result",)
    assert v.n_cells == 1 and v.n_mismatches == 0  # cells of the missing sheet are not counted
    assert v.stage == "eval"


def test_first_mismatch_in_position_order_column_major(make_xlsx: MakeXlsx) -> None:
    gold = make_xlsx({"S": {"A1": 1, "A2": 2, "B1": 3, "B2": 4}})
    pred = make_xlsx({"S": {"A1": 1, "A2": 2, "B1": 30, "B2": 40}})
    v = grade_case(pred, gold, "A1:B2")
    assert v.reason == "value@S!B1: gt=3.0 pred=30.0"
    assert [m.cell for m in v.mismatches] == ["B1", "B2"]
    assert v.n_cells == 4 and v.n_mismatches == 2


def test_case_insensitive_sheet_names(make_xlsx: MakeXlsx) -> None:
    gold = make_xlsx({"Sheet1": {"A1": "x"}})
    pred = make_xlsx({"SHEET1": {"A1": "x"}})
    assert grade_case(pred, gold, "'sheet1'!A1").ok


def test_merged_cells_read_as_normal_mode_openpyxl(tmp_path: Path) -> None:
    """Normal-mode openpyxl (the official grader) blanks the non-anchor cells of a merge even
    when the file stores values there (real files do, e.g. task 124-46); so must we."""
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "S"
    ws["A1"], ws["A2"] = "anchor", "hidden"
    ws["B1"] = "plain"
    buf = io.BytesIO()
    wb.save(buf)
    # Add <mergeCells> by hand so that A2 keeps its stored value (openpyxl would drop it).
    data = _patch_sheet_xml(
        buf.getvalue(),
        b"</sheetData>",
        b'</sheetData><mergeCells count="1"><mergeCell ref="A1:A2"/></mergeCells>',
    )
    path = tmp_path / "merged.xlsx"
    path.write_bytes(data)
    normal = openpyxl.load_workbook(path, data_only=True)["S"]
    assert normal["A2"].value is None  # the official reading
    gold = tmp_path / "gold.xlsx"
    gold.write_bytes(build_xlsx({"S": {"A1": "anchor", "B1": "plain"}}))
    v = grade_case(path, gold, "A1:B2")
    assert v.ok, v.reason


def _patch_sheet_xml(data: bytes, old: bytes, new: bytes) -> bytes:
    import zipfile

    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            content = src.read(info.filename)
            if info.filename == "xl/worksheets/sheet1.xml":
                assert old in content
                content = content.replace(old, new, 1)
            dst.writestr(info, content)
    return out.getvalue()


def test_formula_without_cached_value_reads_none_and_is_reported(make_xlsx: MakeXlsx) -> None:
    gold = make_xlsx({"S": {"A1": 1, "A2": 2, "A3": 3}})
    pred = make_xlsx({"S": {"A1": 1, "A2": 2, "A3": "=A1+A2"}})  # openpyxl saves no cached value
    v = grade_case(pred, gold, "A3")
    assert not v.ok and v.reason == "value@S!A3: gt=3.0 pred=None"
    assert v.formulas == ("S!A3: =A1+A2",)
    report = verification_report(v)
    assert "WARNING: the output workbook contains formulas" in report and "S!A3: =A1+A2" in report
    assert grade_case(pred, gold, "A3", collect_formulas=False).formulas == ()


def test_formula_list_is_capped_at_ten(make_xlsx: MakeXlsx) -> None:
    cells = {f"A{i}": f"=ROW()+{i}" for i in range(1, 30)}
    v = grade_case(make_xlsx({"S": cells}), make_xlsx({"S": {"B1": 1}}), "B1")
    assert len(v.formulas) == 10


def test_verification_report_lines(make_xlsx: MakeXlsx) -> None:
    gold = make_xlsx({"S": {"A1": 1, "A2": "b", "B1": dt.datetime(2024, 1, 1)}})
    pred = make_xlsx({"S": {"A1": 1, "A2": "c", "B1": dt.datetime(2024, 1, 1)}})
    v = grade_case(pred, gold, "A1:B3")
    report = verification_report(v)
    lines = report.splitlines()
    assert lines[0] == "[verification] FAIL: 5/6 answer cells match"
    assert "S!A1: got=1.0, expected=1.0 ✓" in lines
    assert "S!A2: got='c', expected='b' ✗" in lines
    assert "S!B1: got=45292.0, expected=45292.0 ✓" in lines
    assert "(3 answer cells empty in both prediction and gold, not listed)" in lines
    assert not any(line.startswith("S!A3") for line in lines)  # empty on both sides: collapsed


def test_report_is_truncated_head_and_tail(make_xlsx: MakeXlsx) -> None:
    cells = {f"A{i}": f"value-{i}" for i in range(1, 3001)}
    v = grade_case(make_xlsx({"S": cells}), make_xlsx({"S": {}}), "A1:A3000")
    report = verification_report(v)
    assert len(report) <= evaluator.REPORT_MAX_CHARS
    assert report.startswith("[verification] FAIL: 0/3000")
    assert "characters truncated" in report
    assert report.rstrip().endswith("S!A3000: got='value-3000', expected=None ✗")


def test_feedback_report_hides_expected_values(make_xlsx: MakeXlsx) -> None:
    gold = make_xlsx({"S": {"A1": "SECRET-1", "A2": "SECRET-2", "A3": "same"}})
    pred = make_xlsx({"S": {"A1": "mine-1", "A2": None, "A3": "same"}})
    v = grade_case(pred, gold, "A1:A3")
    text = feedback_report(v)
    assert "SECRET" not in text and "expected" not in text.lower()
    assert "S!A1: your output = 'mine-1' (WRONG)" in text
    assert "S!A2: your output = None (WRONG)" in text
    assert "2 checked cells are wrong, 1 are correct." in text
    assert feedback_report(grade_case(gold, gold, "A1:A3")).startswith("All 3 checked cells are correct")


def test_feedback_report_caps_the_list(make_xlsx: MakeXlsx) -> None:
    v = grade_case(make_xlsx({"S": {f"A{i}": i for i in range(1, 101)}}), make_xlsx({"S": {}}), "A1:A100")
    text = feedback_report(v, max_wrong=10)
    assert text.count("(WRONG)") == 10 and "... and 90 more wrong cells" in text


def test_scores() -> None:
    ok = CaseVerdict(ok=True, reason="")
    bad = CaseVerdict(ok=False, reason="x")
    assert score_cases([]) == (0.0, 0.0)
    assert score_cases([ok, ok]) == (1.0, 1.0)
    assert score_cases([ok, bad, ok]) == (0.0, pytest.approx(2 / 3))
    assert score_cases([bad]) == (0.0, 0.0)


def test_case_result_row(make_xlsx: MakeXlsx) -> None:
    v = grade_case(make_xlsx({"S": {"A1": 2}}), make_xlsx({"S": {"A1": 1}}), "A1")
    row = case_result("1", v, report="r")
    assert row == CaseResult(
        name="1", ok=False, stage="eval", reason="value@S!A1: gt=1.0 pred=2.0", report="r"
    )
    missing = case_result("2", grade_case(Path("/nonexistent/out.xlsx"), make_xlsx({"S": {}}), "A1"))
    assert missing.stage == "output" and missing.reason == "file not exist"


def test_bytes_and_paths_are_interchangeable(make_xlsx: MakeXlsx) -> None:
    gold = make_xlsx({"S": {"A1": 1}})
    pred = make_xlsx({"S": {"A1": 1}})
    assert grade_case(pred.read_bytes(), gold.read_bytes(), "A1").ok
    assert grade_case(str(pred), str(gold), "A1").ok


def test_gold_cache_does_not_leak_between_golds(make_xlsx: MakeXlsx) -> None:
    workbook.clear_gold_cache()
    gold_a = make_xlsx({"S": {"A1": "a"}})
    gold_b = make_xlsx({"S": {"A1": "b"}})
    pred = make_xlsx({"S": {"A1": "a"}})
    for _ in range(2):  # second round is served from the cache
        assert grade_case(pred, gold_a, "A1").ok
        assert not grade_case(pred, gold_b, "A1").ok
    assert grade_case(pred, gold_a, "A1:A2").ok  # other bounds on the same gold


# -- the gold side is the operator's: errors, not verdicts -------------------------------------


def test_unreadable_gold_raises(make_xlsx: MakeXlsx, tmp_path: Path) -> None:
    pred = make_xlsx({"S": {"A1": 1}})
    not_xlsx = tmp_path / "gold.xlsx"
    not_xlsx.write_text("not a workbook")
    with pytest.raises(GradingDataError, match="cannot read gold workbook"):
        grade_case(pred, not_xlsx, "A1")
    with pytest.raises(GradingDataError, match="cannot read gold workbook"):
        grade_case(pred, tmp_path / "missing.xlsx", "A1")
    assert issubclass(GradingDataError, ConfigError)


def test_gold_without_the_answer_sheet_raises(make_xlsx: MakeXlsx) -> None:
    with pytest.raises(GradingDataError, match="no sheet 'Result'"):
        grade_case(make_xlsx({"S": {}}), make_xlsx({"S": {}}), "'Result'!A1")


def test_bad_answer_position_raises(make_xlsx: MakeXlsx) -> None:
    with pytest.raises(GradingDataError, match="BD2:308"):
        grade_case(make_xlsx({"S": {}}), make_xlsx({"S": {}}), "BD2:308")
