import sys

import openpyxl

sys.path.insert(0, "/skill/scripts")
from sheet_helpers import parse_amount  # the skill's helper for exported amounts

# Placeholders: the harness strips these two lines and prepends the real paths.
INPUT_PATH = "input.xlsx"
OUTPUT_PATH = "output.xlsx"

wb = openpyxl.load_workbook(INPUT_PATH)
ws = wb["Expenses"]
values = [
    parse_amount(ws.cell(row=row, column=2).value)
    for row in range(2, ws.max_row + 1)
    if ws.cell(row=row, column=2).value is not None
]
ws["E2"] = max(values)
wb.save(OUTPUT_PATH)
