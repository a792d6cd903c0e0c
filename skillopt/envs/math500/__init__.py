"""MATH-500: competition math problems, the ``\\boxed{}`` answer graded by mathematical
equivalence (Hendrycks et al. 2021; the 500-problem subset of Lightman et al. 2023).

Modules: :mod:`.spec`, :mod:`.items` (raw item → task + grading payload; the gold answer is the
last ``\\boxed{}`` of the reference solution), :mod:`.equivalence` (math-verify, run in a worker
process with a timeout), :mod:`.evaluator`, :mod:`.env`, :mod:`.data`.
"""

from __future__ import annotations

__all__: list[str] = []
