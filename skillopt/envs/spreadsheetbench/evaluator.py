"""Trusted SpreadsheetBench grader: compare the answer cells of a prediction with the gold workbook.

A port of the value semantics of the official ``evaluation/evaluation.py``
(RUCKBReasoning/SpreadsheetBench), without its bare ``except`` that scored a crashed comparison
as a wrong answer. What differs from the official code, and why:

* **Errors are split by whose fault they are.** A prediction that is missing, not an xlsx, a
  zip bomb, a symlink or malformed gives a failing :class:`CaseVerdict` with a reason (the model
  wrote it). An unreadable gold workbook or answer position raises :class:`GradingDataError`
  (the operator's data is broken; scoring it as a fail would hide that).
* **Workbooks are opened read-only** with a reduced openpyxl reader (:func:`open_workbook`) and
  only the rows up to the answer area of the answer sheets are parsed. Cells are parsed by
  openpyxl's own ``WorkSheetParser``, as in normal mode; merged ranges are applied as normal
  mode does (see :func:`merged_ranges`). Checked: over all 1052 workbooks of the shared dataset,
  the 883,560 answer cells read identically to normal-mode ``load_workbook``, and grading all
  526 input-vs-gold cases gives the same verdicts as a normal-mode port of the official code;
  loading is several times faster (the 526 gold files: 34 s in normal mode).
* **Gold reads are cached** (LRU of 32 by SHA-256): every rollout of a task grades against the
  same gold, so repeat gradings parse only the prediction.
* **Sheet names match case-insensitively** when there is no exact match, as in Excel.
* **Two NaNs compare equal** (``"nan"`` is a numeric string for ``float``); the official code
  would fail gold against itself.
* ``datetime.date`` is converted like ``datetime.datetime`` (the official code leaves it as is).
* Every answer cell is compared (the official code stops at the first mismatch), so the
  verdict can count mismatches and feed the reports.

The XML of both workbooks is parsed through ``defusedxml`` (openpyxl uses it automatically when
installed; :data:`DEFUSEDXML_ACTIVE` says whether it is, and a test asserts it).

Usage::

    verdict = grade_case(pred_path_or_bytes, gold_path_or_bytes, "'Sheet1'!A1:C3")
    hard, soft = score_cases([verdict])
    print(verification_report(verdict))
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import io
import math
import os
import re
import stat
import threading
import warnings
import zipfile
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import openpyxl
from openpyxl.reader.excel import ExcelReader
from openpyxl.styles.numbers import builtin_format_code, is_date_format, is_timedelta_format
from openpyxl.utils import column_index_from_string
from openpyxl.worksheet._read_only import ReadOnlyWorksheet
from openpyxl.xml.constants import ARC_STYLE
from openpyxl.xml.functions import iterparse

from skillopt.envs.spreadsheetbench.positions import (
    RangeRef,
    column_letter,
    find_sheet,
    parse_answer_position,
    resolve_bounds,
    resolve_default_sheet,
)
from skillopt.errors import ConfigError
from skillopt.types import CaseResult

__all__ = [
    "DEFAULT_LIMITS",
    "DEFUSEDXML_ACTIVE",
    "REPORT_MAX_CHARS",
    "CaseVerdict",
    "CellCheck",
    "GradingDataError",
    "GradingLimits",
    "WorkbookSource",
    "case_result",
    "clear_gold_cache",
    "compare_values",
    "feedback_report",
    "grade_case",
    "merged_ranges",
    "open_workbook",
    "score_cases",
    "transform_value",
    "verification_report",
]

WorkbookSource = str | os.PathLike[str] | bytes

# openpyxl imports defusedxml when it is installed; it is a declared dependency, so this holds.
DEFUSEDXML_ACTIVE: bool = bool(openpyxl.DEFUSEDXML)

REPORT_MAX_CHARS = 12_000
_FORMULA_SCAN_ROWS = 200
_FORMULA_LIST_MAX = 10
_REPR_MAX = 120

# Real workbooks carry extensions openpyxl drops with a UserWarning on every load
# ("Data Validation extension is not supported"); the grader never writes, so they are noise.
warnings.filterwarnings("ignore", category=UserWarning, module=r"openpyxl(\..*)?$")

_EXCEL_EPOCH = _dt.datetime(1899, 12, 30)


class GradingDataError(ConfigError):
    """The gold side of a case is broken (gold workbook unreadable, answer position unparsable,
    answer sheet missing from the gold). The operator's data is at fault, not the model."""


