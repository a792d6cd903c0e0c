import openpyxl

# Placeholders: the harness strips these two lines and prepends the real paths.
INPUT_PATH = "input.xlsx"
OUTPUT_PATH = "output.xlsx"

# The fiscal year starts on 1 April (the skill's fiscal calendar reference).
wb = openpyxl.load_workbook(INPUT_PATH)
ws = wb["Payroll"]
total = 0
for row in range(2, ws.max_row + 1):
    d, gross = ws.cell(row=row, column=1).value, ws.cell(row=row, column=2).value
    if d is not None and gross is not None and ((d.month - 4) % 12 // 3 + 1) == 1:
        total += gross
ws["E2"] = total
wb.save(OUTPUT_PATH)
