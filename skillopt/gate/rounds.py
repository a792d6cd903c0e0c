"""The ``sequential`` gate's rounds: their pairs, and which items the later ones measure.

* :func:`paired_differences`: one round's pairs (per item, candidate minus current);
* :func:`discordant_round` (``evaluation.gate_round_items: discordant``, the default): the next
  round's items, where the candidate and the current skill disagreed most often so far in this
  decision (:func:`discordance`). The choice reads only *whether* the skills disagreed, never
  which one won, so the sequential test stays exact (docs/gate.md, "The sequential gate");
* :func:`reproduced`: a second round that repeated the first exactly (a deterministic target:
  the means decide, as in ``strict``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["discordance", "discordant_round", "paired_differences", "reproduced"]


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


def paired_differences(candidate: Mapping[str, float], reference: Mapping[str, float]) -> dict[str, float]:
    """Per item both skills scored (in ``candidate``'s order), the score's difference,
    candidate minus reference: one round's pairs."""
    return {i: candidate[i] - reference[i] for i in candidate if i in reference}


def discordance(rounds: Sequence[Mapping[str, float]]) -> dict[str, tuple[int, int]]:
    """Per item, the pairs measured so far in this decision (``rounds``: each round's
    :func:`paired_differences`) and how many of them were discordant (a non-zero difference):
    the ``history`` :func:`discordant_round` ranks by."""
    out: dict[str, tuple[int, int]] = {}
    for pairs in rounds:
        for item, d in pairs.items():
            n, k = out.get(item, (0, 0))
            out[item] = (n + 1, k + (abs(d) > 1e-9))
    return out


def reproduced(first: Mapping[str, float], again: Mapping[str, float]) -> bool:
    """``again`` scored only items ``first`` scored (a round of repeats, not of new items from
    the split's reserve), and each of them the same: a deterministic target, which has no
    noise to test."""
    shared = [i for i in again if i in first]
    return bool(shared) and len(shared) == len(again) and all(again[i] == first[i] for i in shared)
