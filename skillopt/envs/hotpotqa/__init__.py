"""HotpotQA (distractor setting): multi-hop questions over ten Wikipedia paragraphs, two of
them supporting (Yang et al. 2018). Answer EM (hard) and F1 (soft) with the official
normalisation.

Modules: :mod:`.spec`, :mod:`.items`, :mod:`.evaluator`, :mod:`.env`, :mod:`.data`.
"""

from __future__ import annotations

__all__: list[str] = []
