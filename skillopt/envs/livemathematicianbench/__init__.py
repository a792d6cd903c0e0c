"""LiveMathematicianBench: research-level theorem questions as multiple choice (reference §5.4).

Modules: :mod:`.spec` (agents, options), :mod:`.items` (raw item → task + grading payload, with
the optional choice shuffling), :mod:`.evaluator` (the chosen label; accuracy), :mod:`.env`,
:mod:`.data`.
"""

from __future__ import annotations

__all__: list[str] = []
