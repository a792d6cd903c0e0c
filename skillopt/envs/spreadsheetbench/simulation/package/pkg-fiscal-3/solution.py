import openpyxl

# Placeholders: the harness strips these two lines and prepends the real paths.
INPUT_PATH = "input.xlsx"
OUTPUT_PATH = "output.xlsx"

# The fiscal year starts on 1 April (the skill's fiscal calendar reference).
wb = openpyxl.load_workbook(INPUT_PATH)
ws = wb["Invoices"]
for row in range(2, ws.max_row + 1):
    d = ws.cell(row=row, column=2).value
    if d is not None:
        ws.cell(row=row, column=3).value = "yes" if ((d.month - 4) % 12 // 3 + 1) == 4 else "no"
wb.save(OUTPUT_PATH)
