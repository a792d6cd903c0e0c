"""Parsing of SpreadsheetBench ``answer_position`` strings into typed cell ranges.

An answer position is a comma-separated list of ``[sheet!]range`` pieces, e.g.
``'Sheet1'!A1:C10,D2:D20``. The real data is messier than that, and every quirk below occurs in
the released dataset (task ids in brackets):

* one stray quote: ``Sheet1'!A1:F14`` [262-17, 49333, 51090]
* the quote after the bang: ``'Sheet1!'A1:A50,'Sheet2!'A1:E20,'Sheet3!'A1:A50'`` [170-13, 99-24]
* an apostrophe inside a name: ``'Sub CO's'!B4:B11`` [49782]
* several single cells: ``D1,D5,D9`` [51249]
* a sheet name containing commas: ``'b2b, sez, de'!A1:B3`` [130-9 of the full release]; a naive
  ``split(",")`` breaks it, so comma-split pieces are accumulated until they form a valid piece
* whole columns ``A:G`` [283-32 of the full release] and whole rows ``2:5``; they are expanded
  against the used area of the sheets (see :func:`resolve_bounds`)
* absolute ``$A$1`` and lower-case ``a1`` references, spaces around names and pieces

Usage::

    refs = parse_answer_position("'Sheet1'!A1:B2,C3")
    cells = cell_coordinates(refs[0])  # ["A1", "A2", "B1", "B2"] (column-major, like the official grader)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from openpyxl.utils import column_index_from_string, get_column_letter

__all__ = [
    "MAX_COLUMN",
    "MAX_ROW",
    "RangeKind",
    "RangeRef",
    "cell_coordinates",
    "column_letter",
    "find_sheet",
    "parse_answer_position",
    "parse_range_piece",
    "resolve_bounds",
    "resolve_default_sheet",
    "split_sheet_list",
]

# Excel's hard limits (XFD1048576); anything beyond is a typo, not a range.
MAX_COLUMN = 16384
MAX_ROW = 1_048_576

RangeKind = Literal["cell", "area", "columns", "rows"]

_QUOTES = "'\"`\u2018\u2019"
_COL = r"\$?([A-Za-z]{1,3})"
_ROW = r"\$?([0-9]{1,7})"
_CELL_RE = re.compile(rf"^{_COL}{_ROW}$")
_AREA_RE = re.compile(rf"^{_COL}{_ROW}:{_COL}{_ROW}$")
_COLS_RE = re.compile(rf"^{_COL}:{_COL}$")
_ROWS_RE = re.compile(rf"^{_ROW}:{_ROW}$")


@dataclass(frozen=True, slots=True)
class RangeRef:
    """One ``[sheet!]range`` piece of an answer position.

    Attributes:
        sheet: The sheet name with quotes removed, or ``None`` when the piece names no sheet
            (then the grader picks a default, see :func:`resolve_default_sheet`).
        ref: The range in canonical form: upper-case, no ``$``, corners ordered top-left to
            bottom-right, e.g. ``"D1"``, ``"A1:C3"``, ``"A:G"``, ``"2:5"``.
    """

    sheet: str | None
    ref: str

    def __post_init__(self) -> None:
        if _canonical_ref(self.ref) != self.ref:
            raise ValueError(f"RangeRef.ref must be canonical, got {self.ref!r}")

    @property
    def kind(self) -> RangeKind:
        """``cell`` (``D1``), ``area`` (``A1:C3``), ``columns`` (``A:G``) or ``rows`` (``2:5``)."""
        return _parse_ref(self.ref)[0]

    @property
    def bounds(self) -> tuple[int | None, int | None, int | None, int | None]:
        """``(min_col, min_row, max_col, max_row)``, 1-based; ``None`` where the range is open
        (the rows of a whole-column range, the columns of a whole-row range)."""
        return _parse_ref(self.ref)[1]

    def __str__(self) -> str:
        return self.ref if self.sheet is None else f"{quote_sheet(self.sheet)}!{self.ref}"


def quote_sheet(name: str) -> str:
    """Quote a sheet name the way Excel writes it in a reference (``'Sub CO''s'``)."""
    return "'" + name.replace("'", "''") + "'"


def column_letter(col: int) -> str:
    """Column letters of a 1-based column index (cached: the grader asks for the same few often)."""
    return _column_letter(col)


@lru_cache(maxsize=MAX_COLUMN)
def _column_letter(col: int) -> str:
    return get_column_letter(col)


@lru_cache(maxsize=4096)
def _parse_ref(ref: str) -> tuple[RangeKind, tuple[int | None, int | None, int | None, int | None]]:
    """Parse a range (any case, ``$`` allowed) into its kind and ordered bounds.

    Raises:
        ValueError: ``ref`` is not a cell, area, column or row range within Excel's limits.
    """
    text = ref.strip()
    if m := _CELL_RE.match(text):
        col, row = _col(m[1]), _row(m[2])
        return "cell", (col, row, col, row)
    if m := _AREA_RE.match(text):
        c1, r1, c2, r2 = _col(m[1]), _row(m[2]), _col(m[3]), _row(m[4])
        return "area", (min(c1, c2), min(r1, r2), max(c1, c2), max(r1, r2))
    if m := _COLS_RE.match(text):
        c1, c2 = _col(m[1]), _col(m[2])
        return "columns", (min(c1, c2), None, max(c1, c2), None)
    if m := _ROWS_RE.match(text):
        r1, r2 = _row(m[1]), _row(m[2])
        return "rows", (None, min(r1, r2), None, max(r1, r2))
    raise ValueError(f"not a cell range: {ref!r}")


def _col(letters: str) -> int:
    col = column_index_from_string(letters.upper())
    if col > MAX_COLUMN:
        raise ValueError(f"column {letters!r} is beyond Excel's last column XFD")
    return col


def _row(digits: str) -> int:
    row = int(digits)
    if not 1 <= row <= MAX_ROW:
        raise ValueError(f"row {row} is outside 1..{MAX_ROW}")
    return row


def _canonical_ref(ref: str) -> str:
    kind, (c1, r1, c2, r2) = _parse_ref(ref)
    if kind == "cell":
        assert c1 is not None and r1 is not None
        return f"{column_letter(c1)}{r1}"
    if kind == "area":
        assert c1 is not None and r1 is not None and c2 is not None and r2 is not None
        return f"{column_letter(c1)}{r1}:{column_letter(c2)}{r2}"
    if kind == "columns":
        assert c1 is not None and c2 is not None
        return f"{column_letter(c1)}:{column_letter(c2)}"
    return f"{r1}:{r2}"


def _strip_name(text: str) -> str:
    """Remove surrounding spaces and (stray, unbalanced) quotes; undo Excel's ``''`` escape."""
    return text.strip().strip(_QUOTES).strip().replace("''", "'")


