"""The run state: everything a resumed run needs, and the progress counters that decide what
a resume reruns (``runtime_state.json``; written by :class:`~skillopt.trainer.rundir.RunDirectory`).

Progress is counted, never guessed from which files exist:

* ``last_completed_step``: the last committed step (its record is in ``history.json``);
* ``step_stages``: the segments of the *next* step that committed their outputs (to the stage
  cache) before the run stopped; a resume replays them from there and runs the rest;
* ``epoch_stages``: the epoch-end segments that committed, with their outcome
  (``slow_update_2: accept``); ``epochs_done``: epochs whose end committed.

(Both keys name what they count after the stored format, which predates the word "segment":
:mod:`skillopt.trainer.segments`.)

The rest is what the next commit builds on: the current and best skill versions (stored as
their packed text, :mod:`skillopt.skill.packed`) with their scores and origins, the
edit-budget schedule, the in-epoch step buffer (the reference lost it on resume, §14.9), the
selection cache, the meta skill, usage, the run mode and the pinned environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from skillopt.errors import ConfigError
from skillopt.skill.packed import PackageFrame
from skillopt.trainer.records import StepRecord
from skillopt.trainer.versions import RecordError, upgrade
from skillopt.types import SkillVersion, Usage

__all__ = ["STATE_VERSION", "RunMode", "TrainerState", "refuse_mode_change"]

#: 2: ``step_stages`` (the committed segments of the step in progress) and ``epoch_records``.
STATE_VERSION = 2


@dataclass(frozen=True, kw_only=True)
class RunMode:
    """Real models or the offline simulation, and why (printed at start, recorded in the run
    state and every summary; ``--resume`` refuses to change it)."""

    simulated: bool
    reason: str = ""
    #: The noisy simulation (a stochastic target; ``run.simulate: noisy``).
    noisy: bool = False

    @property
    def flag(self) -> str:
        """The ``--simulate`` value that chooses this mode."""
        return ("noisy" if self.noisy else "on") if self.simulated else "off"

    def describe(self) -> str:
        if not self.simulated:
            what = "real models"
        elif self.noisy:
            what = "OFFLINE SIMULATION (scripted models, noisy target)"
        else:
            what = "OFFLINE SIMULATION (scripted models)"
        return f"{what}: {self.reason}" if self.reason else what

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"simulated": self.simulated, "reason": self.reason}
        if self.noisy:
            out["noisy"] = True
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> RunMode | None:
        """The mode :meth:`to_dict` wrote (``None`` for none recorded: an empty or missing one)."""
        if not data:
            return None
        return cls(
            simulated=bool(data.get("simulated")),
            reason=str(data.get("reason", "")),
            noisy=bool(data.get("noisy")),
        )


def refuse_mode_change(out_dir: Path, recorded: RunMode | None, mode: RunMode) -> None:
    """Refuse to continue a run in another mode than it started in: scripted and real scores
    must never mix in one run.

    Args:
        recorded: the mode the run recorded (``None``: none recorded, nothing to refuse).

    Raises:
        ConfigError: naming both modes and the flag that keeps the recorded one.
    """
    if recorded is not None and recorded.flag != mode.flag:
        raise ConfigError(
            f"{out_dir} was started with {recorded.describe()}; resuming it now would use {mode.describe()}. "
            f"Resume with --simulate {recorded.flag} (real models need the provider "
            "keys the run used), or start a new run"
        )


@dataclass
class TrainerState:
    """Mutable state of one run; the run context owns it and commits it."""

    last_completed_step: int = 0
    #: The current and best versions (None until the baseline made the initial one both).
    current_skill: SkillVersion | None = None
    current_score: float | None = None  # None: the baseline has not been measured
    current_origin: str = "initial"
    best_skill: SkillVersion | None = None
    best_score: float | None = None
    best_step: int = 0
    best_origin: str = "initial"
    scheduler: dict[str, Any] = field(default_factory=dict)
    step_buffer: dict[str, Any] = field(default_factory=dict)
    #: The selection cache (``RunContext.selection_cache``; stored under this key).
    gate_cache: dict[str, Any] = field(default_factory=dict)
    meta_skill: str = ""
    epochs_done: list[int] = field(default_factory=list)
    epoch_stages: dict[str, str] = field(default_factory=dict)
    #: Each finished epoch's record (``EpochRecord.to_json()``), by epoch number as a string.
    epoch_records: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Segments of step ``last_completed_step + 1`` whose outputs are committed (replayed on
    #: resume).
    step_stages: list[str] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    target_usage: dict[str, Any] = field(default_factory=dict)
    #: RunMode.to_dict() of the session that started the run.
    mode: dict[str, Any] = field(default_factory=dict)
    #: Sandbox hosts that ran rollouts, over every session of the run.
    hosts: list[str] = field(default_factory=list)
    #: The final check's decision on making the final skill the best one (its gate's record;
    #: {} = not taken: the final skill was the best one, or the run has not finished).
    final_gate: dict[str, Any] = field(default_factory=dict)
    #: Why the last session stopped before the end ("" = it did not, or it crashed).
    stop_reason: str = ""
    #: The environment the run is pinned to (first session): runtime image digest and more;
    #: ``--resume`` keeps using that digest.
    environment: dict[str, Any] = field(default_factory=dict)
    #: Step records; persisted in ``history.json`` next to the state (not inside it).
    history: list[StepRecord] = field(default_factory=list)
    version: int = STATE_VERSION

    @property
    def started(self) -> bool:
        """The baseline was measured (every later decision compares against it)."""
        return self.current_score is not None

    @property
    def run_mode(self) -> RunMode | None:
        """The mode the run started in (``None``: none recorded)."""
        return RunMode.from_dict(self.mode)

    def spent(self) -> tuple[Usage, Usage]:
        """The optimizer's and the target's usage at the last commit, over every stage."""
        optimizer, target = Usage(), Usage()
        for u in self.usage.values():
            optimizer = optimizer + Usage.from_dict(u)
        for u in self.target_usage.values():
            target = target + Usage.from_dict(u)
        return optimizer, target

    def to_json(self, frame: PackageFrame) -> dict[str, Any]:
        """``runtime_state.json`` (without the history): the skill versions as their packed
        text in ``frame`` (the run's), the other fields hold plain JSON values already: no deep
        copy (it dominated the controller's per-step overhead)."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "history"}
        for key in _SKILLS:
            skill = data[key]
            data[key] = "" if skill is None else frame.text(skill)
        data["version"] = STATE_VERSION
        return data

    @classmethod
    def from_json(
        cls, data: Any, history: list[StepRecord], frame: PackageFrame | None = None
    ) -> TrainerState:
        """The state from ``runtime_state.json`` of any version, its skill texts read back in
        ``frame`` (the run's; a reader leaves it out and gets a package's versions without the
        files the frame holds). Unknown keys are ignored; a version 1 state has no
        ``step_stages`` nor ``epoch_records``: a resume then reruns the whole next step, reusing
        what its stage caches hold.

        Raises:
            RecordError: not a run state (or one written by a newer skillopt).
        """
        data = upgrade(data, key="version", current=STATE_VERSION)
        last = data.get("last_completed_step", 0)
        if not isinstance(last, int) or isinstance(last, bool):
            raise RecordError(f"has last_completed_step {last!r}, not a step number")
        frame = frame or PackageFrame()
        known = {f.name for f in fields(cls)} - {"history", "version"}
        values = {k: v for k, v in data.items() if k in known}
        for key, score in _SKILLS.items():
            text = values.get(key)
            # "" is an empty skill once it has a score, before that no skill at all.
            measured = text or values.get(score) is not None
            values[key] = frame.stored(text) if isinstance(text, str) and measured else None
        state = cls(**values)
        state.history = [r for r in history if r.step <= state.last_completed_step]
        return state


#: The state's skill versions (stored as their packed text), each with its score's key.
_SKILLS = {"current_skill": "current_score", "best_skill": "best_score"}
