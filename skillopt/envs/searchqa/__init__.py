"""SearchQA: Jeopardy!-style questions answered from search-engine snippets (reference §5.1).

Modules: :mod:`.spec` (agents, options), :mod:`.items` (raw item → task + grading payload),
:mod:`.evaluator` (EM / token F1 / sub-EM), :mod:`.env` (service side), :mod:`.data`
(splits). Agents: ``qa`` (in-service, no container) and ``codex_exec`` (Codex CLI in a
container: question and context as workspace files, the answer from its final message).
"""

from __future__ import annotations

__all__: list[str] = []
