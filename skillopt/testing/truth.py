"""The noisy simulation's ground truth in a run directory (``simulation_truth.json``).

A callback: it sees the skills the gate compares and records each one's exact expected score
(:func:`skillopt.testing.noise.true_score`) on the selection and test items, and every gate
decision by skill hash. Only runs of the noisy simulation have it; ``bench/bench_gate.py``
reads it to tell false accepts from true ones.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillopt.config import Config
from skillopt.durable import atomic_write_json
from skillopt.envs.base import EnvData, TaskItem
from skillopt.testing.noise import harmful_in, true_score
from skillopt.trainer.callbacks import Callback, FitEndEvent, FitStartEvent, GateEvent
from skillopt.trainer.rundir import layout
from skillopt.types import skill_hash

__all__ = ["GateTruth", "SimulationTruth", "gate_truths", "read_truth", "simulation_truth"]


@dataclass(frozen=True)
class GateTruth:
    """One gate decision of a noisy-simulation run, against the truth."""

    origin: str
    action: str
    true_candidate: float
    true_current: float

    @property
    def accepted(self) -> bool:
        return self.action != "reject"

    @property
    def true_effect(self) -> float:
        return self.true_candidate - self.true_current


def gate_truths(run_dir: Path) -> list[GateTruth]:
    """Every gate decision of the run with both skills' true selection scores (empty for a
    run without ground truth)."""
    data = read_truth(run_dir) or {}
    skills = data.get("skills") or {}
    out = []
    for origin, g in sorted((data.get("gates") or {}).items(), key=lambda kv: (kv[1]["step"], kv[0])):
        out.append(
            GateTruth(
                origin=origin,
                action=g["action"],
                true_candidate=skills[g["candidate"]]["selection"],
                true_current=skills[g["current"]]["selection"],
            )
        )
    return out


def read_truth(run_dir: Path) -> dict[str, Any] | None:
    """A run's ``simulation_truth.json`` (``None`` when it has none or it does not parse)."""
    try:
        data = json.loads((run_dir / layout.SIMULATION_TRUTH).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class SimulationTruth(Callback):
    """Records the true expected score of every skill version a noisy-simulation run measures
    (``simulation_truth.json``), and each gate decision by skill hash. Idempotent: a resumed
    run rewrites the same entries."""

    def __init__(
        self,
        selection: Sequence[TaskItem],
        test: Sequence[TaskItem],
        probability: Callable[[str, str], float],
    ) -> None:
        self.selection = tuple(selection)
        self.test = tuple(test)
        self.probability = probability
        self.path: Path | None = None
        self.data: dict[str, Any] = {}

    def _skill(self, skill: str) -> str:
        key = skill_hash(skill)
        if key not in self.data["skills"]:
            self.data["skills"][key] = {
                "selection": true_score(skill, self.selection, self.probability),
                "test": true_score(skill, self.test, self.probability),
                "harmful_statements": harmful_in(skill),
            }
        return key

    def _save(self) -> None:
        assert self.path is not None
        atomic_write_json(self.path, self.data, durable=False)

    def on_fit_start(self, event: FitStartEvent) -> None:
        self.path = event.out_dir / layout.SIMULATION_TRUTH
        self.data = read_truth(event.out_dir) or {}
        self.data.setdefault(
            "ground_truth",
            "SIMULATION ONLY: the noisy simulation's exact expected hard score (mean pass "
            "probability) of each skill on the selection and test items; no real run has this",
        )
        self.data.setdefault("items", {"selection": len(self.selection), "test": len(self.test)})
        self.data.setdefault("skills", {})
        self.data.setdefault("gates", {})

    def on_gate_decision(self, event: GateEvent) -> None:
        if self.path is None or event.candidate_skill is None or event.current_skill is None:
            return
        # The target is told SKILL.md (the simulation's skills are one-file skills).
        self.data["gates"][event.origin] = {
            "step": event.step,
            "action": event.action,
            "candidate": self._skill(event.candidate_skill.content),
            "current": self._skill(event.current_skill.content),
        }
        self._save()

    def on_fit_end(self, event: FitEndEvent) -> None:
        if self.path is None:
            return
        for name, rel in (("initial", layout.skill_file(0)), ("best", layout.BEST_SKILL)):
            path = event.out_dir / rel
            if path.exists():
                self.data[name] = self._skill(path.read_text(encoding="utf-8"))
        self._save()


def simulation_truth(config: Config, data: EnvData) -> SimulationTruth:
    """The truth recorder of a run of ``config`` over ``data`` (its selection and test items
    as the trainer plans them), scored by the noisy target's probabilities."""
    from skillopt.testing.simulation import pass_probability
    from skillopt.trainer.planning import RunPlan

    plan = RunPlan.of(config, data)
    return SimulationTruth(plan.selection, plan.test, pass_probability)
