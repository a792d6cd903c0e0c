"""Text preview of a workbook for the target's prompt (reference §4.2, the official ``prompt.py``).

Per sheet a header ``## Sheet: <name> (dim=…, max_row=…, max_col=…)``, the first rows × columns
as ``A1=value | B1=…`` (values longer than 40 characters cut to 37 + ``...``) and
``... (N more rows)``. Formulas are shown as their text, not evaluated.

Checked against the reference implementation (normal-mode ``openpyxl.load_workbook``) on the
first input of all 256 shared tasks: identical except that array formulas show their text where
the reference printed ``<openpyxl.worksheet.formula.ArrayFormula object …>`` (tasks 37456,
48354, 48799), and it takes about half the time (read-only loading, no style expansion).

Usage::

    text = preview_workbook(Path("input.xlsx").read_bytes())
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any

from openpyxl.worksheet._read_only import ReadOnlyWorksheet

from skillopt.envs.spreadsheetbench.positions import column_letter
from skillopt.envs.spreadsheetbench.workbook import merged_ranges, open_workbook

__all__ = ["preview_workbook"]

_VALUE_MAX = 40
_VALUE_CUT = 37


def _extent(
    ws: ReadOnlyWorksheet, merged: list[tuple[int, int, int, int]]
) -> tuple[int, int, int, int] | None:
    """``(min_row, min_col, max_row, max_col)`` of the cells present and merged ranges, or
    ``None`` for an empty sheet: what normal-mode openpyxl reports, computed by a scan because
    the ``<dimension>`` tag that read-only mode trusts may be missing or wrong."""
    ws.reset_dimensions()
    min_row = min((b[1] for b in merged), default=0)
    min_col = min((b[0] for b in merged), default=0)
    max_row = max((b[3] for b in merged), default=0)
    max_col = max((b[2] for b in merged), default=0)
    for row in ws.iter_rows():
        present = [cell for cell in row if hasattr(cell, "row")]  # EmptyCell fillers have no row
        if not present:
            continue
        r = present[0].row
        min_row = r if not min_row else min(min_row, r)
        max_row = max(max_row, r)
        min_col = present[0].column if not min_col else min(min_col, present[0].column)
        max_col = max(max_col, present[-1].column)
    return (min_row, min_col, max_row, max_col) if max_row else None


def _format_value(value: Any) -> str:
    if value is None:
        return ""
    text = str(getattr(value, "text", value))  # ArrayFormula keeps its formula in .text
    return text if len(text) <= _VALUE_MAX else text[:_VALUE_CUT] + "..."


_CACHE_SIZE = 256
_cache: OrderedDict[tuple[bytes, int, int], str] = OrderedDict()
_cache_lock = threading.Lock()


def preview_workbook(data: bytes, *, max_rows: int = 5, max_cols: int = 20) -> str:
    """:func:`render_preview`, memoised by content hash: the same inputs are previewed again
    and again (every candidate skill is evaluated on the same selection tasks), and a preview
    costs 5-10 ms of parsing on the rollout's critical path."""
    key = (hashlib.sha256(data).digest(), max_rows, max_cols)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    text = render_preview(data, max_rows=max_rows, max_cols=max_cols)
    with _cache_lock:
        _cache[key] = text
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return text


def render_preview(data: bytes, *, max_rows: int = 5, max_cols: int = 20) -> str:
    """Preview the first ``max_rows`` × ``max_cols`` cells of every worksheet.

    Args:
        data: The workbook bytes.
        max_rows: Rows shown per sheet.
        max_cols: Columns shown per sheet.

    Returns:
        The preview text, one block per sheet separated by blank lines.

    Raises:
        ValueError: the bytes are not a readable xlsx workbook.
    """
    try:
        wb = open_workbook(data, data_only=False)
    except Exception as exc:  # openpyxl raises many types on bad input; callers get one
        raise ValueError(f"cannot preview workbook: {type(exc).__name__}: {exc}") from exc
    chunks: list[str] = []
    try:
        for ws in wb.worksheets:
            merged = merged_ranges(ws)
            extent = _extent(ws, merged)
            # An empty sheet reads as A1:A1 with max_row = max_col = 1 in openpyxl.
            min_row, min_col, max_row, max_col = extent or (1, 1, 1, 1)
            dim = f"{column_letter(min_col)}{min_row}:{column_letter(max_col)}{max_row}"
            chunks.append(f"## Sheet: {ws.title} (dim={dim}, max_row={max_row}, max_col={max_col})")
            n_cols = min(max_col, max_cols)
            n_rows = min(max_row, max_rows)
            # Read-only iteration yields nothing past the sheet's last row (an empty sheet has
            # none), while normal mode shows the requested rows; pad to match.
            rows = list(ws.iter_rows(min_row=1, max_row=n_rows, min_col=1, max_col=n_cols, values_only=True))
            for r in range(1, n_rows + 1):
                values = rows[r - 1] if r <= len(rows) else ()
                padded = list(values) + [None] * (n_cols - len(values))
                for c1, r1, c2, r2 in merged:  # normal mode blanks all but a merge's top-left
                    if r1 <= r <= r2:
                        for c in range(max(c1, 1), min(c2, n_cols) + 1):
                            if (r, c) != (r1, c1):
                                padded[c - 1] = None
                chunks.append(
                    " | ".join(
                        f"{column_letter(c)}{r}={_format_value(v)}" for c, v in enumerate(padded, start=1)
                    )
                )
            if max_row > max_rows:
                chunks.append(f"... ({max_row - max_rows} more rows)")
            chunks.append("")
    finally:
        wb.close()
    return "\n".join(chunks)
