"""``grading.mode: official``: the verdicts of the official SpreadsheetBench grader, reproduced.

The official ``evaluation/evaluation.py`` (RUCKBReasoning/SpreadsheetBench) is what published
numbers were computed with. Our default mode (``corrected``, :mod:`.evaluator`) fixes the cases
where it errs; this mode re-implements its behaviour, errors included, for numbers comparable
to published ones. It reads workbooks with the same safe reader as the corrected mode (parity
with normal-mode openpyxl is tested); what it reproduces is how the official code **parses an
answer position** and **compares values**:

* the position is split at every comma (a sheet name with a comma breaks it: task 130-9);
  each piece at ``!`` (two ``!`` crash); quotes are stripped from both ends of the sheet and
  the range, spaces are not;
* a piece without a sheet is graded on the gold workbook's **first** sheet (never
  ``answer_sheet``);
* a range ``X:Y`` is read character by character: digits form the row, everything else the
  column, whose number is ``Σ (ord(c) - 64)·26^k`` - so a lower-case letter is a far column
  (``k`` is column 43, AQ: ``K4:k35`` spans K..AQ), a whole column ``A:G`` has no row and
  crashes (task 283-32), and a reversed range is empty (nothing to compare: it passes); a
  single cell must be a valid openpyxl coordinate, else it crashes;
* sheet names match **exactly** (no case folding); a sheet missing from the prediction fails
  the piece, one missing from the gold crashes;
* values: numbers (and bools) ``round(float(v), 2)``, ``time`` → ``str(v)[:-3]``,
  ``datetime`` → Excel serial day rounded to 0 decimals (``date`` is left as it is), numeric
  strings ``round(float(s), 2)``; ``""`` equals ``None``; different types never match; else
  ``==`` (so ``NaN`` never equals ``NaN``).

A crash of the official code is caught by its bare ``except`` and scored as a failed case; here
it is a failing verdict whose reason starts with ``official-grader-error:``.

Usage::

    verdict = grade_case(pred, gold, "'Sheet1'!K4:k35", mode="official")
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Sequence
from typing import Any, get_args

from skillopt.envs.spreadsheetbench import workbook as wb
from skillopt.envs.spreadsheetbench.spec import GradingMode

__all__ = [
    "GRADING_MODES",
    "GradingMode",
    "OfficialCrash",
    "grade_official",
    "official_equal",
    "official_pieces",
    "official_transform",
]

GRADING_MODES: tuple[str, ...] = get_args(GradingMode)

_EPOCH = _dt.datetime(1899, 12, 30)
# What openpyxl's ws["..."] accepts as one cell (the official code indexes sheets by name).
_CELL = re.compile(r"^\$?([A-Za-z]{1,3})\$?(\d+)$")
_MAX_ROW = 1_048_576
_MAX_COL = 18_278  # ZZZ, openpyxl's limit for a column name


class OfficialCrash(Exception):
    """The official grader raises here; its bare ``except`` turns that into a failed case."""


def _col_number(name: str) -> int:
    """The official column arithmetic: every character counts as ``ord(c) - 64``."""
    num = 0
    for ch in name:
        num = num * 26 + (ord(ch) - ord("A") + 1)
    return num


def _col_name(n: int) -> str:
    name = ""
    while n > 0:
        n, rem = divmod(n - 1, 26)
        name = chr(65 + rem) + name
    return name


def _split_cell(text: str) -> tuple[int, int]:
    letters = "".join(ch for ch in text if not ch.isdigit())
    digits = "".join(ch for ch in text if ch.isdigit())
    if not digits:
        raise OfficialCrash(f"invalid literal for int() with base 10: '' (range end {text!r} has no row)")
    return _col_number(letters), int(digits)


def _cell_index(name: str) -> tuple[int, int]:
    """``(column, row)`` of a cell name as openpyxl reads it (case-insensitive, ``$`` allowed)."""
    m = _CELL.match(name)
    if not m:
        raise OfficialCrash(f"{name!r} is not a valid coordinate or range")
    col = _col_number(m.group(1).upper())
    row = int(m.group(2))
    if not (1 <= row <= _MAX_ROW and 1 <= col <= _MAX_COL):
        raise OfficialCrash(f"{name!r}: row or column out of range")
    return col, row


def _cells(cell_range: str) -> list[tuple[int, int]]:
    """The cells the official code compares for one range, in its order (column-major)."""
    if ":" not in cell_range:
        return [_cell_index(cell_range)]
    parts = cell_range.split(":")
    if len(parts) != 2:
        raise OfficialCrash(f"too many values to unpack (range {cell_range!r})")
    (c1, r1), (c2, r2) = _split_cell(parts[0]), _split_cell(parts[1])
    out = []
    for col in range(c1, c2 + 1):
        # The generated name goes through ws[...]: a non-positive column has no letters.
        name = _col_name(col)
        for row in range(r1, r2 + 1):
            out.append(_cell_index(f"{name}{row}"))
    return out


def official_pieces(
    answer_position: str, gold_titles: Sequence[str]
) -> list[tuple[str, list[tuple[int, int]]]]:
    """``(sheet name, cells)`` per piece of ``answer_position``, as the official code reads it.

    Raises:
        OfficialCrash: the official code would raise on this position.
    """
    pieces = []
    for piece in answer_position.split(","):
        if "!" in piece:
            parts = piece.split("!")
            if len(parts) != 2:
                raise OfficialCrash(f"too many values to unpack (piece {piece!r})")
            sheet, cell_range = parts
        else:
            if not gold_titles:
                raise OfficialCrash("list index out of range (the gold workbook has no sheet)")
            sheet, cell_range = gold_titles[0], piece
        pieces.append((sheet.strip("'"), _cells(cell_range.strip("'"))))
    return pieces


def official_transform(value: Any) -> Any:
    """A cell value as the official code normalises it before comparing."""
    if isinstance(value, int | float):  # bool included, as in the official isinstance check
        try:
            return round(float(value), 2)
        except OverflowError as exc:
            raise OfficialCrash(f"OverflowError: {exc}") from exc
    if isinstance(value, _dt.time):
        return str(value)[:-3]
    if isinstance(value, _dt.datetime):
        delta = value.replace(tzinfo=None) - _EPOCH
        return round(delta.days + delta.seconds / 86400.0, 0)
    if isinstance(value, str):
        try:
            return round(float(value), 2)
        except (ValueError, OverflowError):
            return value
    return value


def official_equal(expected: Any, got: Any) -> bool:
    """The official comparison of two transformed values (``NaN`` is never equal)."""
    if _empty(expected) and _empty(got):
        return True
    if type(expected) is not type(got):
        return False
    return bool(expected == got)


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value == "")


def grade_official(
    pred: wb.WorkbookSource, gold: wb.WorkbookSource, answer_position: str, *, limits: wb.GradingLimits
) -> wb.CaseVerdict:
    """Grade one case as the official grader would (see the module docstring).

    Raises:
        GradingDataError: the gold workbook cannot be read (the operator's data is broken;
            refused in both modes rather than scored).
    """
    try:
        pred_data = wb.read_prediction_bytes(pred, limits)
        wb.check_zip(pred_data, limits)
    except wb.Unreadable as exc:
        return wb.CaseVerdict(ok=False, reason=exc.reason, stage="output")
    book = wb.gold_book(wb.read_gold_bytes(gold))
    with book.lock:
        try:
            try:
                pieces = official_pieces(answer_position, book.titles())
                pred_wb = wb.pred_call(wb.open_workbook, pred_data)
            except OfficialCrash as exc:
                return wb.CaseVerdict(ok=False, reason=f"official-grader-error: {exc}")
            try:
                return _compare(book, pred_wb, pieces, limits)
            finally:
                pred_wb.close()
        except wb.Unreadable as exc:
            return wb.CaseVerdict(ok=False, reason=exc.reason, stage="output")
        except OfficialCrash as exc:
            return wb.CaseVerdict(ok=False, reason=f"official-grader-error: {exc}")
        finally:
            book.release()


def _compare(
    book: Any, pred_wb: Any, pieces: list[tuple[str, list[tuple[int, int]]]], limits: wb.GradingLimits
) -> wb.CaseVerdict:
    gold_titles, pred_titles = book.titles(), wb.worksheet_titles(pred_wb)
    if sum(len(cells) for _, cells in pieces) > limits.max_cells:
        return wb.CaseVerdict(ok=False, reason=f"answer area exceeds the cap of {limits.max_cells} cells")
    reason = ""
    checks: list[wb.CellCheck] = []
    mismatches: list[wb.CellCheck] = []
    n_cells = n_empty = 0
    missing: list[str] = []
    for sheet, cells in pieces:
        if sheet not in pred_titles:  # exact names only
            missing.append(sheet)
            reason = reason or f"worksheet not found: {sheet}"
            continue
        if sheet not in gold_titles:
            raise OfficialCrash(f"KeyError: 'Worksheet {sheet} does not exist.' (gold workbook)")
        if not cells:
            continue  # a reversed range: nothing to compare
        bounds = (
            min(c for c, _ in cells),
            min(r for _, r in cells),
            max(c for c, _ in cells),
            max(r for _, r in cells),
        )
        gold_block = book.blocks(sheet, [bounds])[bounds]
        pred_block = wb.pred_call(
            wb.read_blocks, pred_wb[sheet], [bounds], wb.pred_call(wb.merged_ranges, pred_wb[sheet])
        )[bounds]
        for col, row in cells:
            expected = official_transform(gold_block.get(row, col))
            got = official_transform(pred_block.get(row, col))
            n_cells += 1
            if _empty(expected) and _empty(got):
                n_empty += 1
                continue
            ok = official_equal(expected, got)
            check = wb.CellCheck(
                sheet=sheet, cell=f"{_col_name(col)}{row}", expected=expected, got=got, ok=ok
            )
            checks.append(check)
            if not ok:
                mismatches.append(check)
                if not reason:
                    reason = (
                        f"value@{sheet}!{check.cell}: gt={wb.short_repr(expected)} pred={wb.short_repr(got)}"
                    )
    return wb.CaseVerdict(
        ok=not reason,
        reason=reason,
        n_cells=n_cells,
        n_mismatches=len(mismatches),
        mismatches=tuple(mismatches),
        cells=tuple(checks),
        n_empty_both=n_empty,
        missing_sheets=tuple(missing),
    )
