"""Reading workbooks safely: an untrusted prediction and a trusted gold, for the graders.

A prediction is a file the sandbox produced: it is read only when it is a regular file within
the size cap, its zip is checked for bombs before openpyxl sees it (declared sizes and member
counts), and parsing runs with defusedxml. Gold workbooks are read once and cached by content
hash. Both graders build on this module: :mod:`.evaluator` (our corrected value semantics) and
:mod:`.official` (the official grader's verdicts); the verdict types they both return are here.
"""

from __future__ import annotations

import hashlib
import io
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

from skillopt.errors import ConfigError

__all__ = [
    "DEFAULT_LIMITS",
    "DEFUSEDXML_ACTIVE",
    "REPR_MAX",
    "Block",
    "Bounds",
    "CaseVerdict",
    "CellCheck",
    "GoldBook",
    "GradingDataError",
    "GradingLimits",
    "Unreadable",
    "WorkbookSource",
    "area",
    "check_zip",
    "clear_gold_cache",
    "describe_error",
    "gold_book",
    "gold_call",
    "merged_ranges",
    "open_workbook",
    "pred_call",
    "read_blocks",
    "read_gold_bytes",
    "read_prediction_bytes",
    "short_repr",
    "used_extent",
    "worksheet_titles",
]

#: Longest ``repr`` of a cell value in a report.
REPR_MAX = 120

WorkbookSource = str | os.PathLike[str] | bytes

# openpyxl imports defusedxml when it is installed; it is a declared dependency, so this holds.
DEFUSEDXML_ACTIVE: bool = bool(openpyxl.DEFUSEDXML)

# Real workbooks carry extensions openpyxl drops with a UserWarning on every load
# ("Data Validation extension is not supported"); the grader never writes, so they are noise.
warnings.filterwarnings("ignore", category=UserWarning, module=r"openpyxl(\..*)?$")


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
# reading workbooks safely


