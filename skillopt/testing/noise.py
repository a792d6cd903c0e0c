"""The noisy simulation (``run.simulate: noisy``): a stochastic target whose expected score is
known exactly, so a gate's decisions can be checked against the truth.

Every simulated task gets two pass probabilities, fixed by its id: ``low`` when the skill does
not state the rule the task needs, ``high`` when it does. Each *harmful* statement the skill
contains (:data:`HARMFUL`) takes :attr:`NoiseProfile.harm` off every task's probability. A
rollout passes when a uniform draw, seeded by the rollout's seed (the ``X-Skillopt-Seed``
header every target call of the rollout carries) and the task, falls below the probability: the
same rollout always gets the same outcome (``--resume``, record/replay, every turn of a
multi-turn rollout), two rollouts of the same task are independent draws.

The optimizer of the noisy simulation also proposes *decoy* edits (:data:`DECOYS`: plausible,
no effect on any probability) when it explains a failure the skill already covers (a noise
failure), and now and then a harmful one.

Because every probability is known, :func:`true_score` gives any skill's expected hard score on
any item set exactly; :class:`skillopt.testing.truth.SimulationTruth` records it for every skill version a run
measures (``simulation_truth.json``: simulation-only ground truth, never in a real run).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from skillopt.envs.base import TaskItem

__all__ = [
    "DECOYS",
    "HARMFUL",
    "NOISE",
    "NoiseProfile",
    "draw",
    "harmful_in",
    "true_score",
]

#: Plausible advice that changes no task's pass probability.
DECOYS: tuple[str, ...] = (
    "Restate the task in one sentence before you start working on it.",
    "Note which parts of the task are ambiguous before you commit to an answer.",
    "Prefer descriptive names for every intermediate value you compute.",
    "Check the final answer's format against the wording of the task once more.",
    "Work through the task in small steps and keep each step short.",
    "List the inputs you rely on before you produce the answer.",
)
#: Plausible advice that lowers every task's pass probability.
HARMFUL: tuple[str, ...] = (
    "Answer from memory first and consult the material only when you are unsure.",
    "Keep answers minimal: drop units, qualifiers and any second part of the answer.",
    "When the task allows two readings, take the simpler one without checking it.",
)


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9/._ ]+", " ", text.lower()).split())


def _unit(*parts: object) -> float:
    """A uniform number in [0, 1) fixed by ``parts``."""
    digest = hashlib.blake2b("\0".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def harmful_in(skill: str) -> int:
    """How many harmful statements ``skill`` contains."""
    text = _norm(skill)
    return sum(_norm(h) in text for h in HARMFUL)


@dataclass(frozen=True)
class NoiseProfile:
    """The pass probabilities of the noisy target.

    Attributes:
        low: Range of a task's pass probability when the skill lacks its rule.
        high: Range when the skill states it (tasks without a rule use it too).
        harm: Probability lost per harmful statement in the skill.
        floor: No probability goes below this (or above ``1 - floor``).
    """

    low: tuple[float, float] = (0.05, 0.35)
    high: tuple[float, float] = (0.7, 0.95)
    harm: float = 0.12
    floor: float = 0.02

    def probability(self, task_id: str, rule_stated: bool | None, n_harmful: int) -> float:
        """A task's pass probability: ``rule_stated`` None = the task needs no rule."""
        lo, hi = self.high if rule_stated is not False else self.low
        p = lo + (hi - lo) * _unit("p", task_id, rule_stated is not False)
        p -= self.harm * n_harmful
        return min(1.0 - self.floor, max(self.floor, p))


NOISE = NoiseProfile()


def draw(seed: int, task_id: str) -> float:
    """The rollout's uniform draw for ``task_id`` (passes when below the probability)."""
    return _unit("draw", seed, task_id)


def true_score(
    skill: str, items: Sequence[TaskItem], probability: Callable[[str, str], float]
) -> float | None:
    """The exact expected hard score of ``skill`` on ``items`` (the mean pass probability);
    ``None`` for no items. ``probability(task_id, skill)`` is the target's
    (:func:`skillopt.testing.simulation.pass_probability`)."""
    if not items:
        return None
    return sum(probability(it.id, skill) for it in items) / len(items)
