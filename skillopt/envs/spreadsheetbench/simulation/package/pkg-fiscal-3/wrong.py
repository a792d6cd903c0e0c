import openpyxl

# Placeholders: the harness strips these two lines and prepends the real paths.
INPUT_PATH = "input.xlsx"
OUTPUT_PATH = "output.xlsx"

# Quarters of the calendar year: January-March is Q1.
wb = openpyxl.load_workbook(INPUT_PATH)
ws = wb["Invoices"]
for row in range(2, ws.max_row + 1):
    d = ws.cell(row=row, column=2).value
    if d is not None:
        ws.cell(row=row, column=3).value = "yes" if ((d.month - 1) // 3 + 1) == 4 else "no"
wb.save(OUTPUT_PATH)