class Unreadable(Exception):
    """Internal: the prediction cannot be graded; ``reason`` becomes the verdict's reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def read_prediction_bytes(pred: WorkbookSource, limits: GradingLimits) -> bytes:
    """The prediction's bytes, refusing anything but a regular file within the size cap.

    A path is opened with ``O_NOFOLLOW`` after an ``lstat``: a model could otherwise leave a
    symlink to the gold file (or to ``/dev/zero``) as its output.
    """
    if isinstance(pred, bytes | bytearray | memoryview):
        data = bytes(pred)
        if len(data) > limits.max_file_bytes:
            raise Unreadable(f"cannot read prediction: {len(data)} bytes exceeds {limits.max_file_bytes}")
        return data
    path = os.fspath(pred)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise Unreadable("file not exist") from None
    except OSError as exc:
        raise Unreadable(f"cannot read prediction: {exc.strerror or exc}") from None
    if stat.S_ISLNK(st.st_mode):
        raise Unreadable("cannot read prediction: output path is a symlink")
    if not stat.S_ISREG(st.st_mode):
        raise Unreadable("cannot read prediction: output path is not a regular file")
    if st.st_size > limits.max_file_bytes:
        raise Unreadable(f"cannot read prediction: {st.st_size} bytes exceeds {limits.max_file_bytes}")
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise Unreadable(f"cannot read prediction: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):  # swapped after the lstat
            raise Unreadable("cannot read prediction: output path is not a regular file")
        data = fh.read(limits.max_file_bytes + 1)
    if len(data) > limits.max_file_bytes:
        raise Unreadable(f"cannot read prediction: more than {limits.max_file_bytes} bytes")
    return data


def check_zip(data: bytes, limits: GradingLimits) -> None:
    """Refuse non-zip, truncated, encrypted and bomb-like archives before openpyxl sees them."""
    if not data.startswith(b"PK\x03\x04"):
        hint = " (legacy .xls or encrypted workbook?)" if data.startswith(b"\xd0\xcf\x11\xe0") else ""
        raise Unreadable(f"cannot read prediction: not an xlsx file (not a zip archive){hint}")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError) as exc:
        raise Unreadable(f"cannot read prediction: broken zip archive: {exc}") from None
    if len(infos) > limits.max_members:
        raise Unreadable(f"cannot read prediction: {len(infos)} zip members exceeds {limits.max_members}")
    total = sum(info.file_size for info in infos)
    if total > limits.max_uncompressed_bytes:
        raise Unreadable(
            f"cannot read prediction: uncompressed size {total} bytes exceeds {limits.max_uncompressed_bytes}"
        )
    if any(info.flag_bits & 0x1 for info in infos):
        raise Unreadable("cannot read prediction: encrypted zip members")


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


def read_gold_bytes(gold: WorkbookSource) -> bytes:
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


def worksheet_titles(wb: Any) -> list[str]:
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


def used_extent(ws: ReadOnlyWorksheet, merged: Sequence[Bounds] = ()) -> tuple[int, int]:
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


class Block:
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


def area(b: Bounds) -> int:
    return (b[2] - b[0] + 1) * (b[3] - b[1] + 1)


def read_blocks(
    ws: ReadOnlyWorksheet, bounds: Sequence[Bounds], merged: Sequence[Bounds] = ()
) -> dict[Bounds, Block]:
    """The block holding each range's values: one rectangle covering all ranges of the sheet
    (one pass over its XML), unless that is much larger than the ranges (``A1,Z90000``)."""
    unique = list(dict.fromkeys(bounds))
    box = (
        min(b[0] for b in unique),
        min(b[1] for b in unique),
        max(b[2] for b in unique),
        max(b[3] for b in unique),
    )
    if len(unique) == 1 or area(box) <= max(4 * sum(area(b) for b in unique), 100_000):
        block = Block(ws, box, merged)
        return dict.fromkeys(unique, block)
    return {b: Block(ws, b, merged) for b in unique}


def gold_call(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except GradingDataError:
        raise
    except Exception as exc:  # gold XML broken: the operator's data, so raise, do not score
        raise GradingDataError(f"cannot read gold workbook: {describe_error(exc)}") from exc


def pred_call(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception as exc:  # malformed XML of the untrusted prediction: its fault, a verdict
        raise Unreadable(f"cannot read prediction: {describe_error(exc)}") from exc


def describe_error(exc: BaseException) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0][:300] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


class GoldBook:
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
        self._blocks: dict[tuple[str, tuple[Bounds, ...]], dict[Bounds, Block]] = {}

    def _book(self) -> Any:
        if self._wb is None:
            self._wb = gold_call(open_workbook, self._data)
        return self._wb

    def titles(self) -> list[str]:
        if self._titles is None:
            self._titles = worksheet_titles(self._book())
        return self._titles

    def merged(self, title: str) -> list[Bounds]:
        if title not in self._merged:
            self._merged[title] = gold_call(merged_ranges, self._book()[title])
        return self._merged[title]

    def extent(self, title: str) -> tuple[int, int]:
        if title not in self._extents:
            self._extents[title] = gold_call(used_extent, self._book()[title], self.merged(title))
        return self._extents[title]

    def blocks(self, title: str, bounds: Sequence[Bounds]) -> dict[Bounds, Block]:
        key = (title, tuple(bounds))
        if key not in self._blocks:
            self._blocks[key] = gold_call(read_blocks, self._book()[title], bounds, self.merged(title))
        return self._blocks[key]

    def release(self) -> None:
        """Close the workbook (its zip handle); the values read stay cached."""
        if self._wb is not None:
            self._wb.close()
            self._wb = None


_GOLD_CACHE_SIZE = 32
_gold_cache: OrderedDict[str, GoldBook] = OrderedDict()
_gold_cache_lock = threading.Lock()


def gold_book(data: bytes) -> GoldBook:
    key = hashlib.sha256(data).hexdigest()
    with _gold_cache_lock:
        book = _gold_cache.get(key)
        if book is None:
            book = _gold_cache[key] = GoldBook(data)
            while len(_gold_cache) > _GOLD_CACHE_SIZE:
                _gold_cache.popitem(last=False)
        else:
            _gold_cache.move_to_end(key)
        return book


def clear_gold_cache() -> None:
    """Forget the cached gold reads (they hold the values of up to 32 gold workbooks)."""
    with _gold_cache_lock:
        _gold_cache.clear()


def short_repr(value: Any) -> str:
    """``repr(value)``, cut to :data:`REPR_MAX` characters."""
    text = repr(value)
    return text if len(text) <= REPR_MAX else text[: REPR_MAX - 3] + "..."
