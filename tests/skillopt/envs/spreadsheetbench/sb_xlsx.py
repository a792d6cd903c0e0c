"""Building real xlsx files for the SpreadsheetBench tests (imported by name: the folder has no
``__init__.py``, so pytest puts it on ``sys.path``)."""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

import openpyxl

Sheets = Mapping[str, Mapping[str, Any]]


def build_xlsx(sheets: Sheets, *, merged: Mapping[str, list[str]] | None = None) -> bytes:
    """An xlsx whose sheets hold the given ``{coordinate: value}`` cells (in sheet order)."""
    wb = openpyxl.Workbook()
    wb.remove(wb.active)
    for title, cells in sheets.items():
        ws = wb.create_sheet(title)
        for coord, value in cells.items():
            ws[coord] = value
        for rng in (merged or {}).get(title, []):
            ws.merge_cells(rng)
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()