@dataclass(frozen=True, kw_only=True, slots=True)
class GradingLimits:
    """Caps applied to an untrusted prediction before and while it is parsed.

    Attributes:
        max_file_bytes: Largest prediction file accepted.
        max_uncompressed_bytes: Largest sum of the declared uncompressed sizes of the zip members
            (``zipfile`` enforces the declared sizes while reading, so they cannot lie).
        max_members: Most zip members accepted (a real xlsx has tens).
        max_cells: Most answer cells compared in one case, after whole-column/row expansion.
    """

    max_file_bytes: int = 256 * 1024 * 1024
    max_uncompressed_bytes: int = 256 * 1024 * 1024
    max_members: int = 10_000
    max_cells: int = 5_000_000

    def __post_init__(self) -> None:
        for name in ("max_file_bytes", "max_uncompressed_bytes", "max_members", "max_cells"):
            if getattr(self, name) <= 0:
                raise ValueError(f"GradingLimits.{name} must be > 0")


DEFAULT_LIMITS = GradingLimits()


@dataclass(frozen=True, slots=True)
class CellCheck:
    """One compared answer cell. ``expected``/``got`` are the transformed values that were compared."""

    sheet: str
    cell: str
    expected: Any
    got: Any
    ok: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class CaseVerdict:
    """Outcome of grading one test case.

    Attributes:
        ok: Every answer cell matched.
        reason: ``""`` on success; else the first failure (``file not exist``,
            ``cannot read prediction: …``, ``worksheet not found: <sheet>``,
            ``value@Sheet!C5: gt=… pred=…``).
        stage: ``"output"`` when the prediction could not be read, else ``"eval"``.
        n_cells: Cells compared (cells of sheets missing from the prediction are not counted).
        n_mismatches: Cells that differ.
        mismatches: The differing cells, in answer-position order, column-major within a range.
        cells: Every compared cell except those empty on both sides (for the reports).
        n_empty_both: Compared cells empty in both workbooks.
        missing_sheets: Answer sheets the prediction lacks.
        formulas: Up to 10 ``Sheet!A1: =…`` formulas found in the first 200 rows of the
            prediction (formula cells read as their cached value, often ``None``).
    """

    ok: bool
    reason: str
    stage: str = "eval"
    n_cells: int = 0
    n_mismatches: int = 0
    mismatches: tuple[CellCheck, ...] = ()
    cells: tuple[CellCheck, ...] = ()
    n_empty_both: int = 0
    missing_sheets: tuple[str, ...] = ()
    formulas: tuple[str, ...] = ()


# --------------------------------------------------------------------------------------------
# value semantics (official transform_value / compare_cell_value)


def _excel_serial(value: _dt.datetime) -> float:
    # openpyxl yields naive datetimes; drop a zone rather than fail on a naive-aware subtraction.
    delta = value.replace(tzinfo=None) - _EXCEL_EPOCH
    return delta.days + delta.seconds / 86400.0


def _to_float(value: int | float) -> float:
    try:
        return float(value)
    except OverflowError:  # an int with hundreds of digits, only from a hand-made file
        return math.copysign(math.inf, value)


def transform_value(value: Any) -> Any:
    """Normalise a cell value before comparing, as the official grader does.

    bool, int, float → ``round(float(v), 2)`` (a fixed 2-decimal quantisation, not a tolerance);
    ``datetime.time`` → ``str(v)[:-3]``; ``datetime.datetime``/``date`` → Excel serial day
    rounded to 0 decimals; a numeric ``str`` → ``round(float(s), 2)``; anything else unchanged.
    """
    if isinstance(value, bool | int | float):
        return round(_to_float(value), 2)
    if isinstance(value, _dt.time):
        return str(value)[:-3]
    if isinstance(value, _dt.datetime):
        return round(_excel_serial(value), 0)
    if isinstance(value, _dt.date):
        return round(_excel_serial(_dt.datetime.combine(value, _dt.time())), 0)
    if isinstance(value, str):
        try:
            return round(float(value), 2)
        except ValueError:
            return value
    return value


def _is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value == "")


def _equal_transformed(a: Any, b: Any) -> bool:
    if _is_empty(a) and _is_empty(b):
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


def compare_values(expected: Any, got: Any) -> bool:
    """Whether a gold value and a predicted value match: ``""`` equals ``None``, values of
    different types (after :func:`transform_value`) never match, else ``==``."""
    return _equal_transformed(transform_value(expected), transform_value(got))


# --------------------------------------------------------------------------------------------
# reading workbooks safely


