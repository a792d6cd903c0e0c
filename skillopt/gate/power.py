"""What the one-sided exact sign test can detect over a number of items (said before a run
spends anything, and the docs' power table).

* :func:`sign_test_power`: the chance the test detects an improvement of a given size;
  :func:`items_for_power`: how many items reach a power;
* :func:`sign_test_min_p` and :func:`detectable_effect`: what a sign test over a given number
  of items can show at all; :func:`gate_power_notice`: the ``paired`` gate's notice at the
  start of a run, built from them.

Usage::

    items_for_power(0.10)      # 326 items detect +10 points (current at 50%) with 80% power
    sign_test_min_p(4)         # 0.0625: 4 items can never reach alpha 0.05
"""

from __future__ import annotations

import functools

import numpy as np

from skillopt.gate.distributions import binom_pmf, binom_sf
from skillopt.gate.modes import GateMode

__all__ = ["detectable_effect", "gate_power_notice", "items_for_power", "sign_test_min_p", "sign_test_power"]


@functools.lru_cache(maxsize=8192)
def _wins_needed(discordant: int, alpha: float) -> int:
    """The fewest wins among ``discordant`` pairs that the one-sided sign test at ``alpha``
    calls significant: the smallest ``c`` with ``P(W >= c) <= alpha``, ``W`` binomial with
    probability 1/2 (``discordant + 1`` when no ``c`` is)."""
    tails = binom_sf(np.arange(discordant + 1) - 1, discordant, 0.5)  # P(W >= c), c = 0..d
    significant = np.nonzero(tails <= alpha * (1 + 1e-12))[0]
    return int(significant[0]) if len(significant) else discordant + 1


def sign_test_power(base: float, effect: float, n: int, *, alpha: float = 0.05) -> float:
    """Power of the one-sided sign test at ``alpha`` over ``n`` items when the current skill
    passes each with probability ``base`` and the candidate with ``base + effect``,
    independently (a stochastic target run twice)."""
    p0, p1 = base, min(1.0, base + effect)
    a, b = p1 * (1 - p0), p0 * (1 - p1)  # P(candidate wins), P(current wins) on an item
    if a + b <= 0 or n <= 0:
        return 0.0
    # Given d discordant pairs (a binomial count), the test finds the improvement when the
    # candidate wins at least the wins it needs (each pair the candidate's with a / (a + b)).
    d = np.arange(1, n + 1)
    needed = np.array([_wins_needed(int(k), alpha) for k in d])
    p_discordant = binom_pmf(d, n, a + b)
    p_enough = binom_sf(needed - 1, d, a / (a + b))
    likely = p_discordant >= 1e-15
    return float(np.sum(p_discordant[likely] * p_enough[likely]))


def items_for_power(
    effect: float, *, base: float = 0.5, alpha: float = 0.05, power: float = 0.8, max_n: int = 2000
) -> int | None:
    """Fewest items for which :func:`sign_test_power` reaches ``power`` (``None`` up to
    ``max_n``). The exact test's power is not monotone in ``n`` (it is discrete); this is
    the first ``n`` that reaches it."""
    for n in range(1, max_n + 1):
        if sign_test_power(base, effect, n, alpha=alpha) >= power:
            return n
    return None


def sign_test_min_p(n: int) -> float:
    """The smallest p-value the one-sided exact sign test can give over ``n`` items: every item
    a win (``0.5 ** n``; 1.0 for no items)."""
    return 0.5 ** max(0, n)


def detectable_effect(n: int, *, base: float = 0.5, alpha: float = 0.05, power: float = 0.8) -> float | None:
    """The smallest improvement (in points of pass rate, 0.01 steps) that the one-sided sign
    test at ``alpha`` over ``n`` items detects with probability ``power``
    (:func:`sign_test_power`; the current skill passing each item with probability ``base``);
    ``None`` when no improvement up to a pass rate of 1 reaches it."""
    steps = round((1.0 - base) * 100)
    if steps <= 0 or sign_test_power(base, steps / 100, n, alpha=alpha) < power:
        return None
    lo, hi = 0, steps  # power(lo) < power <= power(hi); power grows with the effect
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if sign_test_power(base, mid / 100, n, alpha=alpha) >= power:
            hi = mid
        else:
            lo = mid
    return hi / 100


def gate_power_notice(
    *, mode: GateMode, metric: str, n_items: int, alpha: float, semantic_density: bool = False
) -> tuple[str, bool] | None:
    """What the ``paired`` gate's exact sign test can detect over ``n_items`` selection items,
    said before a run spends anything: the smallest p-value it can reach (every item won) and
    the improvement it detects with 80% power (the current skill at 50%, each item an
    independent draw: the worst case; ties cost nothing, so a real target often needs fewer).

    Returns:
        ``(text, can_accept)``; ``can_accept`` is False when even a candidate that wins every
        item stays above ``alpha`` (the gate then rejects every step). ``None`` for the modes
        and metrics that do not use the sign test (``strict``; ``repeat`` and the soft, mixed
        or density-weighted scores use a paired bootstrap, which has no such floor).
    """
    if mode is not GateMode.PAIRED or metric != "hard" or semantic_density:
        return None
    min_p = sign_test_min_p(n_items)
    effect = detectable_effect(n_items, alpha=alpha)
    head = (
        f"gate: paired sign test over {n_items} selection items at alpha {alpha:g}: "
        f"the smallest p-value it can reach is {min_p:.2g} (every item won)"
    )
    if min_p > alpha:
        return (
            f"{head}, above alpha, so it can never accept a candidate and every step will be "
            "rejected; use evaluation.gate_mode=repeat (each item rolled out evaluation.gate_repeats "
            "times) or a larger selection split (env.split_ratio; evaluation.sel_env_num if it caps the split)",
            False,
        )
    power = (
        f"it detects an improvement of {effect * 100:.0f} points with 80% power (current skill at 50%)"
        if effect is not None
        else "no improvement reaches 80% power on this many items"
    )
    hint = (
        ""
        if effect is not None and effect <= 0.2
        else "; evaluation.gate_mode=repeat or a larger selection split detect smaller ones"
    )
    return f"{head}; {power}{hint}", True
