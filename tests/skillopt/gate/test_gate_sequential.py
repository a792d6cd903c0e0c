"""The ``sequential`` gate's test (skillopt.gate.sequential_test) checked by simulation: many
seeded sequences of rounds under the null (a candidate no better, items whose effects differ)
and under alternatives, no containers; its boundaries against the normal model; its decisions
reproducible; and how :func:`skillopt.gate.decide` reads it."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats as sp

from skillopt.gate import (
    SequentialTest,
    alpha_spent,
    decide,
    discordance,
    discordant_round,
    look_information,
    paired_differences,
    reproduced,
    sequential_bounds,
    sequential_test,
    sign_test,
    sign_walk_bounds,
)

ALPHA = 0.05
N_ITEMS = 25
SEQUENCES = 2000


def _run(p_cand: np.ndarray, p_cur: np.ndarray, rng: np.random.Generator, *, looks: int = 3, **kw) -> str:
    """One gate: ``looks`` rounds of pass/fail draws of both skills on the same items, the test
    stopping at its first boundary (rounds it did not need are drawn but ignored)."""
    rounds = [
        ((rng.random(len(p_cand)) < p_cand).astype(float) - (rng.random(len(p_cur)) < p_cur)).tolist()
        for _ in range(looks)
    ]
    return sequential_test(rounds, alpha=ALPHA, max_looks=looks, with_interval=False, **kw).boundary


def _accept_rate(p_cand: np.ndarray, p_cur: np.ndarray, seed: int, **kw) -> float:
    rng = np.random.default_rng(seed)
    return sum(_run(p_cand, p_cur, rng, **kw) == "accept" for _ in range(SEQUENCES)) / SEQUENCES


def _items(seed: int) -> np.ndarray:
    """Pass probabilities of the noisy simulation's kind: some items low, some high."""
    rng = np.random.default_rng(seed)
    return np.where(
        rng.random(N_ITEMS) < 0.5, rng.uniform(0.7, 0.95, N_ITEMS), rng.uniform(0.05, 0.35, N_ITEMS)
    )


# -- the boundaries -----------------------------------------------------------------------------


def test_one_look_is_the_fixed_sample_test_and_the_spending_functions_spend_alpha():
    assert sequential_bounds(1) == pytest.approx((sp.norm.isf(ALPHA),), abs=1e-6)
    for spending in ("pocock", "obrien_fleming"):
        assert alpha_spent(0, ALPHA, spending) == 0 and alpha_spent(1, ALPHA, spending) == pytest.approx(
            ALPHA
        )
    # Pocock-type spends early (bounds about level), O'Brien-Fleming late (falling bounds).
    pocock, obf = sequential_bounds(4, spending="pocock"), sequential_bounds(4, spending="obrien_fleming")
    assert max(pocock) - min(pocock) < 0.1 and 2.0 < pocock[0] < 2.2
    assert list(obf) == sorted(obf, reverse=True) and obf[0] > 3.5 and obf[-1] < 1.8
    with pytest.raises(ValueError, match="unknown spending"):
        alpha_spent(0.5, ALPHA, "linear")


@pytest.mark.parametrize("spending", ["pocock", "obrien_fleming"])
@pytest.mark.parametrize("looks", [2, 3, 5])
def test_under_the_normal_model_the_looks_together_cross_with_probability_alpha(spending, looks):
    bounds = np.asarray(sequential_bounds(looks, spending=spending))
    rng = np.random.default_rng(looks)
    z = np.cumsum(rng.standard_normal((400_000, looks)), axis=1) / np.sqrt(np.arange(1, looks + 1))
    crossed = float(np.mean((z >= bounds).any(axis=1)))
    assert crossed == pytest.approx(ALPHA, abs=0.002)
    # What each look spends is the spending function's increment.
    first = float(np.mean(z[:, 0] >= bounds[0]))
    assert first == pytest.approx(alpha_spent(1 / looks, ALPHA, spending), abs=0.0015)


# -- error rates by simulation ------------------------------------------------------------------


def _se(p: float) -> float:
    return (p * (1 - p) / SEQUENCES) ** 0.5


@pytest.mark.parametrize("looks", [2, 3, 5])
def test_false_accepts_stay_at_alpha_when_every_item_is_as_likely_under_both(looks):
    p = _items(1)
    assert _accept_rate(p, p, seed=10 + looks, looks=looks) <= ALPHA + 3 * _se(ALPHA)


