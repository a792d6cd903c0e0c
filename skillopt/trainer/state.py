"""Run state persisted after every step and epoch stage (``runtime_state.json``).

Everything a resumed run needs to continue exactly where it stopped: the current and best
skills with their scores and origins, the edit-budget schedule, the in-epoch step buffer (the
reference lost it on resume, §14.9), the selection cache, the meta skill, which epoch-end
stages are done, and the optimizer's usage so far.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from skillopt.durable import atomic_write_json, atomic_write_text

__all__ = ["RunMode", "TrainerState", "atomic_write_json", "atomic_write_text", "refuse_mode_change"]

STATE_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class RunMode:
    """Real models or the offline simulation, and why (printed at start, recorded in the run
    state and every summary; ``--resume`` refuses to change it)."""

    simulated: bool
    reason: str = ""

    def describe(self) -> str:
        what = "OFFLINE SIMULATION (scripted models)" if self.simulated else "real models"
        return f"{what}: {self.reason}" if self.reason else what

    def to_dict(self) -> dict[str, Any]:
        return {"simulated": self.simulated, "reason": self.reason}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> RunMode | None:
        if not data:
            return None
        return cls(simulated=bool(data.get("simulated")), reason=str(data.get("reason", "")))


def refuse_mode_change(out_dir: Path, recorded: dict[str, Any] | None, mode: RunMode) -> None:
    """Refuse to continue a run in another mode than it started in: scripted and real scores
    must never mix in one run.

    Raises:
        ConfigError: naming both modes and the flag that keeps the recorded one.
    """
    from skillopt.errors import ConfigError

    before = RunMode.from_dict(recorded)
    if before is not None and before.simulated != mode.simulated:
        raise ConfigError(
            f"{out_dir} was started with {before.describe()}; resuming it now would use {mode.describe()}. "
            f"Resume with --simulate {'on' if before.simulated else 'off'} (real models need the provider "
            "keys the run used), or start a new run"
        )


@dataclass
class TrainerState:
    """Mutable state of one run; the trainer owns it and persists it."""

    last_completed_step: int = 0
    current_skill: str = ""
    current_score: float | None = None  # None: the baseline has not been measured
    current_origin: str = "initial"
    best_skill: str = ""
    best_score: float | None = None
    best_step: int = 0
    best_origin: str = "initial"
    scheduler: dict[str, Any] = field(default_factory=dict)
    step_buffer: dict[str, Any] = field(default_factory=dict)
    gate_cache: dict[str, Any] = field(default_factory=dict)
    meta_skill: str = ""
    epochs_done: list[int] = field(default_factory=list)
    epoch_stages: dict[str, str] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    target_usage: dict[str, Any] = field(default_factory=dict)
    #: RunMode.to_dict() of the session that started the run.
    mode: dict[str, Any] = field(default_factory=dict)
    #: Sandbox hosts that ran rollouts, over every session of the run.
    hosts: list[str] = field(default_factory=list)
    #: Why the last session stopped before the end ("" = it did not, or it crashed).
    stop_reason: str = ""
    #: The environment the run is pinned to (first session): runtime image digest and more;
    #: ``--resume`` keeps using that digest.
    environment: dict[str, Any] = field(default_factory=dict)
    #: Step records; persisted in ``history.json`` next to the state (not inside it).
    history: list[dict[str, Any]] = field(default_factory=list)
    version: int = STATE_VERSION

    def save(self, path: Path) -> None:
        # Fields hold plain JSON values already: no dataclasses.asdict deep copy (it dominated
        # the controller's per-step overhead).
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "history"}
        atomic_write_json(path, data)

    @classmethod
    def load(cls, path: Path) -> TrainerState | None:
        if not path.exists():
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
        known = {f for f in cls.__dataclass_fields__}
        state = cls(**{k: v for k, v in data.items() if k in known and k != "history"})
        hist = path.with_name("history.json")
        if hist.exists():
            state.history = [
                r
                for r in json.loads(hist.read_text(encoding="utf-8"))
                if r["step"] <= state.last_completed_step
            ]
        return state