def parse_range_piece(piece: str) -> RangeRef:
    """Parse one ``[sheet!]range`` piece, tolerating the quote quirks of the real data.

    The split is on the *last* ``!`` because a sheet name may contain ``!`` but a range never
    does; quotes are then stripped from both sides, wherever they sit (``'S'!A1``, ``S'!A1``,
    ``'S!'A1``, ``'S!'A1'``).

    Raises:
        ValueError: the range part is not a valid range, or the sheet part is empty.
    """
    text = piece.strip()
    if "!" in text:
        sheet_part, _, range_part = text.rpartition("!")
        sheet = _strip_name(sheet_part)
        if not sheet:
            raise ValueError(f"empty sheet name in {piece!r}")
    else:
        sheet, range_part = None, text
    range_text = range_part.strip().strip(_QUOTES).strip()
    try:
        ref = _canonical_ref(range_text)
    except ValueError as exc:
        raise ValueError(f"bad answer position piece {piece!r}: {exc}") from None
    return RangeRef(sheet=sheet, ref=ref)


def _opens_sheet_name(candidate: str) -> bool:
    """A sheet-less candidate that starts with a quote is the first part of a quoted sheet name
    that a comma split apart (``'A1, B2'!C3`` must not yield the range ``A1``)."""
    if "!" in candidate or candidate.lstrip()[:1] not in _QUOTES:
        return False
    # An even number of quotes (``'A1'``) is a quoted range, not the start of a name.
    return sum(candidate.count(q) for q in _QUOTES) % 2 == 1