def test_false_accepts_stay_at_alpha_when_items_gain_and_lose_in_balance():
    # The candidate wins 0.3 on a third of the items and loses 0.3 on another third: no better
    # on average, and the worst case for a test that treats items alike.
    p_cur = np.full(N_ITEMS, 0.5)
    shift = np.zeros(N_ITEMS)
    shift[:8], shift[8:16] = 0.3, -0.3
    assert _accept_rate(p_cur + shift, p_cur, seed=3) <= ALPHA + 3 * _se(ALPHA)


def test_a_worse_candidate_is_almost_never_accepted_and_mostly_stopped_at_the_first_look():
    rng = np.random.default_rng(4)
    p = _items(2)
    stops = [
        sequential_test(
            [
                ((rng.random(N_ITEMS) < p - 0.12).astype(float) - (rng.random(N_ITEMS) < p)).tolist()
                for _ in range(3)
            ],
            max_looks=3,
            with_interval=False,
        )
        for _ in range(500)
    ]
    assert sum(t.boundary == "accept" for t in stops) <= 5
    assert sum(t.looks == 1 for t in stops) / len(stops) > 0.8


def test_soft_scores_keep_alpha_too():
    rng = np.random.default_rng(5)
    accepts = 0
    for _ in range(SEQUENCES):
        # Soft scores in [0, 1]: both skills draw from the same per-item beta laws.
        a = rng.uniform(0.5, 4, N_ITEMS)
        rounds = [(rng.beta(a, 2.0) - rng.beta(a, 2.0)).tolist() for _ in range(3)]
        accepts += sequential_test(rounds, max_looks=3, with_interval=False).boundary == "accept"
    assert accepts / SEQUENCES <= ALPHA + 3 * _se(ALPHA)


