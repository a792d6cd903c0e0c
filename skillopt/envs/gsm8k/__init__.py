"""GSM8K: grade-school math word problems; the final number is graded (Cobbe et al. 2021).

Modules: :mod:`.spec`, :mod:`.items` (raw item → task + grading payload; the gold number after
``####``), :mod:`.evaluator` (number extraction: commas, units, currency, trailing zeros,
negative numbers), :mod:`.env`, :mod:`.data`.
"""

from __future__ import annotations

__all__: list[str] = []
