"""The ``sequential`` gate's group-sequential paired test over rounds of the selection items.

After each round (a look) the test accepts, stops for futility, or asks for another round,
and the probability that a no-better candidate is accepted at *any* look stays at most
``alpha``:

* :func:`alpha_spent`: how much of ``alpha`` a look may spend (Lan-DeMets spending functions,
  :data:`SPENDING_FUNCTIONS`);
* :func:`sign_walk_bounds`: on pass/fail pairs, the exact thresholds of the walk
  ``wins - losses`` (binomial steps on the integer lattice);
* :func:`sequential_bounds`: on anything else, the boundaries of the looks' normal
  statistic (the joint normal law of the looks integrated numerically);
* :func:`sequential_test`: one decision's looks, stopped at the first boundary
  (:class:`SequentialTest`).

The normal and binomial distributions come from :mod:`skillopt.gate.distributions` (scipy's
own functions), and each boundary is solved by ``scipy.optimize.brentq``. The one computation written here is the integration of the
looks' joint normal law (Armitage, McPherson & Rowe's recursion on a grid, Jennison & Turnbull
ch. 19, as gsDesign does it): scipy has no group-sequential design, and its multivariate
normal CDF (Genz's quasi-Monte Carlo) took 0.7 s per evaluation at 1e-5 and 13 s at 1e-6 for
7 looks (measured 2026-12-07 on the 2-core test machine), so solving 7 boundaries to the
grid's precision would take minutes; the grid takes milliseconds.

Deterministic and memoised: the same rounds always stop at the same look with the same
decision. docs/gate.md ("The sequential gate") explains the test and its checks.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from skillopt.gate.distributions import binom_pmf, normal_isf, normal_pdf, normal_sf
from skillopt.gate.intervals import EPS, INTERVAL_RESAMPLES, is_binary
from skillopt.gate.paired import PairedTest, paired_bootstrap, record_of

__all__ = [
    "FUTILITY_RULES",
    "SPENDING_FUNCTIONS",
    "SequentialTest",
    "alpha_spent",
    "look_information",
    "sequential_bounds",
    "sequential_test",
    "sign_walk_bounds",
]

#: Alpha-spending functions (Lan & DeMets): the share of ``alpha`` spent by information
#: fraction ``t`` (``t = look / max_looks``). ``pocock``: ``alpha * ln(1 + (e - 1) t)`` spends
#: early (a clear candidate stops at the first look); ``obrien_fleming``:
#: ``2 - 2 Phi(z_{alpha/2} / sqrt(t))`` spends almost nothing early and keeps the last look
#: near the fixed-sample level.
SPENDING_FUNCTIONS: tuple[str, ...] = ("pocock", "obrien_fleming")


def alpha_spent(t: float, alpha: float, spending: str) -> float:
    """Alpha spent by information fraction ``t`` in ``[0, 1]`` (:data:`SPENDING_FUNCTIONS`).

    Raises:
        ValueError: unknown spending function.
    """
    t = min(1.0, max(0.0, t))
    if spending == "pocock":
        return alpha * math.log1p((math.e - 1) * t)
    if spending == "obrien_fleming":
        if t <= 0:
            return 0.0
        return min(alpha, 2 * float(normal_sf(normal_isf(alpha / 2) / math.sqrt(t))))
    raise ValueError(f"unknown spending function {spending!r}; expected one of {SPENDING_FUNCTIONS}")


_GRID = 0.02  # step of the numerical integration over the score statistic (in sd units)


#: How the futility stop (no observed improvement) enters the boundaries: ``binding`` (the
#: gate always stops there, so the acceptance bounds are computed with it and spend the whole
#: ``alpha`` on the paths that continue: lower bounds, more power) or ``non_binding`` (the
#: bounds ignore it: valid even if a look that shows no improvement went on).
FUTILITY_RULES: tuple[str, ...] = ("binding", "non_binding")


def sequential_bounds(
    max_looks: int,
    *,
    alpha: float = 0.05,
    spending: str = "pocock",
    futility: str = "non_binding",
    round_fraction: float = 1.0,
) -> tuple[float, ...]:
    """Upper z boundaries of a one-sided group-sequential test with ``max_looks`` equally
    spaced looks and Lan-DeMets spending: look ``k`` accepts when ``z_k >= bounds[k - 1]``,
    and the probability under the null of crossing at any look is ``alpha``.

    The joint law of the looks' z statistics (independent normal increments) is integrated
    numerically (Armitage, McPherson & Rowe's recursion, Jennison & Turnbull ch. 19): the
    density of the partial sum on the continuation region is carried from look to look, and
    each bound is solved so that the probability of first crossing there is the alpha spent
    between the looks. ``futility``: ``non_binding`` leaves the futility stop out (it can only
    lower the false-accept rate); ``binding`` cuts the continuation region at ``z <= 0`` at
    every look but the last (the gate's futility stop on soft scores), so the bounds are lower
    for the same ``alpha``. ``round_fraction``: each look after the first adds that share of
    the first look's pairs (:func:`look_information`; 1: equally spaced). Deterministic;
    memoised.

    Raises:
        ValueError: ``max_looks < 1``, ``alpha`` outside (0, 1), ``round_fraction`` outside
            (0, 1], unknown spending or futility.
    """
    if max_looks < 1 or not 0 < alpha < 1 or not 0 < round_fraction <= 1:
        raise ValueError(
            f"sequential_bounds: max_looks {max_looks}, alpha {alpha}, round_fraction {round_fraction}"
        )
    if futility not in FUTILITY_RULES:
        raise ValueError(f"unknown futility rule {futility!r}; expected one of {FUTILITY_RULES}")
    return _bounds(int(max_looks), float(alpha), spending, futility == "binding", float(round_fraction))


def look_information(max_looks: int, round_fraction: float = 1.0) -> tuple[float, ...]:
    """The looks' cumulative information, in units of the first round: round 1 measures every
    selection item, each later round ``round_fraction`` of that many (``1, 1 + f, 1 + 2f``...).
    The spending functions' information fraction at look ``k`` is ``info[k - 1] / info[-1]``."""
    return tuple(1.0 + (k - 1) * round_fraction for k in range(1, max_looks + 1))


def _exit_excess(
    bound: float, info: float, var: float, density: np.ndarray, grid: np.ndarray, target: float
) -> float:
    """The probability of continuing through the previous look (``density``: the partial
    sum's density on its continuation region; all zero before look 1) and then crossing
    ``bound`` at a look with cumulative information ``info``, the sum having grown by a
    normal increment of variance ``var`` (``int f(u) P(u + N(0, var) >= bound sqrt(info)) du``),
    minus ``target``: the bound that spends ``target`` is this function's root."""
    if not density.any():
        return float(normal_sf(bound)) - target
    tail = normal_sf(bound * math.sqrt(info) - grid, scale=math.sqrt(var))
    return float(np.sum(density * tail) * _GRID) - target


@functools.lru_cache(maxsize=256)
def _bounds(max_looks: int, alpha: float, spending: str, binding: bool, fraction: float) -> tuple[float, ...]:
    from scipy import optimize  # here, not at the top: see the package docstring

    info = look_information(max_looks, fraction)
    bounds: list[float] = []
    # The partial sum s (sd units of round 1); its sd at the last look is sqrt(info[-1]).
    half = round((8.0 * math.sqrt(info[-1]) + 4.0) / _GRID)
    grid = np.arange(-half, half + 1) * _GRID
    density = np.zeros_like(grid)  # density of s on the continuation region after look k - 1
    spent, prev_info = 0.0, 0.0
    for k, look in enumerate(info, start=1):
        var, sd = look - prev_info, math.sqrt(look - prev_info)
        step = alpha_spent(look / info[-1], alpha, spending) - spent
        b = 40.0  # nothing to spend: a bound no statistic reaches
        if step > 1e-15:
            args = (look, var, density, grid, step)
            b = optimize.brentq(_exit_excess, -10.0, 40.0, args=args, xtol=1e-12)
            spent += _exit_excess(b, *args[:-1], 0.0)
        bounds.append(b)
        cut = (grid < b * math.sqrt(look)) & ((grid > 0) if binding else True)
        if k == 1:
            density = np.where(cut, normal_pdf(grid, scale=sd), 0.0)
        else:
            # f_k(s) = int f_{k-1}(u) phi((s - u) / sd) / sd du on the continuation region
            kernel = normal_pdf(np.arange(-8.0 * sd, 8.0 * sd + _GRID / 2, _GRID), scale=sd)
            density = np.where(cut, np.convolve(density, kernel, mode="same") * _GRID, 0.0)
        prev_info = look
    return tuple(bounds)


def sign_walk_bounds(
    steps: Sequence[int],
    *,
    max_looks: int,
    alpha: float = 0.05,
    spending: str = "pocock",
    futility: str = "binding",
    round_fraction: float = 1.0,
) -> tuple[int, ...]:
    """Exact acceptance thresholds of the group-sequential sign test on pass/fail pairs.

    Look ``k`` adds ``steps[k - 1]`` discordant pairs; under the null each is a win or a loss
    with probability 1/2 (the candidate and the current skill equally likely to pass each
    item), so ``S = wins - losses`` is a simple random walk, and its law conditional on the
    discordant counts is computed exactly on the integer lattice (Armitage, McPherson & Rowe's
    recursion, with binomial increments instead of normal ones). Look ``k`` accepts when
    ``S_k >= thresholds[k - 1]``: the smallest integer whose probability of a first crossing
    there is at most the alpha spent between the looks (Lan-DeMets, at the planned information
    fraction of look ``k``, :func:`look_information` with ``round_fraction``); what
    discreteness leaves unspent carries to the next look.
    ``futility``: ``binding``: the walk stops at ``S_k <= 0`` (no observed improvement) at
    every look but the last, and the thresholds spend ``alpha`` on the paths that continue.
    Conditional on any discordant counts the probability of accepting is at most ``alpha``,
    so it is unconditionally too. A threshold above every reachable ``S`` (nothing to spend)
    is ``sum(steps) + 1``.

    Raises:
        ValueError: more looks than ``max_looks``, negative steps, unknown futility.
    """
    if len(steps) > max_looks or any(m < 0 for m in steps):
        raise ValueError(f"sign_walk_bounds: steps {list(steps)} for {max_looks} looks")
    if futility not in FUTILITY_RULES:
        raise ValueError(f"unknown futility rule {futility!r}; expected one of {FUTILITY_RULES}")
    return _walk_bounds(
        tuple(int(m) for m in steps), int(max_looks), float(alpha), spending, futility, float(round_fraction)
    )


@functools.lru_cache(maxsize=4096)
def _walk_bounds(
    steps: tuple[int, ...], max_looks: int, alpha: float, spending: str, futility: str, round_fraction: float
) -> tuple[int, ...]:
    info = look_information(max_looks, round_fraction)
    total = int(sum(steps))
    # dist[i]: P(S = i - total, still running); index = S + total.
    dist = np.zeros(2 * total + 1)
    dist[total] = 1.0
    spent, out = 0.0, []
    for k, m in enumerate(steps, start=1):
        if m:
            inc = np.zeros(2 * m + 1)
            inc[::2] = binom_pmf(np.arange(m + 1), m, 0.5)
            dist = np.convolve(dist, inc)[m : m + 2 * total + 1]
        allowed = alpha_spent(info[k - 1] / info[-1], alpha, spending) - spent
        tail = np.cumsum(dist[::-1])[::-1]  # tail[i] = P(S >= i - total, running)
        ok = np.nonzero((tail <= allowed + 1e-12) & (np.arange(len(dist)) > total))[0]
        i = int(ok[0]) if len(ok) else len(dist)
        spent += float(tail[i]) if i < len(dist) else 0.0
        out.append(i - total)
        dist[i:] = 0.0
        if futility == "binding" and k < max_looks:
            dist[: total + 1] = 0.0
    return tuple(out)


@dataclass(frozen=True, kw_only=True)
class SequentialTest(PairedTest):
    """A group-sequential one-sided paired comparison after some looks (one per round).

    The paired part (``effect``, ``ci95``, ``n``, ``wins``, ``losses``) is over every pair of
    the rounds looked at. ``p_value`` is the last look's nominal one-sided p-value of ``z``;
    the look accepts when it is at most ``nominal_alpha`` (``1 - Phi(bound)``), which the
    spending function makes smaller than ``alpha`` so the looks together keep ``alpha``.

    Attributes:
        z: The last look's standardised statistic.
        bound: The last look's acceptance boundary on ``z``.
        nominal_alpha: The last look's nominal level (``1 - Phi(bound)``).
        looks: Looks taken (the stopping one included).
        max_looks: The round budget.
        boundary: ``accept`` (``z >= bound``), ``futility`` (no observed improvement above
            ``min_effect``), ``budget`` (look ``max_looks`` crossed neither), or ``""``
            (another round is due); the gate sets ``reproduced`` when a second round repeated
            the first exactly (a deterministic target: the means decide).
        spending: The alpha-spending function.
        alpha: The overall false-accept level.
        futility: How the futility stop entered the bounds (:data:`FUTILITY_RULES`); with
            ``binding`` on pass/fail pairs the bounds are the exact sign-walk thresholds
            (:func:`sign_walk_bounds`), shown on ``z``'s scale.
    """

    z: float
    bound: float
    nominal_alpha: float
    looks: int
    max_looks: int
    boundary: str
    spending: str
    alpha: float
    futility: str = "non_binding"

    @property
    def decided(self) -> bool:
        return bool(self.boundary)

    def to_json(self) -> dict[str, Any]:
        return record_of(self, skip=("alpha",))  # the gate records alpha beside it


def _z(diffs: Sequence[float], min_effect: float, binary: bool) -> float:
    """Self-normalised paired statistic ``(sum (d - m) - c) / sqrt(sum (d - m)^2)``: on
    pass/fail pairs the sign test's normal approximation with its continuity correction
    (``c = 1``); under the null it is conservative when items' effects differ."""
    x = np.asarray(diffs, dtype=float) - min_effect
    v = float(np.sum(x * x))
    if v <= EPS:
        return 0.0
    s = float(np.sum(x)) - (1.0 if binary else 0.0)
    return s / math.sqrt(v)


def sequential_test(
    rounds: Sequence[Sequence[float]],
    *,
    alpha: float = 0.05,
    min_effect: float = 0.0,
    max_looks: int = 4,
    spending: str = "pocock",
    futility: str = "non_binding",
    round_fraction: float = 1.0,
    binary: bool | None = None,
    seed: int = 0,
    with_interval: bool = True,
) -> SequentialTest:
    """The group-sequential paired test of a candidate against the current skill.

    ``rounds[r]`` holds round ``r + 1``'s paired differences (candidate minus current, one per
    item both sides scored in that round). After each round (a look) it computes ``z`` over
    every pair so far (:func:`_z`) and stops at the first boundary: ``accept`` when ``z`` is at
    or above the look's bound (:func:`sequential_bounds`), ``futility`` when the mean
    difference so far is at most ``min_effect`` (no observed improvement: the strict gate's
    reject), ``budget`` at look ``max_looks``. Later rounds are ignored, so the same data
    always stop at the same look with the same decision.

    ``futility``: ``non_binding`` (bounds from :func:`sequential_bounds` without the futility
    stop, ``z`` its normal approximation); ``binding``: the bounds count on the futility stop,
    so are lower for the same ``alpha``: on pass/fail pairs the sign walk's exact thresholds
    (:func:`sign_walk_bounds`), on soft scores or with ``min_effect`` the normal recursion cut
    at ``z <= 0``. ``round_fraction``: the rounds after the first measure that share of the
    first round's items (the information fractions follow, :func:`look_information`).

    Args:
        binary: The differences come from pass/fail pairs (the sign test's continuity
            correction applies); ``None``: decided from the values.
        with_interval: Compute ``ci95`` (a paired bootstrap); off, it is ``(effect, effect)``
            (simulations that only need the decision).

    Raises:
        ValueError: no rounds, or more rounds than ``max_looks`` looked at without a stop.
    """
    if not rounds:
        raise ValueError("sequential_test: no rounds")
    if binary is None:
        binary = all(is_binary([abs(d) for d in r]) for r in rounds) and abs(min_effect) < EPS
    seen, z, bound, boundary, looks = _first_stop(
        rounds,
        alpha=alpha,
        min_effect=min_effect,
        max_looks=max_looks,
        spending=spending,
        futility=futility,
        round_fraction=round_fraction,
        binary=binary,
    )
    effect = sum(seen) / len(seen) if seen else 0.0
    ci = (
        paired_bootstrap(seen, seed=seed, n_resamples=INTERVAL_RESAMPLES)[1]
        if seen and with_interval
        else (effect, effect)
    )
    return SequentialTest(
        name="group_sequential",
        p_value=float(normal_sf(z)),
        effect=effect,
        ci95=ci,
        n=len(seen),
        wins=sum(d > EPS for d in seen),
        losses=sum(d < -EPS for d in seen),
        z=z,
        bound=bound,
        nominal_alpha=float(normal_sf(bound)),
        looks=looks,
        max_looks=max_looks,
        boundary=boundary,
        spending=spending,
        alpha=alpha,
        futility=futility,
    )


def _first_stop(
    rounds: Sequence[Sequence[float]],
    *,
    alpha: float,
    min_effect: float,
    max_looks: int,
    spending: str,
    futility: str,
    round_fraction: float,
    binary: bool,
) -> tuple[list[float], float, float, str, int]:
    """:func:`sequential_test`'s looks up to the first boundary: the pairs seen by then, the
    last look's ``z`` and bound, the boundary (``""``: another round is due) and the looks."""
    exact = binary and futility == "binding"
    if not exact:
        bounds = sequential_bounds(
            max_looks, alpha=alpha, spending=spending, futility=futility, round_fraction=round_fraction
        )
    seen: list[float] = []
    z, bound, boundary, looks, discordant = 0.0, 0.0, "", 0, []
    for looks, diffs in enumerate(rounds[:max_looks], start=1):
        seen.extend(float(d) for d in diffs)
        z = _z(seen, min_effect, binary)
        mean = sum(seen) / len(seen) if seen else 0.0
        if exact:
            discordant.append(sum(abs(d) > EPS for d in diffs))
            c = sign_walk_bounds(
                discordant, max_looks=max_looks, alpha=alpha, spending=spending, round_fraction=round_fraction
            )[-1]
            # S >= c  <=>  z = (S - 1) / sqrt(n_discordant) >= (c - 1) / sqrt(n_discordant)
            bound = (c - 1) / math.sqrt(sum(discordant)) if sum(discordant) else 40.0
        else:
            bound = bounds[looks - 1]
        if z >= bound - EPS if exact else z >= bound:
            boundary = "accept"
        elif mean <= min_effect + EPS:
            boundary = "futility"
        elif looks >= max_looks:
            boundary = "budget"
        if boundary:
            break
    return seen, z, bound, boundary, looks
