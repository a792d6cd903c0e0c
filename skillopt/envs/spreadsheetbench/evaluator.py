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
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from skillopt.envs.spreadsheetbench.positions import (
    RangeRef,
    column_letter,
    find_sheet,
    parse_answer_position,
    resolve_bounds,
    resolve_default_sheet,
)
from skillopt.envs.spreadsheetbench.workbook import (
    DEFAULT_LIMITS,
    REPR_MAX,
    Bounds,
    CaseVerdict,
    CellCheck,
    GoldBook,
    GradingDataError,
    GradingLimits,
    Unreadable,
    WorkbookSource,
    area,
    check_zip,
    describe_error,
    gold_book,
    merged_ranges,
    open_workbook,
    pred_call,
    read_blocks,
    read_gold_bytes,
    read_prediction_bytes,
    short_repr,
    used_extent,
    worksheet_titles,
)
from skillopt.types import CaseResult

__all__ = [
    "REPORT_MAX_CHARS",
    "CaseVerdict",
    "GradingDataError",
    "GradingLimits",
    "case_result",
    "compare_values",
    "feedback_report",
    "grade_case",
    "score_cases",
    "transform_value",
    "verification_report",
]

REPORT_MAX_CHARS = 12_000
_FORMULA_SCAN_ROWS = 200
_FORMULA_LIST_MAX = 10

_EXCEL_EPOCH = _dt.datetime(1899, 12, 30)


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
            verdict = _with_formulas(verdict, read_prediction_bytes(pred, limits))
        return verdict
    if mode != "corrected":
        raise ValueError(f"grading mode must be official or corrected, got {mode!r}")
    try:
        refs = parse_answer_position(answer_position)
    except ValueError as exc:
        raise GradingDataError(str(exc)) from exc
    try:
        pred_data = read_prediction_bytes(pred, limits)
        check_zip(pred_data, limits)
    except Unreadable as exc:
        return CaseVerdict(ok=False, reason=exc.reason, stage="output")

    book = gold_book(read_gold_bytes(gold))
    with book.lock:
        try:
            targets = _resolve_targets(refs, book.titles(), answer_sheet)
            try:
                pred_wb = pred_call(open_workbook, pred_data)
                try:
                    verdict = _compare(book, pred_wb, targets, limits)
                finally:
                    pred_wb.close()
            except Unreadable as exc:
                return CaseVerdict(ok=False, reason=exc.reason, stage="output")
        finally:
            book.release()
    if collect_formulas:
        verdict = _with_formulas(verdict, pred_data)
    return verdict


def _compare(book: GoldBook, pred_wb: Any, targets: list[_Target], limits: GradingLimits) -> CaseVerdict:
    pred_titles = worksheet_titles(pred_wb)
    pred_title_of = {t.gold_title: find_sheet(t.gold_title, pred_titles) for t in targets}
    missing = tuple(g for g, p in pred_title_of.items() if p is None)
    merged_of: dict[str, list[Bounds]] = {}

    def pred_merged(title: str | None) -> list[Bounds]:
        assert title is not None
        if title not in merged_of:
            merged_of[title] = pred_call(merged_ranges, pred_wb[title])
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
            pred_rows, pred_cols = pred_call(used_extent, pred_wb[pred_title], pred_merged(pred_title))
            rows, cols = max(gold_rows, pred_rows), max(gold_cols, pred_cols)
        bounds_of[i] = resolve_bounds(t.ref, used_max_row=rows, used_max_col=cols)
        per_sheet.setdefault(t.gold_title, []).append(bounds_of[i])
    n_total = sum(area(b) for b in bounds_of.values())
    if n_total > limits.max_cells:
        return CaseVerdict(
            ok=False, reason=f"answer area of {n_total} cells exceeds the cap of {limits.max_cells}"
        )

    gold_blocks = {title: book.blocks(title, bounds) for title, bounds in per_sheet.items()}
    pred_blocks = {
        title: pred_call(
            read_blocks, pred_wb[pred_title_of[title]], bounds, pred_merged(pred_title_of[title])
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
                            f"value@{title}!{check.cell}: gt={short_repr(expected)} pred={short_repr(got)}"
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
        formulas = (f"(formula scan failed: {describe_error(exc)})",)
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
                    found.append(f"{ws.title}!{cell.coordinate}: {str(text)[:REPR_MAX]}")
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
        f"{c.sheet}!{c.cell}: got={short_repr(c.got)}, expected={short_repr(c.expected)} "
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
            f"  {c.sheet}!{c.cell}: your output = {short_repr(c.got)} (WRONG)"
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