def _improved(k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The current skill, and a candidate that states the rule of ``k`` low items (their pass
    probability from [0.05, 0.35] to [0.7, 0.95]), as the noisy simulation's real edits do."""
    rng = np.random.default_rng(seed)
    low, high = rng.uniform(0.05, 0.35, N_ITEMS), rng.uniform(0.7, 0.95, N_ITEMS)
    has_rule = np.arange(N_ITEMS) >= N_ITEMS // 2
    p_cur = np.where(has_rule, high, low)
    p_cand = p_cur.copy()
    p_cand[:k] = high[:k]
    return p_cand, p_cur


def test_real_improvements_are_found_more_often_than_by_the_fixed_sample_paired_test():
    rng = np.random.default_rng(6)
    for k, at_least in ((12, 0.9), (6, 0.45)):  # about +30 and +15 points
        p_cand, p_cur = _improved(k, seed=k)
        seq = _accept_rate(p_cand, p_cur, seed=20 + k)
        # The paired gate's exact sign test on one round at alpha.
        fixed = 0
        for _ in range(SEQUENCES):
            d = (rng.random(N_ITEMS) < p_cand).astype(int) - (rng.random(N_ITEMS) < p_cur)
            wins, losses = int((d > 0).sum()), int((d < 0).sum())
            fixed += sign_test(wins, losses) <= ALPHA
        assert seq >= at_least and seq > fixed / SEQUENCES + 0.1, (k, seq, fixed / SEQUENCES)


# -- decisions ----------------------------------------------------------------------------------


def test_the_same_rounds_give_the_same_decision_at_the_same_look():
    rng = np.random.default_rng(7)
    p_cand, p_cur = _improved(6, seed=1)
    rounds = [
        ((rng.random(N_ITEMS) < p_cand).astype(float) - (rng.random(N_ITEMS) < p_cur)).tolist()
        for _ in range(3)
    ]
    first = sequential_test(rounds, max_looks=3)
    assert sequential_test(rounds, max_looks=3) == first
    # Rounds after the stop are ignored: a resume that measured more decides the same.
    assert sequential_test(rounds[: first.looks], max_looks=3) == first
    assert first.to_json()["looks"] == first.looks and first.to_json()["boundary"] == first.boundary


def test_a_look_reports_its_statistic_bound_and_nominal_level():
    t = sequential_test([[1.0] * 8 + [0.0] * 17], max_looks=3)
    # 8 wins, no loss: z = (8 - 1) / sqrt(8) = 2.47 over Pocock's first bound (about 2.0).
    assert t.boundary == "accept" and t.looks == 1 and (t.wins, t.losses, t.n) == (8, 0, 25)
    assert t.z == pytest.approx(7 / 8**0.5) and t.bound == sequential_bounds(3)[0]
    assert t.nominal_alpha == pytest.approx(sp.norm.sf(t.bound)) and t.p_value <= t.nominal_alpha
    # No observed improvement stops at once (futility); a small one runs to the budget.
    assert sequential_test([[0.0] * 25, [1.0] * 25], max_looks=3).boundary == "futility"
    small = [[1.0, 1.0, -1.0] + [0.0] * 22] * 3
    t = sequential_test(small, max_looks=3)
    assert (t.boundary, t.looks, t.max_looks) == ("budget", 3, 3)
    assert sequential_test(small[:2], max_looks=3).boundary == ""


def _seq(boundary: str, effect: float = 0.1) -> SequentialTest:
    return SequentialTest(
        name="group_sequential", p_value=0.01, effect=effect, ci95=(0.0, 0.2), n=25, wins=5, losses=1,
        z=2.5, bound=2.0, nominal_alpha=0.02, looks=2, max_looks=3, boundary=boundary, spending="pocock",
        alpha=0.05,
    )  # fmt: skip


def test_decide_reads_the_boundary_the_test_stopped_at():
    kw = {"global_step": 4, "best_step": 1}
    d = decide(0.7, 0.6, 0.65, test=_seq("accept"), **kw)
    assert (d.action, d.reason, d.best_step) == ("accept_new_best", "significant", 4)
    assert decide(0.7, 0.6, 0.65, test=_seq("futility"), **kw).reason == "no_improvement"
    d = decide(0.7, 0.6, 0.65, test=_seq("budget"), **kw)
    assert (d.action, d.reason) == ("reject", "round_budget")
    # A target that reproduced its first round exactly: the means decide, as in strict.
    assert decide(0.7, 0.6, 0.65, test=_seq("reproduced"), **kw).reason == "above_current"
    assert decide(0.6, 0.6, 0.65, test=_seq("reproduced", 0.0), **kw).reason == "no_improvement"
    # The no-regression check composes with it.
    d = decide(0.7, 0.6, 0.65, test=_seq("accept"), regressed=["a", "b"], max_regressions=1, **kw)
    assert (d.action, d.reason) == ("reject", "regressed_items")


# -- the binding futility stop and rounds of a fraction of the items ----------------------------


@pytest.mark.parametrize("spending", ["pocock", "obrien_fleming"])
@pytest.mark.parametrize(("looks", "fraction"), [(3, 1.0), (5, 0.5)])
def test_with_a_binding_futility_stop_the_normal_model_still_crosses_with_probability_alpha(
    spending, looks, fraction
):
    info = np.asarray(look_information(looks, fraction))
    bounds = np.asarray(
        sequential_bounds(looks, spending=spending, futility="binding", round_fraction=fraction)
    )
    assert bounds[-1] < sequential_bounds(looks, spending=spending, round_fraction=fraction)[-1]
    rng = np.random.default_rng(looks)
    steps = rng.standard_normal((400_000, looks)) * np.sqrt(np.diff(info, prepend=0.0))
    z = np.cumsum(steps, axis=1) / np.sqrt(info)
    # A path stops at its first crossing or at its first look at or below 0 (not the last).
    alive = np.ones(len(z), dtype=bool)
    crossed = np.zeros(len(z), dtype=bool)
    for k in range(looks):
        crossed |= alive & (z[:, k] >= bounds[k])
        alive &= (z[:, k] < bounds[k]) & (z[:, k] > 0)
    assert float(crossed.mean()) == pytest.approx(ALPHA, abs=0.002)


def _walk_accept_probability(steps: list[int], bounds: tuple[int, ...], looks: int) -> float:
    """P(accept) of the binding sign walk by brute force over every sequence of signs."""
    total = 0.0
    for signs in itertools.product((-1, 1), repeat=sum(steps)):
        s, start = 0, 0
        for k, m in enumerate(steps):
            s += sum(signs[start : start + m])
            start += m
            if s >= bounds[k]:
                total += 0.5 ** len(signs)
                break
            if s <= 0 and k < looks - 1:
                break
    return total


@pytest.mark.parametrize("steps", [[6, 3, 3], [9, 5, 2], [4, 0, 6]])
def test_the_sign_walk_thresholds_are_exact_and_spend_at_most_alpha(steps):
    for spending in ("pocock", "obrien_fleming"):
        bounds = sign_walk_bounds(steps, max_looks=3, alpha=0.1, spending=spending)
        p = _walk_accept_probability(steps, bounds, 3)
        assert p <= 0.1 + 1e-12
        # Each threshold is the lowest that keeps alpha: one lower at the last look spends more.
        lower = (*bounds[:-1], bounds[-1] - 1)
        assert _walk_accept_probability(steps, lower, 3) > 0.1 or bounds[-1] <= 1


def _binding(p_cand, p_cur, seed, **kw) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    accepts, looks = 0, 0
    for _ in range(SEQUENCES):
        rounds = [
            ((rng.random(N_ITEMS) < p_cand).astype(float) - (rng.random(N_ITEMS) < p_cur)).tolist()
            for _ in range(kw.get("max_looks", 3))
        ]
        t = sequential_test(rounds, alpha=ALPHA, futility="binding", with_interval=False, **kw)
        accepts += t.boundary == "accept"
        looks += t.looks
    return accepts / SEQUENCES, looks / SEQUENCES


def test_the_binding_gate_keeps_alpha_under_the_null_and_finds_more_than_the_non_binding_one():
    p = _items(1)
    assert _binding(p, p, seed=31)[0] <= ALPHA + 3 * _se(ALPHA)
    p_cur = np.full(N_ITEMS, 0.5)
    shift = np.zeros(N_ITEMS)
    shift[:8], shift[8:16] = 0.3, -0.3
    assert _binding(p_cur + shift, p_cur, seed=32)[0] <= ALPHA + 3 * _se(ALPHA)
    p_cand, p_cur = _improved(6, seed=6)
    binding, _ = _binding(p_cand, p_cur, seed=33)
    assert binding >= _accept_rate(p_cand, p_cur, seed=33) - 2 * _se(0.5)


def test_rounds_of_half_the_items_keep_alpha_and_soft_scores_too():
    p = _items(3)
    rng = np.random.default_rng(34)
    accepts = soft = 0
    for _ in range(SEQUENCES):
        idx = [rng.permutation(N_ITEMS)[:12] for _ in range(4)]
        draws = [((rng.random(N_ITEMS) < p).astype(float) - (rng.random(N_ITEMS) < p))]
        draws += [(rng.random(12) < p[i]).astype(float) - (rng.random(12) < p[i]) for i in idx]
        t = sequential_test(
            [d.tolist() for d in draws],
            max_looks=5,
            futility="binding",
            round_fraction=0.48,
            with_interval=False,
        )
        accepts += t.boundary == "accept"
        a = rng.uniform(0.5, 4, N_ITEMS)
        rounds = [(rng.beta(a, 2.0) - rng.beta(a, 2.0)).tolist()]
        rounds += [(rng.beta(a[i], 2.0) - rng.beta(a[i], 2.0)).tolist() for i in idx]
        t = sequential_test(rounds, max_looks=5, futility="binding", round_fraction=0.48, with_interval=False)
        soft += t.boundary == "accept"
    assert accepts / SEQUENCES <= ALPHA + 3 * _se(ALPHA)
    assert soft / SEQUENCES <= ALPHA + 3 * _se(ALPHA)


def test_a_binding_look_reports_the_exact_threshold_on_the_z_scale():
    # 6 wins, 1 loss over 7 discordant pairs: S = 5.
    t = sequential_test([[1.0] * 6 + [-1.0] + [0.0] * 18], max_looks=3, futility="binding")
    c = sign_walk_bounds([7], max_looks=3)[0]
    assert t.bound == pytest.approx((c - 1) / 7**0.5) and t.futility == "binding"
    assert (t.boundary == "accept") == (c <= 5)
    assert t.to_json()["futility"] == "binding"


# -- where later rounds look (evaluation.gate_round_items) --------------------------------------


def _gate_with_rounds(p_cand, p_cur, rng, choice: str, *, looks: int = 5, size: int = 12) -> tuple[str, int]:
    """One binding gate whose rounds after the first measure ``size`` items, chosen as the
    trainer does (``discordant``: :func:`skillopt.gate.discordant_round` over this decision's
    pairs; ``fixed``: the items in turn); returns the boundary and the draws it took."""
    order = [str(i) for i in rng.permutation(N_ITEMS)]
    rounds = [dict(zip(map(str, range(N_ITEMS)), _draw(p_cand, p_cur, rng, range(N_ITEMS)), strict=True))]
    draws = 2 * N_ITEMS
    for k in range(1, looks + 1):
        if k > 1:
            if choice == "discordant":
                history: dict[str, tuple[int, int]] = {}
                for r in rounds:
                    for i, d in r.items():
                        n, m = history.get(i, (0, 0))
                        history[i] = (n + 1, m + (d != 0))
                items = discordant_round(order, history, size)
            else:
                items = [order[(j + (k - 2) * size) % N_ITEMS] for j in range(size)]
            idx = [int(i) for i in items]
            rounds.append(dict(zip(items, _draw(p_cand, p_cur, rng, idx), strict=True)))
            draws += 2 * size
        t = sequential_test(
            [list(r.values()) for r in rounds],
            max_looks=looks,
            futility="binding",
            round_fraction=size / N_ITEMS,
            with_interval=False,
        )
        if t.decided:
            return t.boundary, draws
    raise AssertionError("the test stops at its last look")


def _draw(p_cand: np.ndarray, p_cur: np.ndarray, rng: np.random.Generator, idx) -> list[float]:
    idx = list(idx)
    return ((rng.random(len(idx)) < p_cand[idx]).astype(float) - (rng.random(len(idx)) < p_cur[idx])).tolist()


def test_rounds_where_the_skills_disagreed_keep_alpha_and_find_more_for_fewer_draws():
    """Choosing later rounds' items by past discordance (never by who won) leaves each
    discordant pair a fair coin under the null, so alpha holds; and it spends the rounds on the
    items a real edit changed, so a +15-point candidate is found more often, for fewer draws,
    than with the same rounds taken in turn."""
    rng = np.random.default_rng(41)
    p = _items(4)
    null = [_gate_with_rounds(p, p, rng, "discordant")[0] == "accept" for _ in range(SEQUENCES)]
    assert sum(null) / SEQUENCES <= ALPHA + 3 * _se(ALPHA)
    p_cand, p_cur = _improved(6, seed=6)
    found, cost = {}, {}
    for choice in ("discordant", "fixed"):
        runs = [_gate_with_rounds(p_cand, p_cur, rng, choice) for _ in range(SEQUENCES // 2)]
        found[choice] = sum(b == "accept" for b, _ in runs) / len(runs)
        cost[choice] = sum(d for _, d in runs) / len(runs)
    assert found["discordant"] >= found["fixed"] + 0.05, found
    assert cost["discordant"] <= cost["fixed"], cost


def test_the_next_round_takes_the_most_discordant_items_then_new_ones_then_by_order():
    order = ["a", "b", "c", "d", "e", "f"]
    history = {"a": (1, 0), "b": (1, 1), "c": (2, 1), "d": (2, 2), "e": (3, 1)}
    # d 2.5/3, b 1.5/2, f (new) 0.5/1, c 1.5/3, e 1.5/4, a 0.5/2
    assert discordant_round(order, history, 6) == ["d", "b", "f", "c", "e", "a"]
    assert discordant_round(order, history, 2) == ["d", "b"]
    # No history: the order itself; equal rates: fewer pairs first.
    assert discordant_round(order, {}, 3) == ["a", "b", "c"]
    assert discordant_round(["x", "y"], {"x": (2, 1), "y": (0, 0)}, 1) == ["y"]


def test_a_rounds_pairs_their_discordance_and_a_reproduced_round():
    first = paired_differences({"a": 1.0, "b": 0.0, "c": 1.0}, {"a": 0.0, "b": 0.0, "d": 1.0})
    assert first == {"a": 1.0, "b": 0.0}  # the items both scored, in the candidate's order
    second = paired_differences({"a": 0.0, "c": 1.0}, {"a": 1.0, "c": 0.0})
    assert discordance([first, second]) == {"a": (2, 2), "b": (1, 0), "c": (1, 1)}
    assert reproduced({"a": 1.0, "b": 0.0}, {"b": 0.0})
    assert not reproduced({"a": 1.0, "b": 0.0}, {"b": 1.0})  # scored differently
    assert not reproduced({"a": 1.0}, {"a": 1.0, "z": 0.0})  # a new item from the reserve
    assert not reproduced({"a": 1.0}, {})
