"""SpreadsheetBench environment: spreadsheet manipulation tasks graded on answer cell values.

Modules: :mod:`.positions` (answer-position parsing), :mod:`.evaluator` (the trusted grader and
its reports), :mod:`.loader` (data root, splits, tasks), :mod:`.preview` (workbook preview for
prompts). Agent modules live beside them; this package imports none of them, so importing the
grader stays cheap and free of model dependencies.
"""

from __future__ import annotations

__all__: list[str] = []
