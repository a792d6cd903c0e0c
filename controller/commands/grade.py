"""``skillopt grade``: grade one SpreadsheetBench prediction against its gold workbook.

A stable contract for callers outside the project::

    skillopt grade PRED.xlsx GOLD.xlsx --answer-position "'Sheet1'!A1:C3" [--answer-sheet S] [--report]
        [--mode corrected|official]

stdout gets exactly one JSON object: ``pass`` (bool), ``reason`` (``""`` on pass), ``mode``, ``n_cells``,
``n_mismatches``, ``mismatches`` (the first few ``{sheet, cell, expected, got}``, transformed
values) and, with ``--report``, ``report`` (the verification report with expected values).
Exit status: 0 for pass *and* fail; 2 with a message on stderr (and nothing on stdout) when
either workbook cannot be read or the answer position is invalid.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from controller.signals import unwinds_on_sigterm

__all__ = ["register"]

EXIT_UNREADABLE = 2
_MAX_LISTED = 5


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``grade`` sub-command."""
    parser = subparsers.add_parser(
        "grade",
        help="grade a SpreadsheetBench prediction against its gold workbook (prints one JSON object)",
        description=(
            "Compare the answer cells of PRED with GOLD using the SpreadsheetBench value rules. "
            "Prints one JSON object; exit 0 for pass or fail, 2 if a workbook cannot be read."
        ),
    )
    parser.add_argument("pred", metavar="PRED.xlsx", help="the predicted workbook (untrusted)")
    parser.add_argument("gold", metavar="GOLD.xlsx", help="the gold answer workbook")
    parser.add_argument(
        "--answer-position",
        required=True,
        metavar="POS",
        help="answer cells, e.g. \"'Sheet1'!A1:C10,D2\" (a range without a sheet means GOLD's first sheet)",
    )
    parser.add_argument(
        "--answer-sheet",
        default=None,
        metavar="S",
        help="sheet for ranges without one, used only if it names exactly one sheet of GOLD",
    )
    parser.add_argument("--report", action="store_true", help="add the per-cell verification report")
    parser.add_argument(
        "--mode",
        choices=("corrected", "official"),
        default="corrected",
        help=(
            "corrected (default): our grader with the official grader's errors fixed; official: the "
            "official grader's verdicts exactly, for numbers comparable to published results"
        ),
    )
    parser.set_defaults(func=run)


def _jsonable(value: Any) -> Any:
    """Cell values as JSON: numbers and strings as they are, anything else (timedelta,
    NaN, infinities) as its repr, so stdout is always strict JSON."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    return repr(value)


@unwinds_on_sigterm
def run(args: argparse.Namespace) -> int:
    """Grade and print; see the module docstring for the output contract."""
    # Imported here so that ``skillopt --help`` does not pay for openpyxl.
    from pathlib import Path

    from skillopt.envs.spreadsheetbench.evaluator import GradingDataError, grade_case, verification_report

    gold = Path(args.gold)
    if not gold.is_file():
        print(f"skillopt grade: cannot read gold workbook {gold}: no such file", file=sys.stderr)
        return EXIT_UNREADABLE
    try:
        verdict = grade_case(Path(args.pred), gold, args.answer_position, args.answer_sheet, mode=args.mode)
    except GradingDataError as exc:
        print(f"skillopt grade: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    if verdict.stage == "output":  # the prediction is missing or not a readable xlsx
        print(f"skillopt grade: prediction {args.pred}: {verdict.reason}", file=sys.stderr)
        return EXIT_UNREADABLE
    out: dict[str, Any] = {
        "pass": verdict.ok,
        "reason": verdict.reason,
        "mode": args.mode,
        "n_cells": verdict.n_cells,
        "n_mismatches": verdict.n_mismatches,
        "missing_sheets": list(verdict.missing_sheets),
        "mismatches": [
            {"sheet": m.sheet, "cell": m.cell, "expected": _jsonable(m.expected), "got": _jsonable(m.got)}
            for m in verdict.mismatches[:_MAX_LISTED]
        ],
    }
    if args.report:
        out["report"] = verification_report(verdict)
    print(json.dumps(out, ensure_ascii=False))
    return 0
