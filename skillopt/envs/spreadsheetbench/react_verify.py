"""The ReAct agent's auto-verify check, run INSIDE the rollout container (``python3 -c``).

Standalone on purpose (standard library + openpyxl only; nothing of the project is installed in
the runtime image): :mod:`.react` sends this file's source as the program text. It reports on
``output.xlsx`` in the working directory, the way the grader will read it:

* whether it exists (and its size);
* per sheet, the first 5 rows of saved values (formula cells read as their cached value);
* formulas in the first 30 rows that have no cached value: openpyxl never computes formulas,
  so the grader reads those cells as empty.

Usage (inside the container): ``python3 react_verify.py [path]``.
"""

import os
import sys

PREVIEW_ROWS = 5
PREVIEW_COLS = 20
FORMULA_ROWS = 30
MAX_SHEETS = 5
MAX_FORMULAS = 10
VALUE_MAX = 40


def _short(value):
    text = repr(value)
    return text if len(text) <= VALUE_MAX else text[: VALUE_MAX - 3] + "..."


def _is_formula(value):
    if isinstance(value, str):
        return value.startswith("=")
    return value is not None and "Formula" in type(value).__name__


def main(path="output.xlsx"):
    print("[auto-verify]")
    if not os.path.isfile(path):
        print(f"{path}: NOT FOUND. solution.py must save the workbook to OUTPUT_PATH ({path!r}).")
        return
    print(f"{path}: exists ({os.path.getsize(path)} bytes)")
    try:
        import openpyxl

        values = openpyxl.load_workbook(path, data_only=True, read_only=True)
        formulas = openpyxl.load_workbook(path, data_only=False, read_only=True)
    except Exception as exc:  # anything the model saved may be broken
        print(f"{path}: cannot be opened with openpyxl: {type(exc).__name__}: {exc}")
        return
    missing = []
    for index, name in enumerate(values.sheetnames):
        ws = values[name]
        if index < MAX_SHEETS:
            print(
                f"Sheet {name!r} (max_row={ws.max_row}, max_col={ws.max_column}), first {PREVIEW_ROWS} rows:"
            )
            for row in ws.iter_rows(min_row=1, max_row=PREVIEW_ROWS, max_col=PREVIEW_COLS):
                cells = [
                    f"{c.coordinate}={_short(c.value)}"
                    for c in row
                    if c.value is not None and hasattr(c, "coordinate")
                ]
                if cells:
                    print("  " + " | ".join(cells))
        elif index == MAX_SHEETS:
            print(f"... {len(values.sheetnames) - MAX_SHEETS} more sheet(s) not shown")
        cached = {}
        for row in ws.iter_rows(min_row=1, max_row=FORMULA_ROWS):
            for c in row:
                if hasattr(c, "coordinate"):
                    cached[c.coordinate] = c.value
        for row in formulas[name].iter_rows(min_row=1, max_row=FORMULA_ROWS):
            for c in row:
                if hasattr(c, "coordinate") and _is_formula(c.value) and cached.get(c.coordinate) is None:
                    text = c.value if isinstance(c.value, str) else getattr(c.value, "text", "") or "formula"
                    missing.append(f"{name}!{c.coordinate} {_short(text)}")
    if missing:
        shown = ", ".join(missing[:MAX_FORMULAS])
        more = f" (+{len(missing) - MAX_FORMULAS} more)" if len(missing) > MAX_FORMULAS else ""
        print(
            f"WARNING: {len(missing)} formula cell(s) in the first {FORMULA_ROWS} rows have no cached value: "
            f"{shown}{more}. openpyxl does not compute formulas, so these cells read as EMPTY when "
            "graded; write the computed values instead."
        )
    else:
        print(f"No formulas without cached values in the first {FORMULA_ROWS} rows.")


if __name__ == "__main__":
    main(*sys.argv[1:2])
