import sys

import openpyxl

sys.path.insert(0, "/skill/scripts")
from sheet_helpers import parse_amount  # the skill's helper for exported amounts

# Placeholders: the harness strips these two lines and prepends the real paths.
INPUT_PATH = "input.xlsx"
OUTPUT_PATH = "output.xlsx"

wb = openpyxl.load_workbook(INPUT_PATH)
ws = wb["Ledger"]
total = 0.0
for row in range(2, ws.max_row + 1):
    text = ws.cell(row=row, column=3).value
    if text is not None:
        total += parse_amount(text)
ws["E2"] = round(total, 2)
wb.save(OUTPUT_PATH)