def parse_answer_position(pos: str) -> list[RangeRef]:
    """Parse a whole answer position into its ranges, in order.

    Comma-split pieces are accumulated until the accumulated text parses as a valid
    ``[sheet!]range``; that is how a sheet name containing commas survives
    (``'b2b, sez, de'!A1:B2,C3`` gives two ranges). Empty pieces (``A1,,B2``, a trailing comma)
    are skipped.

    Args:
        pos: The ``answer_position`` string of a task.

    Returns:
        The ranges; at least one.

    Raises:
        ValueError: naming the piece that could not be parsed, or when ``pos`` holds no range.
    """
    refs: list[RangeRef] = []
    pending: list[str] = []
    last_error: ValueError | None = None
    for raw in pos.split(","):
        if not pending and not raw.strip():
            continue
        pending.append(raw)
        candidate = ",".join(pending)
        if _opens_sheet_name(candidate):
            last_error = ValueError(f"bad answer position piece {candidate.strip()!r}: unterminated sheet")
            continue
        try:
            refs.append(parse_range_piece(candidate))
        except ValueError as exc:
            last_error = exc
            continue
        pending = []
    if pending:
        first = pending[0].strip()
        detail = f" ({last_error})" if last_error is not None else ""
        raise ValueError(
            f"cannot parse answer position {pos!r}: piece {first!r} never forms a valid [sheet!]range{detail}"
        )
    if not refs:
        raise ValueError(f"answer position {pos!r} names no range")
    return refs


def resolve_bounds(ref: RangeRef, *, used_max_row: int, used_max_col: int) -> tuple[int, int, int, int]:
    """Close the open sides of a whole-column or whole-row range.

    Args:
        ref: The range.
        used_max_row: Last used row to expand ``A:G`` to; the grader passes the larger of the
            gold and prediction sheets' last used rows, so cells either side added count.
        used_max_col: Last used column to expand ``2:5`` to (same rule).

    Returns:
        ``(min_col, min_row, max_col, max_row)``, all 1-based and inclusive. An open side is at
        least row/column 1, so a whole-column range of an empty sheet still checks row 1.
    """
    c1, r1, c2, r2 = ref.bounds
    return (
        1 if c1 is None else c1,
        1 if r1 is None else r1,
        max(1, used_max_col) if c2 is None else c2,
        max(1, used_max_row) if r2 is None else r2,
    )


def cell_coordinates(ref: RangeRef, *, used_max_row: int = 1, used_max_col: int = 1) -> list[str]:
    """All cell coordinates of a range in column-major order (``A1, A2, B1, B2``), like the
    official grader's ``generate_cell_names``.

    Args:
        ref: The range.
        used_max_row: See :func:`resolve_bounds` (only used for whole-column ranges).
        used_max_col: See :func:`resolve_bounds` (only used for whole-row ranges).
    """
    c1, r1, c2, r2 = resolve_bounds(ref, used_max_row=used_max_row, used_max_col=used_max_col)
    return [f"{column_letter(c)}{r}" for c in range(c1, c2 + 1) for r in range(r1, r2 + 1)]


def find_sheet(name: str, sheetnames: Sequence[str]) -> str | None:
    """The sheet of ``sheetnames`` that ``name`` refers to, or ``None``.

    Exact match first; else a unique match ignoring case and surrounding spaces, because Excel
    treats sheet names case-insensitively (``Sheet1`` and ``sheet1`` cannot coexist) and the data
    has hand-typed names.
    """
    if name in sheetnames:
        return name
    folded = name.strip().casefold()
    hits = [s for s in sheetnames if s.strip().casefold() == folded]
    return hits[0] if len(hits) == 1 else None


def split_sheet_list(answer_sheet: str, sheetnames: Iterable[str] = ()) -> list[str]:
    """Split an ``answer_sheet`` field (``'Sheet1','Sheet2'`` or ``Sheet1,Sheet2``) into names.

    If the whole field (quotes stripped) is the name of one of ``sheetnames`` it is kept whole,
    so a single sheet whose name contains a comma is not split.
    """
    whole = _strip_name(answer_sheet)
    known = list(sheetnames)
    if not whole:
        return []
    if known and find_sheet(whole, known) is not None:
        return [whole]
    return [name for part in answer_sheet.split(",") if (name := _strip_name(part))]


def resolve_default_sheet(gold_sheetnames: Sequence[str], answer_sheet: str | None = None) -> str:
    """The sheet a range without a sheet refers to.

    The official grader uses the gold workbook's first sheet. ``answer_sheet`` overrides that
    only when it names exactly one sheet that exists in the gold workbook; a list of several
    sheets (``Sheet1,Sheet2,Sheet3`` occurs in the data) or an unknown name cannot say which one
    is meant, so the official rule applies.

    Raises:
        ValueError: the gold workbook has no sheet at all.
    """
    if not gold_sheetnames:
        raise ValueError("gold workbook has no worksheet")
    if answer_sheet:
        names = split_sheet_list(answer_sheet, gold_sheetnames)
        if len(names) == 1 and (hit := find_sheet(names[0], gold_sheetnames)) is not None:
            return hit
    return gold_sheetnames[0]
