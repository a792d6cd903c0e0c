"""Which items the ``sequential`` gate's later rounds measure.

:func:`discordant_round` (``evaluation.gate_round_items: discordant``, the default): where the
candidate and the current skill disagreed most often so far in this decision. The choice
reads only *whether* the skills disagreed, never which one won, so the sequential test stays
exact (docs/gate.md, "The sequential gate").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["discordant_round"]


def discordant_round(order: Sequence[str], history: Mapping[str, tuple[int, int]], size: int) -> list[str]:
    """The items of the ``sequential`` gate's next round (``evaluation.gate_round_items:
    discordant``): the ``size`` items of ``order`` where the candidate and the current skill
    most often disagreed so far in this decision (``history``: item → pairs measured,
    pairs discordant), by the smoothed rate ``(discordant + 1/2) / (measured + 1)`` (an item
    not measured yet counts as one in two), then fewer pairs first, then ``order``.

    Only discordant pairs move the sign test; choosing where the skills disagreed (never who
    won) spends the next round where the evidence is, and keeps the test exact: under the
    null each discordant pair is a fair coin whichever items were chosen, because the choice
    depends on no sign."""
    rank = {item: k for k, item in enumerate(order)}

    def key(item: str) -> tuple[float, int, int]:
        measured, discordant = history.get(item, (0, 0))
        return (-(discordant + 0.5) / (measured + 1), measured, rank[item])

    return sorted(order, key=key)[:size]
