"""The gate's score: the ``(hard, soft)`` pair of a measurement projected onto the metric the
gate compares (``evaluation.gate_metric``), optionally plus a semantic-density bonus.

* :func:`gate_score`: ``hard``, ``soft`` or ``mixed`` (``(1 - w) * hard + w * soft``), plus
  ``weight * semantic_density(skill)`` when the bonus is on;
* :func:`semantic_density`: the share of a skill's words that are leading words (``must``,
  ``always``...), the reference's bonus for directive skills.

Usage::

    gate_score(0.62, 0.70, metric="mixed")    # 0.66
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from skillopt.errors import ConfigError
from skillopt.skill.document import strip_protected_regions

__all__ = ["DEFAULT_LEADING_WORDS", "GATE_METRICS", "gate_score", "semantic_density"]

GATE_METRICS: tuple[str, ...] = ("hard", "soft", "mixed")

# The reference's default list (evaluation.leading_words): emphatic words that lead a rule.
DEFAULT_LEADING_WORDS: frozenset[str] = frozenset(
    {
        "must",
        "always",
        "never",
        "only",
        "critical",
        "important",
        "resolve",
        "prefer",
        "ensure",
        "strict",
        "verify",
    }
)

_TOKEN_RE = re.compile(r"[a-z0-9]+")


def semantic_density(skill_content: str, leading_words: Iterable[str] = DEFAULT_LEADING_WORDS) -> float:
    """Fraction of the skill's words that are leading words.

    Words are ``[a-z0-9]+`` runs of the lower-cased skill with both protected regions removed
    (the trainer owns those; they must not earn the body a bonus).

    Args:
        skill_content: The skill text.
        leading_words: The words that count (compared lower-case).

    Returns:
        A value in ``[0, 1]``; ``0.0`` for a skill without words.
    """
    tokens = _TOKEN_RE.findall(strip_protected_regions(skill_content).lower())
    if not tokens:
        return 0.0
    words = frozenset(w.lower() for w in leading_words)
    return sum(t in words for t in tokens) / len(tokens)


def gate_score(
    hard: float,
    soft: float,
    *,
    metric: str = "hard",
    mixed_weight: float = 0.5,
    skill_content: str | None = None,
    semantic_density_weight: float = 0.0,
    leading_words: Iterable[str] = DEFAULT_LEADING_WORDS,
) -> float:
    """Project selection scores onto the gate metric.

    ``hard`` → hard; ``soft`` → soft; ``mixed`` → ``(1 - w) * hard + w * soft`` with ``w``
    clamped to ``[0, 1]``. When ``semantic_density_weight`` is non-zero and ``skill_content``
    is given, ``weight * semantic_density(skill_content)`` is added.

    Args:
        hard: Mean hard score on the selection split.
        soft: Mean soft score on the selection split.
        metric: ``hard`` | ``soft`` | ``mixed``.
        mixed_weight: Weight of ``soft`` for ``mixed``.
        skill_content: The skill the scores belong to (needed for the density bonus).
        semantic_density_weight: Weight of the density bonus (``0`` = off).
        leading_words: Word set for :func:`semantic_density`.

    Returns:
        The score the gate compares.

    Raises:
        ConfigError: Unknown metric.
    """
    name = str(metric).strip().lower()
    if name == "hard":
        score = float(hard)
    elif name == "soft":
        score = float(soft)
    elif name == "mixed":
        w = min(1.0, max(0.0, float(mixed_weight)))
        score = (1.0 - w) * float(hard) + w * float(soft)
    else:
        raise ConfigError(f"unknown gate metric {metric!r}; expected one of: {', '.join(GATE_METRICS)}")
    if semantic_density_weight and skill_content is not None:
        score += float(semantic_density_weight) * semantic_density(skill_content, leading_words)
    return score
