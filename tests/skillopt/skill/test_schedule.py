"""Edit-budget schedule: the reference's published sequences, state round trip, validation."""

from __future__ import annotations

import pytest

from skillopt.errors import ConfigError
from skillopt.skill import AUTONOMOUS_BUDGET, SCHEDULE_MODES, EditBudgetSchedule, budget_at


def run(mode: str, total: int, max_budget: int = 4, min_budget: int = 2) -> list[int]:
    schedule = EditBudgetSchedule(mode, max_budget=max_budget, min_budget=min_budget, total_steps=total)
    return [schedule.step() for _ in range(total)]


@pytest.mark.parametrize(
    ("total", "expected"),
    [
        (8, [4, 4, 3, 3, 3, 2, 2, 2]),  # SpreadsheetBench
        (4, [4, 3, 2, 2]),  # ALFWorld
        (12, [4, 4, 4, 4, 3, 3, 3, 2, 2, 2, 2, 2]),  # DocVQA
        (40, [4] * 13 + [3] * 13 + [2] * 14),  # SearchQA
    ],
)
def test_cosine_matches_reference_sequences(total: int, expected: list[int]) -> None:
    assert run("cosine", total) == expected


def test_linear_t8_equals_cosine_t8() -> None:
    assert run("linear", 8) == [4, 4, 3, 3, 3, 2, 2, 2]


def test_first_step_already_decayed_and_last_is_min() -> None:
    seq = run("cosine", 4, max_budget=10, min_budget=1)
    assert seq[0] < 10 and seq[-1] == 1
    assert run("linear", 5, max_budget=10, min_budget=0)[-1] == 0


@pytest.mark.parametrize("mode", ["linear", "cosine"])
@pytest.mark.parametrize("total", [2, 3, 7, 25])
def test_decaying_modes_are_monotone_ints_within_bounds(mode: str, total: int) -> None:
    seq = run(mode, total, max_budget=9, min_budget=3)
    assert all(isinstance(v, int) for v in seq)
    assert all(3 <= v <= 9 for v in seq)
    assert seq == sorted(seq, reverse=True)


def test_constant_and_autonomous() -> None:
    assert run("constant", 5) == [4] * 5
    assert run("autonomous", 3) == [AUTONOMOUS_BUDGET] * 3 == [999] * 3


@pytest.mark.parametrize("total", [0, 1])
@pytest.mark.parametrize("mode", ["linear", "cosine", "constant"])
def test_short_schedules_give_max(mode: str, total: int) -> None:
    schedule = EditBudgetSchedule(mode, max_budget=6, min_budget=2, total_steps=total)
    assert [schedule.step() for _ in range(3)] == [6, 6, 6]


def test_steps_beyond_total_stay_at_min() -> None:
    schedule = EditBudgetSchedule("cosine", total_steps=4)
    assert [schedule.step() for _ in range(8)] == [4, 3, 2, 2, 2, 2, 2, 2]


def test_budget_at_is_pure_and_case_insensitive() -> None:
    assert [budget_at("COSINE", t, 8, 4, 2) for t in range(1, 9)] == [4, 4, 3, 3, 3, 2, 2, 2]
    assert budget_at("cosine", 0, 8) == 4
    assert budget_at("linear", 99, 8) == 2


def test_state_round_trip_resumes_sequence() -> None:
    a = EditBudgetSchedule("cosine", total_steps=8)
    first = [a.step() for _ in range(3)]
    state = a.state_dict()
    assert state == {"current_step": 3} and a.current_step == 3
    b = EditBudgetSchedule("cosine", total_steps=8)
    b.load_state_dict(state)
    assert first + [b.step() for _ in range(5)] == [4, 4, 3, 3, 3, 2, 2, 2]


@pytest.mark.parametrize("state", [{}, {"current_step": -1}, {"current_step": "3"}, {"current_step": True}])
def test_bad_state_raises(state: dict) -> None:
    with pytest.raises(ConfigError):
        EditBudgetSchedule("cosine", total_steps=8).load_state_dict(state)


def test_unknown_mode_names_allowed_values() -> None:
    with pytest.raises(ConfigError) as info:
        EditBudgetSchedule("step", total_steps=8)
    for mode in SCHEDULE_MODES:
        assert mode in str(info.value)
    with pytest.raises(ConfigError):
        budget_at("exp", 1, 8)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_budget": 1, "min_budget": 2},
        {"min_budget": -1},
        {"max_budget": 2.5},
        {"total_steps": -3},
        {"total_steps": True},
    ],
)
def test_invalid_config_raises(kwargs: dict) -> None:
    params = {"total_steps": 8, **kwargs}
    with pytest.raises(ConfigError):
        EditBudgetSchedule("cosine", **params)


def test_repr_mentions_state() -> None:
    assert "current_step=0" in repr(EditBudgetSchedule("linear", total_steps=2))
