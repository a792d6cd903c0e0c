"""Workbook preview for prompts, checked against a normal-mode openpyxl rendering."""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import openpyxl
import pytest
from sb_xlsx import build_xlsx

from skillopt.envs.spreadsheetbench.loader import SpreadsheetBenchData
from skillopt.envs.spreadsheetbench.preview import preview_workbook


def _reference(data: bytes, max_rows: int = 5, max_cols: int = 20) -> str:
    """The reference rendering (official prompt.py), on normal-mode openpyxl."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wb = openpyxl.load_workbook(io.BytesIO(data), data_only=False)
    chunks = []
    for ws in wb.worksheets:
        chunks.append(
            f"## Sheet: {ws.title} (dim={ws.dimensions}, max_row={ws.max_row}, max_col={ws.max_column})"
        )
        for row in ws.iter_rows(
            min_row=1, max_row=min(ws.max_row, max_rows), max_col=min(ws.max_column, max_cols)
        ):
            cells = []
            for cell in row:
                s = "" if cell.value is None else str(cell.value)
                cells.append(f"{cell.coordinate}={s if len(s) <= 40 else s[:37] + '...'}")
            chunks.append(" | ".join(cells))
        if ws.max_row > max_rows:
            chunks.append(f"... ({ws.max_row - max_rows} more rows)")
        chunks.append("")
    return "\n".join(chunks)


def test_format() -> None:
    long = "x" * 41
    data = build_xlsx(
        {
            "Data": {
                "A1": "name",
                "B1": "value",
                "A2": "a",
                "B2": 1,
                "C3": "=B2*2",
                "A7": long,
                "B4": "y" * 40,
            },
            "Empty": {},
        }
    )
    text = preview_workbook(data, max_rows=3, max_cols=2)
    assert text.splitlines() == [
        "## Sheet: Data (dim=A1:C7, max_row=7, max_col=3)",
        "A1=name | B1=value",
        "A2=a | B2=1",
        "A3= | B3=",
        "... (4 more rows)",
        "",
        "## Sheet: Empty (dim=A1:A1, max_row=1, max_col=1)",
        "A1=",
    ]
    full = preview_workbook(data, max_rows=10)
    assert "C3==B2*2" in full  # formulas are shown, not evaluated
    assert "A7=" + "x" * 37 + "..." in full and "B4=" + "y" * 40 in full  # cut only above 40
    assert full == _reference(data, max_rows=10)


def test_merged_cells_like_normal_mode() -> None:
    data = build_xlsx({"S": {"A1": "top", "B1": 1}}, merged={"S": ["A1:A3", "C5:D6"]})
    assert preview_workbook(data) == _reference(data)
    assert "(dim=A1:D6, max_row=6, max_col=4)" in preview_workbook(data)


def test_not_a_workbook() -> None:
    with pytest.raises(ValueError, match="cannot preview workbook"):
        preview_workbook(b"not an xlsx")


def test_matches_reference_on_sample_inputs() -> None:
    data = SpreadsheetBenchData(
        Path(__file__).resolve().parents[4] / "skillopt/envs/spreadsheetbench/data/sample"
    )
    n = 0
    for rec in data.records:
        content = rec.cases[0].input_path.read_bytes()
        ours, ref = preview_workbook(content), _reference(content)
        if "ArrayFormula" in ref:  # the reference printed the object; we print its formula
            continue
        assert ours == ref, rec.id
        n += 1
    assert n >= 10
