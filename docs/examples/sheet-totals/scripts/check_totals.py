#!/usr/bin/env python3
"""Check the totals row of a worksheet: python3 check_totals.py BOOK.xlsx [SHEET] | --self-test.

Prints one line per numeric column and exits 1 when the row labelled "Total" is missing, or a
column's total is not a SUM over exactly the data rows above it.
"""

from __future__ import annotations

import re
import sys


def check(ws) -> list[str]:
    """Problems with the totals row of worksheet ``ws`` (an openpyxl sheet); [] when fine."""
    rows = list(ws.iter_rows())
    total_at = next((i for i, row in enumerate(rows) if row[0].value == "Total"), None)
    if total_at is None:
        return ["no row labelled 'Total' in the first column"]
    first, last = 2, total_at  # 1-based data rows: after the header, up to the totals row
    problems = []
    for cell in rows[total_at][1:]:
        above = [rows[i][cell.column - 1].value for i in range(1, total_at)]
        if not any(isinstance(v, (int, float)) for v in above):
            continue
        want = re.compile(rf"=SUM\({cell.column_letter}{first}:{cell.column_letter}{last}\)", re.I)
        ok = isinstance(cell.value, str) and want.fullmatch(cell.value.replace(" ", ""))
        print(f"{cell.coordinate}: {cell.value!r} {'ok' if ok else 'WRONG'}")
        if not ok:
            problems.append(f"{cell.coordinate} should be =SUM({cell.column_letter}{first}:{cell.column_letter}{last})")
    return problems


def self_test() -> int:
    from openpyxl import Workbook

    wb = Workbook()
    ws = wb.active
    for row in (["Item", "Qty", "Price"], ["a", 2, 1.5], ["b", 3, 2.0], ["Total", "=SUM(B2:B3)", "=SUM(C2:C3)"]):
        ws.append(row)
    assert check(ws) == [], "a correct totals row was refused"
    ws["C4"] = 3.5
    assert check(ws) == ["C4 should be =SUM(C2:C3)"], "a number instead of a formula was accepted"
    print("check_totals self-test: ok")
    return 0


def main(argv: list[str]) -> int:
    if argv[1:2] == ["--self-test"]:
        return self_test()
    if len(argv) not in (2, 3):
        print(__doc__.splitlines()[0], file=sys.stderr)
        return 2
    from openpyxl import load_workbook

    wb = load_workbook(argv[1])
    ws = wb[argv[2]] if len(argv) == 3 else wb.active
    problems = check(ws)
    for p in problems:
        print(f"problem: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