class _Unreadable(Exception):
    """Internal: the prediction cannot be graded; ``reason`` becomes the verdict's reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _read_prediction_bytes(pred: WorkbookSource, limits: GradingLimits) -> bytes:
    """The prediction's bytes, refusing anything but a regular file within the size cap.

    A path is opened with ``O_NOFOLLOW`` after an ``lstat``: a model could otherwise leave a
    symlink to the gold file (or to ``/dev/zero``) as its output.
    """
    if isinstance(pred, bytes | bytearray | memoryview):
        data = bytes(pred)
        if len(data) > limits.max_file_bytes:
            raise _Unreadable(f"cannot read prediction: {len(data)} bytes exceeds {limits.max_file_bytes}")
        return data
    path = os.fspath(pred)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise _Unreadable("file not exist") from None
    except OSError as exc:
        raise _Unreadable(f"cannot read prediction: {exc.strerror or exc}") from None
    if stat.S_ISLNK(st.st_mode):
        raise _Unreadable("cannot read prediction: output path is a symlink")
    if not stat.S_ISREG(st.st_mode):
        raise _Unreadable("cannot read prediction: output path is not a regular file")
    if st.st_size > limits.max_file_bytes:
        raise _Unreadable(f"cannot read prediction: {st.st_size} bytes exceeds {limits.max_file_bytes}")
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise _Unreadable(f"cannot read prediction: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):  # swapped after the lstat
            raise _Unreadable("cannot read prediction: output path is not a regular file")
        data = fh.read(limits.max_file_bytes + 1)
    if len(data) > limits.max_file_bytes:
        raise _Unreadable(f"cannot read prediction: more than {limits.max_file_bytes} bytes")
    return data


def _check_zip(data: bytes, limits: GradingLimits) -> None:
    """Refuse non-zip, truncated, encrypted and bomb-like archives before openpyxl sees them."""
    if not data.startswith(b"PK\x03\x04"):
        hint = " (legacy .xls or encrypted workbook?)" if data.startswith(b"\xd0\xcf\x11\xe0") else ""
        raise _Unreadable(f"cannot read prediction: not an xlsx file (not a zip archive){hint}")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError) as exc:
        raise _Unreadable(f"cannot read prediction: broken zip archive: {exc}") from None
    if len(infos) > limits.max_members:
        raise _Unreadable(f"cannot read prediction: {len(infos)} zip members exceeds {limits.max_members}")
    total = sum(info.file_size for info in infos)
    if total > limits.max_uncompressed_bytes:
        raise _Unreadable(
            f"cannot read prediction: uncompressed size {total} bytes exceeds {limits.max_uncompressed_bytes}"
        )
    if any(info.flag_bits & 0x1 for info in infos):
        raise _Unreadable("cannot read prediction: encrypted zip members")


class _ValuesReader(ExcelReader):
    """openpyxl's reader minus what value reading never uses.

    ``ExcelReader.read`` builds the full stylesheet, expanding every named style; real files
    carry bloated ones (task 51090: an 8 MB ``styles.xml`` with ~100k styles takes 7 s per load,
    for nothing). Cell values only need to know which cell styles are date and timedelta
    formats, so only ``numFmts`` and ``cellXfs`` are read here, with openpyxl's own rules.
    Document properties, theme and defined names are skipped too. Cells are still parsed by
    openpyxl's ``WorkSheetParser``, so values are exactly what ``load_workbook`` gives.
    """

    skip_strings = False

    def read(self) -> None:
        self.read_manifest()
        if self.skip_strings:
            self.shared_strings = _NoSharedStrings()
        else:
            self.read_strings()
        self.read_workbook()
        _apply_number_formats(self.archive, self.wb)
        self.read_worksheets()


class _NoSharedStrings(list[str]):
    """Stands in for the shared-string table when only formulas are wanted: every string
    cell reads as ``""`` and the table (125k strings in task 524-2) is never parsed."""

    def __getitem__(self, index: Any) -> Any:
        return ""


def _localname(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _apply_number_formats(archive: zipfile.ZipFile, wb: Any) -> None:
    """Set ``wb._date_formats``/``_timedelta_formats`` (indices of date-formatted cell styles)
    as ``openpyxl.styles.stylesheet.apply_stylesheet`` would, reading only the number formats."""
    try:
        src = archive.open(ARC_STYLE)
    except KeyError:
        return
    custom: dict[int, str] = {}
    xf_formats: list[int] = []
    depth_in_cellxfs = 0
    with src:
        for event, elem in iterparse(src, events=("start", "end")):
            name = _localname(elem.tag)
            if name == "cellXfs":
                depth_in_cellxfs += 1 if event == "start" else -1
            elif event == "end" and name == "numFmt":
                custom[int(elem.get("numFmtId", 0))] = elem.get("formatCode", "")
            elif event == "end" and name == "xf" and depth_in_cellxfs:
                xf_formats.append(int(elem.get("numFmtId", 0)))
            if event == "end" and name in ("xf", "numFmt", "font", "fill", "border", "dxf"):
                elem.clear()  # the bloated style lists are large; keep memory flat
    if not xf_formats:
        return  # openpyxl keeps its defaults (no date formats) when cellXfs is empty
    date_formats: set[int] = set()
    timedelta_formats: set[int] = set()
    for idx, fmt_id in enumerate(xf_formats):
        fmt = custom[fmt_id] if fmt_id in custom else builtin_format_code(fmt_id)
        if is_date_format(fmt):
            date_formats.add(idx)
        if is_timedelta_format(fmt):
            timedelta_formats.add(idx)
    wb._date_formats = date_formats
    wb._timedelta_formats = timedelta_formats


def open_workbook(data: bytes, *, data_only: bool = True, strings: bool = True) -> Any:
    """Open xlsx bytes read-only for reading cell values. Close the result after use.

    Args:
        data: The workbook bytes.
        data_only: Formula cells read as their cached result (else as formula text).
        strings: Parse the shared-string table; without it string cells read as ``""``.

    Uses a reduced openpyxl reader (see :class:`_ValuesReader`); ``keep_links=False`` because
    external-link parts are neither needed nor trusted.
    """
    reader = _ValuesReader(io.BytesIO(data), read_only=True, data_only=data_only, keep_links=False)
    reader.skip_strings = not strings
    reader.read()
    return reader.wb


def _read_gold_bytes(gold: WorkbookSource) -> bytes:
    if isinstance(gold, bytes | bytearray | memoryview):
        return bytes(gold)
    try:
        with open(os.fspath(gold), "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise GradingDataError(f"cannot read gold workbook {os.fspath(gold)!r}: {exc}") from exc


# --------------------------------------------------------------------------------------------
# extracting answer cells

Bounds = tuple[int, int, int, int]  # (min_col, min_row, max_col, max_row), 1-based, inclusive


def _worksheet_titles(wb: Any) -> list[str]:
    # Chartsheets have no cells; a chartsheet named like an answer sheet counts as missing.
    return [ws.title for ws in wb.worksheets]


# <mergeCell ref="A2:B3"/>, any namespace prefix. Element markup cannot occur inside cell text
# (it would be escaped), so a byte scan finds exactly the merge elements.
_MERGE_RE = re.compile(
    rb"<(?:[A-Za-z_][\w.-]*:)?mergeCell\s[^>]*?\bref\s*=\s*[\"']\$?([A-Za-z]{1,3})\$?([0-9]{1,7})"
    rb"(?::\$?([A-Za-z]{1,3})\$?([0-9]{1,7}))?[\"']"
)
_SCAN_CHUNK = 1 << 20


def merged_ranges(ws: ReadOnlyWorksheet) -> list[Bounds]:
    """Merged ranges of a read-only worksheet as ``(min_col, min_row, max_col, max_row)``.

    Normal-mode openpyxl (what the official grader uses) blanks every cell of a merged range
    but the top-left one and counts the whole range in ``max_row``/``max_column``; read-only mode
    knows nothing of merges (``<mergeCells>`` follows ``<sheetData>``, which read-only iteration
    stops reading early). Real inputs do store values in merged cells (task 124-46, cell A3),
    so the grader and the preview apply merges themselves, from a streamed byte scan of the
    sheet XML (tens of milliseconds for the largest sheet of the dataset, 9 MB).
    """
    found: list[Bounds] = []
    tail = b""
    # Private attributes of ReadOnlyWorksheet (openpyxl 3.1); covered by the parity tests.
    with ws.parent._archive.open(ws._worksheet_path) as src:
        while chunk := src.read(_SCAN_CHUNK):
            buf = tail + chunk
            end = 0
            for m in _MERGE_RE.finditer(buf):
                end = m.end()
                c1, r1 = column_index_from_string(m[1].decode().upper()), int(m[2])
                c2, r2 = (column_index_from_string(m[3].decode().upper()), int(m[4])) if m[3] else (c1, r1)
                found.append((min(c1, c2), min(r1, r2), max(c1, c2), max(r1, r2)))
            # Keep an unfinished element for the next chunk, never a match already taken.
            tail = buf[max(end, len(buf) - 512) :]
    return found


def _used_extent(ws: ReadOnlyWorksheet, merged: Sequence[Bounds] = ()) -> tuple[int, int]:
    """Last row and column holding a cell element or a merged range: normal-mode openpyxl's
    ``max_row``/``max_column``, by scanning the sheet (the ``<dimension>`` tag may be wrong)."""
    ws.reset_dimensions()
    max_row = max((b[3] for b in merged), default=0)
    max_col = max((b[2] for b in merged), default=0)
    for row in ws.iter_rows():
        for cell in reversed(row):
            if hasattr(cell, "row"):  # EmptyCell fillers carry no position
                max_row = max(max_row, cell.row)
                max_col = max(max_col, cell.column)
                break
    return max_row, max_col


class _Block:
    """Values of a rectangle of one sheet, read in one pass over its XML, merges applied."""

    __slots__ = ("c1", "r1", "rows")

    def __init__(self, ws: ReadOnlyWorksheet, bounds: Bounds, merged: Sequence[Bounds] = ()) -> None:
        c1, r1, c2, r2 = bounds
        self.c1, self.r1 = c1, r1
        # Bounds are explicit, so the (untrusted) <dimension> tag plays no part; read-only
        # iteration stops after r2 and yields fewer rows when the sheet ends earlier.
        rows: list[Any] = list(ws.iter_rows(min_row=r1, max_row=r2, min_col=c1, max_col=c2, values_only=True))
        for mc1, mr1, mc2, mr2 in merged:
            for r in range(max(mr1, r1), min(mr2, r2, r1 + len(rows) - 1) + 1):
                cols = range(max(mc1, c1), min(mc2, c2) + 1)
                if not cols:
                    break
                values = list(rows[r - r1])
                for c in cols:
                    if (r, c) != (mr1, mc1):  # only the top-left cell of a merge keeps its value
                        values[c - c1] = None
                rows[r - r1] = tuple(values)
        self.rows = rows

    def get(self, row: int, col: int) -> Any:
        i, j = row - self.r1, col - self.c1
        if i >= len(self.rows):
            return None
        values = self.rows[i]
        return values[j] if j < len(values) else None


def _area(b: Bounds) -> int:
    return (b[2] - b[0] + 1) * (b[3] - b[1] + 1)


def _read_blocks(
    ws: ReadOnlyWorksheet, bounds: Sequence[Bounds], merged: Sequence[Bounds] = ()
) -> dict[Bounds, _Block]:
    """The block holding each range's values: one rectangle covering all ranges of the sheet
    (one pass over its XML), unless that is much larger than the ranges (``A1,Z90000``)."""
    unique = list(dict.fromkeys(bounds))
    box = (
        min(b[0] for b in unique),
        min(b[1] for b in unique),
        max(b[2] for b in unique),
        max(b[3] for b in unique),
    )
    if len(unique) == 1 or _area(box) <= max(4 * sum(_area(b) for b in unique), 100_000):
        block = _Block(ws, box, merged)
        return dict.fromkeys(unique, block)
    return {b: _Block(ws, b, merged) for b in unique}


def _gold_call(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except GradingDataError:
        raise
    except Exception as exc:  # gold XML broken: the operator's data, so raise, do not score
        raise GradingDataError(f"cannot read gold workbook: {_describe(exc)}") from exc


def _pred_call(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception as exc:  # malformed XML of the untrusted prediction: its fault, a verdict
        raise _Unreadable(f"cannot read prediction: {_describe(exc)}") from exc


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0][:300] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


class _GoldBook:
    """A gold workbook opened on demand, with the reads already done kept.

    The same gold file is graded in every rollout of its task, so what was read from it
    (sheet names, used extents, answer blocks) is kept in a small LRU keyed by the SHA-256 of
    its bytes; a repeat grading then parses only the prediction. Use under ``lock``.
    """

    def __init__(self, data: bytes) -> None:
        self.lock = threading.Lock()
        self._data = data
        self._wb: Any = None
        self._titles: list[str] | None = None
        self._merged: dict[str, list[Bounds]] = {}
        self._extents: dict[str, tuple[int, int]] = {}
        self._blocks: dict[tuple[str, tuple[Bounds, ...]], dict[Bounds, _Block]] = {}

    def _book(self) -> Any:
        if self._wb is None:
            self._wb = _gold_call(open_workbook, self._data)
        return self._wb

    def titles(self) -> list[str]:
        if self._titles is None:
            self._titles = _worksheet_titles(self._book())
        return self._titles

    def merged(self, title: str) -> list[Bounds]:
        if title not in self._merged:
            self._merged[title] = _gold_call(merged_ranges, self._book()[title])
        return self._merged[title]

    def extent(self, title: str) -> tuple[int, int]:
        if title not in self._extents:
            self._extents[title] = _gold_call(_used_extent, self._book()[title], self.merged(title))
        return self._extents[title]

    def blocks(self, title: str, bounds: Sequence[Bounds]) -> dict[Bounds, _Block]:
        key = (title, tuple(bounds))
        if key not in self._blocks:
            self._blocks[key] = _gold_call(_read_blocks, self._book()[title], bounds, self.merged(title))
        return self._blocks[key]

    def release(self) -> None:
        """Close the workbook (its zip handle); the values read stay cached."""
        if self._wb is not None:
            self._wb.close()
            self._wb = None


_GOLD_CACHE_SIZE = 32
_gold_cache: OrderedDict[str, _GoldBook] = OrderedDict()
_gold_cache_lock = threading.Lock()


def _gold_book(data: bytes) -> _GoldBook:
    key = hashlib.sha256(data).hexdigest()
    with _gold_cache_lock:
        book = _gold_cache.get(key)
        if book is None:
            book = _gold_cache[key] = _GoldBook(data)
            while len(_gold_cache) > _GOLD_CACHE_SIZE:
                _gold_cache.popitem(last=False)
        else:
            _gold_cache.move_to_end(key)
        return book


def clear_gold_cache() -> None:
    """Forget the cached gold reads (they hold the values of up to 32 gold workbooks)."""
    with _gold_cache_lock:
        _gold_cache.clear()


@dataclass(frozen=True, slots=True)
class _Target:
    """One answer range resolved against the gold workbook."""

    ref: RangeRef
    gold_title: str


def _resolve_targets(refs: list[RangeRef], gold_titles: list[str], answer_sheet: str | None) -> list[_Target]:
    targets: list[_Target] = []
    for ref in refs:
        if ref.sheet is None:
            try:
                title = resolve_default_sheet(gold_titles, answer_sheet)
            except ValueError as exc:
                raise GradingDataError(str(exc)) from exc
        else:
            hit = find_sheet(ref.sheet, gold_titles)
            if hit is None:
                raise GradingDataError(f"gold workbook has no sheet {ref.sheet!r} (sheets: {gold_titles})")
            title = hit
        targets.append(_Target(ref=ref, gold_title=title))
    return targets


# --------------------------------------------------------------------------------------------
# grading


def grade_case(
    pred: WorkbookSource,
    gold: WorkbookSource,
    answer_position: str,
    answer_sheet: str | None = None,
    *,
    limits: GradingLimits = DEFAULT_LIMITS,
    collect_formulas: bool = True,
    mode: str = "corrected",
) -> CaseVerdict:
    """Grade one test case: every answer cell of ``pred`` must match ``gold``.

    Args:
        pred: The prediction (path or bytes). Untrusted: any problem with it yields a failing
            verdict, never an exception.
        gold: The gold answer workbook (path or bytes). Trusted.
        answer_position: The task's answer position (see :mod:`.positions`).
        answer_sheet: The task's ``answer_sheet``; used for ranges without a sheet only when it
            names exactly one gold sheet (else the gold's first sheet, the official rule).
        limits: Safety caps for the prediction.
        collect_formulas: Also list formulas of the prediction for the reports (one more
            read-only pass over the first 200 rows of each sheet).
        mode: ``corrected`` (this module's rules) or ``official`` (the official grader's
            verdicts, errors included: :mod:`.official`; ``answer_sheet`` is then unused).

    Returns:
        The verdict.

    Raises:
        GradingDataError: the gold workbook or (corrected mode) the answer position is unusable.
        ValueError: an unknown ``mode``.
    """
    if mode == "official":
        from skillopt.envs.spreadsheetbench.official import grade_official

        verdict = grade_official(pred, gold, answer_position, limits=limits)
        if collect_formulas and verdict.stage == "eval":
            verdict = _with_formulas(verdict, _read_prediction_bytes(pred, limits))
        return verdict
    if mode != "corrected":
        raise ValueError(f"grading mode must be official or corrected, got {mode!r}")
    try:
        refs = parse_answer_position(answer_position)
    except ValueError as exc:
        raise GradingDataError(str(exc)) from exc
    try:
        pred_data = _read_prediction_bytes(pred, limits)
        _check_zip(pred_data, limits)
    except _Unreadable as exc:
        return CaseVerdict(ok=False, reason=exc.reason, stage="output")

    book = _gold_book(_read_gold_bytes(gold))
    with book.lock:
        try:
            targets = _resolve_targets(refs, book.titles(), answer_sheet)
            try:
                pred_wb = _pred_call(open_workbook, pred_data)
                try:
                    verdict = _compare(book, pred_wb, targets, limits)
                finally:
                    pred_wb.close()
            except _Unreadable as exc:
                return CaseVerdict(ok=False, reason=exc.reason, stage="output")
        finally:
            book.release()
    if collect_formulas:
        verdict = _with_formulas(verdict, pred_data)
    return verdict


def _compare(book: _GoldBook, pred_wb: Any, targets: list[_Target], limits: GradingLimits) -> CaseVerdict:
    pred_titles = _worksheet_titles(pred_wb)
    pred_title_of = {t.gold_title: find_sheet(t.gold_title, pred_titles) for t in targets}
    missing = tuple(g for g, p in pred_title_of.items() if p is None)
    merged_of: dict[str, list[Bounds]] = {}

    def pred_merged(title: str | None) -> list[Bounds]:
        assert title is not None
        if title not in merged_of:
            merged_of[title] = _pred_call(merged_ranges, pred_wb[title])
        return merged_of[title]

    # Close whole-column/row ranges against the used area of both sheets.
    bounds_of: dict[int, Bounds] = {}
    per_sheet: dict[str, list[Bounds]] = {}
    for i, t in enumerate(targets):
        pred_title = pred_title_of[t.gold_title]
        if pred_title is None:
            continue
        rows, cols = 1, 1
        if t.ref.kind in ("columns", "rows"):
            gold_rows, gold_cols = book.extent(t.gold_title)
            pred_rows, pred_cols = _pred_call(_used_extent, pred_wb[pred_title], pred_merged(pred_title))
            rows, cols = max(gold_rows, pred_rows), max(gold_cols, pred_cols)
        bounds_of[i] = resolve_bounds(t.ref, used_max_row=rows, used_max_col=cols)
        per_sheet.setdefault(t.gold_title, []).append(bounds_of[i])
    n_total = sum(_area(b) for b in bounds_of.values())
    if n_total > limits.max_cells:
        return CaseVerdict(
            ok=False, reason=f"answer area of {n_total} cells exceeds the cap of {limits.max_cells}"
        )

    gold_blocks = {title: book.blocks(title, bounds) for title, bounds in per_sheet.items()}
    pred_blocks = {
        title: _pred_call(
            _read_blocks, pred_wb[pred_title_of[title]], bounds, pred_merged(pred_title_of[title])
        )
        for title, bounds in per_sheet.items()
    }

    reason = ""
    cells: list[CellCheck] = []
    mismatches: list[CellCheck] = []
    n_cells = n_empty = 0
    for i, t in enumerate(targets):
        title = t.gold_title
        if i not in bounds_of:
            reason = reason or f"worksheet not found: {title}"
            continue
        b = bounds_of[i]
        gold_block, pred_block = gold_blocks[title][b], pred_blocks[title][b]
        c1, r1, c2, r2 = b
        for col in range(c1, c2 + 1):  # column-major, like the official grader
            letter = column_letter(col)
            for row in range(r1, r2 + 1):
                expected = transform_value(gold_block.get(row, col))
                got = transform_value(pred_block.get(row, col))
                n_cells += 1
                if _is_empty(expected) and _is_empty(got):
                    n_empty += 1
                    continue
                ok = _equal_transformed(expected, got)
                check = CellCheck(sheet=title, cell=f"{letter}{row}", expected=expected, got=got, ok=ok)
                cells.append(check)
                if not ok:
                    mismatches.append(check)
                    if not reason:
                        reason = (
                            f"value@{title}!{check.cell}: gt={_short_repr(expected)} pred={_short_repr(got)}"
                        )
    return CaseVerdict(
        ok=not reason,
        reason=reason,
        n_cells=n_cells,
        n_mismatches=len(mismatches),
        mismatches=tuple(mismatches),
        cells=tuple(cells),
        n_empty_both=n_empty,
        missing_sheets=missing,
    )


def _with_formulas(verdict: CaseVerdict, pred_data: bytes) -> CaseVerdict:
    try:
        formulas = _scan_formulas(pred_data)
    except Exception as exc:  # the values were readable; a failed scan only loses the hint
        formulas = (f"(formula scan failed: {_describe(exc)})",)
    return dataclasses.replace(verdict, formulas=formulas) if formulas else verdict


def _scan_formulas(data: bytes) -> tuple[str, ...]:
    """Up to 10 formulas in the first 200 rows of any sheet (a second, formula-preserving load;
    ``data_only=True`` has replaced them by their cached values)."""
    found: list[str] = []
    wb = open_workbook(data, data_only=False, strings=False)
    try:
        for ws in wb.worksheets:
            ws.reset_dimensions()  # rows sized by their content, not by a claimed dimension
            for row in ws.iter_rows(max_row=_FORMULA_SCAN_ROWS):
                for cell in row:
                    if getattr(cell, "data_type", None) != "f":
                        continue
                    text = getattr(cell.value, "text", cell.value)
                    found.append(f"{ws.title}!{cell.coordinate}: {str(text)[:_REPR_MAX]}")
                    if len(found) >= _FORMULA_LIST_MAX:
                        return tuple(found)
    finally:
        wb.close()
    return tuple(found)


def score_cases(verdicts: Sequence[CaseVerdict]) -> tuple[float, float]:
    """Task scores over its cases: ``(hard, soft)``.

    ``soft`` is the fraction of passing cases; ``hard`` is 1.0 iff there is at least one case
    and all pass. No cases gives ``(0.0, 0.0)``.
    """
    if not verdicts:
        return 0.0, 0.0
    n_pass = sum(1 for v in verdicts if v.ok)
    return (1.0 if n_pass == len(verdicts) else 0.0), n_pass / len(verdicts)


def case_result(name: str, verdict: CaseVerdict, *, report: str = "") -> CaseResult:
    """The shared :class:`~skillopt.types.CaseResult` row of a verdict."""
    return CaseResult(name=name, ok=verdict.ok, stage=verdict.stage, reason=verdict.reason, report=report)


# --------------------------------------------------------------------------------------------
# reports


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _REPR_MAX else text[: _REPR_MAX - 3] + "..."


def _truncate_middle(text: str, limit: int) -> str:
    """Keep the head and the tail of ``text`` within ``limit`` characters."""
    if len(text) <= limit:
        return text
    marker = "\n... [{} characters truncated] ...\n"
    room = limit - len(marker.format(len(text)))
    head, tail = text[: room // 2], text[len(text) - (room - room // 2) :]
    return head + marker.format(len(text) - len(head) - len(tail)) + tail


def _summary_line(verdict: CaseVerdict) -> str:
    if verdict.stage != "eval":  # nothing was compared (unreadable output, or a caller's exec failure)
        return f"FAIL: {verdict.reason}"
    status = "PASS" if verdict.ok else "FAIL"
    return f"{status}: {verdict.n_cells - verdict.n_mismatches}/{verdict.n_cells} answer cells match"


def verification_report(verdict: CaseVerdict, *, max_chars: int = REPORT_MAX_CHARS) -> str:
    """Per-answer-cell report for the analyst, *including expected values*.

    One line per cell ``Sheet!A1: got=<repr>, expected=<repr> ✓|✗``; cells empty on both sides
    are collapsed into a count line; missing sheets and formulas found in the prediction are
    listed. The whole report is cut to ``max_chars`` keeping head and tail.
    """
    lines = [f"[verification] {_summary_line(verdict)}"]
    if verdict.reason and verdict.stage == "eval":
        lines.append(f"first failure: {verdict.reason}")
    lines.extend(f"worksheet not found in prediction: {s}" for s in verdict.missing_sheets)
    lines.extend(
        f"{c.sheet}!{c.cell}: got={_short_repr(c.got)}, expected={_short_repr(c.expected)} "
        f"{'✓' if c.ok else '✗'}"
        for c in verdict.cells
    )
    if verdict.n_empty_both:
        lines.append(f"({verdict.n_empty_both} answer cells empty in both prediction and gold, not listed)")
    lines.extend(_formula_warning(verdict))
    return _truncate_middle("\n".join(lines), max_chars)


def _formula_warning(verdict: CaseVerdict) -> list[str]:
    if not verdict.formulas:
        return []
    return [
        "WARNING: the output workbook contains formulas. openpyxl does not calculate them, so a "
        "formula cell is graded by its cached value (None unless Excel saved one). Write values.",
        *(f"  {f}" for f in verdict.formulas),
    ]


def feedback_report(verdict: CaseVerdict, *, max_wrong: int = 50, max_chars: int = REPORT_MAX_CHARS) -> str:
    """Feedback for the target model in multi-turn training rollouts, *without expected values*.

    Lists only the wrong cells with the model's own values, and the count of correct cells.
    """
    if verdict.stage != "eval":
        return f"Your code ran, but the output workbook could not be graded: {verdict.reason}"
    if verdict.ok:
        return f"All {verdict.n_cells} checked cells are correct."
    n_correct = verdict.n_cells - verdict.n_mismatches
    lines = [
        "Your code executed successfully but produced incorrect results.",
        f"{verdict.n_mismatches} checked cells are wrong, {n_correct} are correct.",
    ]
    lines.extend(f"Sheet {s!r} is missing from your output workbook." for s in verdict.missing_sheets)
    if verdict.mismatches:
        lines.append("The following cells have wrong values:")
        lines.extend(
            f"  {c.sheet}!{c.cell}: your output = {_short_repr(c.got)} (WRONG)"
            for c in verdict.mismatches[:max_wrong]
        )
        if verdict.n_mismatches > max_wrong:
            lines.append(f"  ... and {verdict.n_mismatches - max_wrong} more wrong cells")
    lines.extend(_formula_warning(verdict))
    lines.append(
        "Please analyze the spreadsheet data more carefully and fix the code. "
        "Return a complete corrected Python script inside a ```python``` block."
    )
    return _truncate_middle("\n".join(lines), max_chars)
