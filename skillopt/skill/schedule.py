"""The edit budget, SkillOpt's "learning rate": how many edits one step may apply (§7.2).

:func:`budget_at` is the pure schedule; :class:`EditBudgetSchedule` is the stateful wrapper the
trainer ticks once per executed step and saves for resume.

The step counter is 1-based and the first :meth:`EditBudgetSchedule.step` is already one
interval into the decay, exactly as the reference, so the published sequences hold: cosine 4→2
gives ``4,4,3,3,3,2,2,2`` over 8 steps and ``4,3,2,2`` over 4. Rounding is Python's ``round``
(half to even), which the reference's sequences depend on (e.g. 2.5 → 2 at T=12, t=8).

Usage::

    schedule = EditBudgetSchedule("cosine", max_budget=4, min_budget=2, total_steps=8)
    budgets = [schedule.step() for _ in range(8)]  # [4, 4, 3, 3, 3, 2, 2, 2]
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from skillopt.errors import ConfigError

__all__ = ["AUTONOMOUS_BUDGET", "SCHEDULE_MODES", "EditBudgetSchedule", "budget_at"]

SCHEDULE_MODES: tuple[str, ...] = ("constant", "linear", "cosine", "autonomous")
# "No clipping": larger than any merged pool. Distinct from the optimizer-decided
# ``lr_control_mode: autonomous`` (§7.4), which does not use this schedule at all.
AUTONOMOUS_BUDGET = 999


def _normalise_mode(mode: str) -> str:
    name = str(mode).strip().lower()
    if name not in SCHEDULE_MODES:
        raise ConfigError(
            f"unknown edit-budget schedule mode {mode!r}; expected one of: {', '.join(SCHEDULE_MODES)}"
        )
    return name


def _require_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {value}")
    return value


def budget_at(mode: str, t: int, total_steps: int, max_budget: int = 4, min_budget: int = 2) -> int:
    """The edit budget at step ``t`` (1-based) of ``total_steps``.

    * ``constant``: ``max_budget``.
    * ``linear``: ``max(min, round(max + (min - max) * t / T))``.
    * ``cosine``: ``max(min, round(min + ½(max - min)(1 + cos(π t / T))))``.
    * ``autonomous``: :data:`AUTONOMOUS_BUDGET` (no clipping).
    * ``T <= 1``: ``max_budget`` for every non-autonomous mode.

    ``t`` is clamped to ``[0, T]`` for both decaying modes. The reference clamps only for
    linear; its cosine climbs back up after step T (cos is periodic), which a resumed or
    over-long run would silently get.

    Args:
        mode: One of :data:`SCHEDULE_MODES` (case-insensitive).
        t: The step, 1-based (``0`` gives ``max_budget``).
        total_steps: ``T``, the number of scheduled steps.
        max_budget: Budget at the start.
        min_budget: Floor of the budget.

    Returns:
        The budget (an int).

    Raises:
        ConfigError: Unknown mode.
    """
    name = _normalise_mode(mode)
    if name == "autonomous":
        return AUTONOMOUS_BUDGET
    if name == "constant" or total_steps <= 1:
        return max_budget
    t = min(max(t, 0), total_steps)
    if name == "linear":
        value = max_budget + (min_budget - max_budget) * t / total_steps
    else:
        value = min_budget + 0.5 * (max_budget - min_budget) * (1 + math.cos(math.pi * t / total_steps))
    return max(min_budget, round(value))


class EditBudgetSchedule:
    """Stateful edit-budget schedule: :meth:`step` advances and returns the next budget.

    Args:
        mode: One of :data:`SCHEDULE_MODES`.
        max_budget: Budget at the start (>= ``min_budget``).
        min_budget: Floor of the budget (>= 0).
        total_steps: Number of scheduled steps (epochs x steps per epoch).

    Raises:
        ConfigError: Unknown mode, non-integer or negative values, ``min_budget > max_budget``.
    """

    __slots__ = ("_step", "max_budget", "min_budget", "mode", "total_steps")

    def __init__(
        self, mode: str = "cosine", *, total_steps: int, max_budget: int = 4, min_budget: int = 2
    ) -> None:
        self.mode = _normalise_mode(mode)
        self.max_budget = _require_int("max_budget", max_budget, 0)
        self.min_budget = _require_int("min_budget", min_budget, 0)
        self.total_steps = _require_int("total_steps", total_steps, 0)
        if self.min_budget > self.max_budget:
            raise ConfigError(f"min_budget ({min_budget}) must not exceed max_budget ({max_budget})")
        self._step = 0

    def __repr__(self) -> str:
        return (
            f"EditBudgetSchedule(mode={self.mode!r}, max_budget={self.max_budget}, "
            f"min_budget={self.min_budget}, total_steps={self.total_steps}, current_step={self._step})"
        )

    @property
    def current_step(self) -> int:
        """How many times :meth:`step` has been called (the last ``t`` returned)."""
        return self._step

    def step(self) -> int:
        """Advance one step and return its budget."""
        self._step += 1
        return budget_at(self.mode, self._step, self.total_steps, self.max_budget, self.min_budget)

    def peek(self) -> int:
        """The budget :meth:`step` would return, without advancing (a stage computes with it;
        the schedule advances when the step commits)."""
        return budget_at(self.mode, self._step + 1, self.total_steps, self.max_budget, self.min_budget)

    def state_dict(self) -> dict[str, int]:
        """Resume state, ``{"current_step": n}`` (the reference's shape)."""
        return {"current_step": self._step}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore from :meth:`state_dict`.

        Raises:
            ConfigError: ``current_step`` missing or not a non-negative integer.
        """
        value = state.get("current_step") if isinstance(state, Mapping) else None
        self._step = _require_int("scheduler state current_step", value, 0)
