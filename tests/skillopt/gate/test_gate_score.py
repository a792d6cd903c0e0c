"""The gate's score (skillopt.gate.score): metric projection and semantic density."""

from __future__ import annotations

import pytest

from skillopt.errors import ConfigError
from skillopt.gate import (
    DEFAULT_LEADING_WORDS,
    decide,
    gate_score,
    semantic_density,
)
from skillopt.skill import SLOW_UPDATE_END, SLOW_UPDATE_START

# ── gate_score ────────────────────────────────────────────────────────────────────────────


def test_metric_projection() -> None:
    assert gate_score(0.5, 0.9) == 0.5
    assert gate_score(0.5, 0.9, metric="soft") == 0.9
    assert gate_score(0.5, 0.9, metric="mixed") == pytest.approx(0.7)
    assert gate_score(0.5, 0.9, metric="mixed", mixed_weight=0.25) == pytest.approx(0.6)
    assert gate_score(0.5, 0.9, metric=" Mixed ", mixed_weight=0.0) == 0.5


@pytest.mark.parametrize(("weight", "expected"), [(-3.0, 0.5), (7.0, 0.9), (1.0, 0.9)])
def test_mixed_weight_is_clamped(weight: float, expected: float) -> None:
    assert gate_score(0.5, 0.9, metric="mixed", mixed_weight=weight) == pytest.approx(expected)


def test_unknown_metric_raises_naming_allowed() -> None:
    with pytest.raises(ConfigError, match="hard, soft, mixed"):
        gate_score(0.5, 0.5, metric="f1")


# ── semantic density ──────────────────────────────────────────────────────────────────────


def test_density_is_leading_word_fraction() -> None:
    # tokens: always verify the header never guess -> 3 of 6 are leading words
    assert semantic_density("Always VERIFY the header; never guess!") == pytest.approx(0.5)
    assert semantic_density("") == 0.0
    assert semantic_density("x y", leading_words={"X"}) == pytest.approx(0.5)


def test_density_excludes_protected_regions() -> None:
    body = "alpha beta"
    skill = f"{body}\n\n{SLOW_UPDATE_START}\nalways always always\n{SLOW_UPDATE_END}\n"
    assert semantic_density(skill) == 0.0
    assert "always" in DEFAULT_LEADING_WORDS


def test_density_bonus_added_only_when_weighted_and_skill_given() -> None:
    skill = "always verify"
    assert gate_score(0.5, 0.0, skill_content=skill) == 0.5
    assert gate_score(0.5, 0.0, semantic_density_weight=0.1) == 0.5
    assert gate_score(0.5, 0.0, skill_content=skill, semantic_density_weight=0.1) == pytest.approx(0.6)


def test_density_bonus_can_flip_a_tie_to_accept() -> None:
    plain, directive = "the header row", "always check the header row"
    current = gate_score(0.6, 0.0, skill_content=plain, semantic_density_weight=0.05)
    tie = gate_score(0.6, 0.0)
    assert decide(tie, current, current, global_step=2, best_step=1).action == "reject"
    cand = gate_score(0.6, 0.0, skill_content=directive, semantic_density_weight=0.05)
    assert decide(cand, current, current, global_step=2, best_step=1).action == "accept_new_best"
