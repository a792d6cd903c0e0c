"""The validation gate: score a candidate skill and decide accept / reject (§8).

Pure functions over numbers; the trainer owns rollouts, caching to disk and state changes.

* :func:`gate_score` projects a ``(hard, soft)`` pair onto the gate metric (``hard``, ``soft``
  or ``mixed``), optionally plus a semantic-density bonus.
* :func:`decide` compares the candidate with the current and best scores. In ``strict`` mode
  (``evaluation.gate_mode``, the reference's rule) strictly greater than current accepts
  (ties reject); in ``paired`` and ``repeat`` modes a one-sided paired test over the
  selection items (:func:`skillopt.stats.paired_test`) must be significant at
  ``evaluation.gate_alpha`` and the effect at least ``evaluation.gate_min_effect``. Either
  way, greater than best makes it the new best.
* Opt-in **no-regression** check (an improvement on the reference, §14 item 7: its gate
  compares only aggregate means): pass the ids that flipped pass→fail
  (:func:`regressions`) and ``max_regressions`` to :func:`decide`; an acceptance that broke
  more items than allowed becomes ``reject`` with reason ``regressed_items``.
* :class:`GateCache` remembers selection scores by :func:`gate_key` (the skill's hash and how
  many times each item was rolled out) so an unchanged candidate is never re-rolled out.

Usage::

    cand = gate_score(0.62, 0.70, metric="hard")
    d = decide(cand, current_score=0.60, best_score=0.60, global_step=3, best_step=1)
    assert d.action == "accept_new_best" and d.best_step == 3
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from skillopt.errors import ConfigError, SkillOptError
from skillopt.skill.document import strip_protected_regions
from skillopt.stats import PairedTest, SequentialTest, detectable_effect, sign_test_min_p

__all__ = [
    "DEFAULT_LEADING_WORDS",
    "GATE_METRICS",
    "GATE_MODES",
    "GateAction",
    "GateCache",
    "GateCacheEntry",
    "GateDecision",
    "decide",
    "discordant_round",
    "gate_key",
    "gate_power_notice",
    "gate_score",
    "regressions",
    "round_draws",
    "round_key",
    "semantic_density",
]

GateAction = Literal["accept_new_best", "accept", "reject"]
GATE_METRICS: tuple[str, ...] = ("hard", "soft", "mixed")
#: ``strict``: the mean strictly above; ``paired``: a significant paired test; ``repeat``:
#: every item rolled out ``gate_repeats`` times, then ``paired``; ``sequential``: rounds over
#: the selection items until a group-sequential test stops (:func:`skillopt.stats.sequential_test`).
GATE_MODES: tuple[str, ...] = ("strict", "paired", "repeat", "sequential")


def gate_key(skill_hash: str, repeats: int = 1) -> str:
    """The gate cache's key of a skill measured with ``repeats`` rollouts per item (a
    measurement with another protocol is another measurement)."""
    return skill_hash if repeats <= 1 else f"{skill_hash}/repeats={repeats}"


def round_key(skill_hash: str, round_no: int) -> str:
    """The gate cache's key of round ``round_no`` of the ``sequential`` gate (one rollout per
    item): round 1 is the one-rollout measurement every mode shares (:func:`gate_key`), round
    ``k`` another independent one (``<hash>/round=k``)."""
    return gate_key(skill_hash) if round_no <= 1 else f"{skill_hash}/round={round_no}"


def round_draws(
    cache: GateCache, skill_hash: str
) -> tuple[dict[str, list[float]], dict[str, list[float]], int]:
    """A skill's later-round draws of the ``sequential`` gate, per item in the order they were
    taken (hard scores, soft scores), and the next free round number: every ``round_key``
    entry of the skill, by its number (round 2 first). Any decision may use them, each once:
    they are independent rollouts of the skill on the item, whichever decision took them."""
    prefix = f"{skill_hash}/round="
    batches = sorted(
        int(k[len(prefix) :]) for k in cache if k.startswith(prefix) and k[len(prefix) :].isdigit()
    )
    hard: dict[str, list[float]] = {}
    soft: dict[str, list[float]] = {}
    for b in batches:
        entry = cache.get(round_key(skill_hash, b))
        assert entry is not None
        for item, h in entry.items.items():
            hard.setdefault(item, []).append(float(h))
            soft.setdefault(item, []).append(float(entry.soft_items.get(item, h)))
    return hard, soft, (batches[-1] + 1 if batches else 2)


def discordant_round(order: Sequence[str], history: Mapping[str, tuple[int, int]], size: int) -> list[str]:
    """The items of the ``sequential`` gate's next round (``evaluation.gate_round_items:
    discordant``): the ``size`` items of ``order`` where the candidate and the current skill
    most often disagreed so far in this decision (``history``: item → pairs measured,
    pairs discordant), by the smoothed rate ``(discordant + 1/2) / (measured + 1)`` (an item
    not measured yet counts as one in two), then fewer pairs first, then ``order``.

    Only discordant pairs move the sign test; choosing where the skills disagreed (never who
    won) spends the next round where the evidence is, and keeps the test exact: under the
    null each discordant pair is a fair coin whichever items were chosen, because the choice
    depends on no sign."""
    rank = {item: k for k, item in enumerate(order)}

    def key(item: str) -> tuple[float, int, int]:
        measured, discordant = history.get(item, (0, 0))
        return (-(discordant + 0.5) / (measured + 1), measured, rank[item])

    return sorted(order, key=key)[:size]


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
# Matches ``RolloutResult.ok``: a fractional hard score counts as a pass only when it is 1.
_PASS = 1.0 - 1e-9


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


def regressions(prev_items: Mapping[str, float | None], cand_items: Mapping[str, float | None]) -> list[str]:
    """Ids that passed under the previous skill and fail under the candidate (1 → 0).

    An item passes when its hard score is 1 (within 1e-9). Items missing on either side, or
    ``None`` (masked, e.g. an infrastructure failure), are not counted: we do not know.

    Args:
        prev_items: Per-item hard scores of the current skill on the selection split.
        cand_items: Per-item hard scores of the candidate.

    Returns:
        The regressed ids, in ``prev_items`` order.
    """
    out: list[str] = []
    for item_id, prev in prev_items.items():
        cand = cand_items.get(item_id)
        if prev is None or cand is None:
            continue
        if float(prev) >= _PASS and float(cand) < _PASS:
            out.append(item_id)
    return out


@dataclass(frozen=True, slots=True)
class GateDecision:
    """Outcome of :func:`decide`: the action and the gate state after it.

    Attributes:
        action: ``accept_new_best`` | ``accept`` | ``reject``.
        current_score: Current score after the decision.
        best_score: Best score after the decision.
        best_step: Step of the best skill after the decision.
        reason: ``new_best`` | ``above_current`` | ``not_above_current`` | ``regressed_items``
            (strict), or ``significant`` | ``not_significant`` | ``below_min_effect`` |
            ``regressed_items`` (with a test; a new best is ``significant``; the ``sequential``
            gate rejects with ``no_improvement`` or ``round_budget``).
        regressed: The regressed ids that were considered (empty when the check is off).
    """

    action: GateAction
    current_score: float
    best_score: float
    best_step: int
    reason: str
    regressed: tuple[str, ...] = ()

    @property
    def accepted(self) -> bool:
        return self.action != "reject"


def decide(
    candidate_score: float,
    current_score: float,
    best_score: float,
    *,
    global_step: int,
    best_step: int,
    regressed: Sequence[str] = (),
    max_regressions: int | None = None,
    test: PairedTest | SequentialTest | None = None,
    alpha: float = 0.05,
    min_effect: float = 0.0,
) -> GateDecision:
    """Gate decision for one candidate (all scores in metric space).

    * Without ``test`` (``strict``): ``candidate > current`` accepts; ties and NaN reject.
    * With ``test`` (``paired``, ``repeat``): the candidate is better when
      ``test.p_value <= alpha`` and ``test.effect >= min_effect`` (and the effect positive).
      A :class:`~skillopt.stats.SequentialTest` (``sequential``, stopped at a boundary) is
      better when it crossed the acceptance boundary (or, when the second round reproduced the
      first exactly: boundary ``reproduced``, when its effect is above ``min_effect``: reason
      ``above_current``); otherwise the reject's reason is ``no_improvement`` (futility) or
      ``round_budget`` (the last round allowed crossed none).
    * A better candidate that is also ``> best`` → ``accept_new_best`` (current := best :=
      candidate, ``best_step := global_step``), else ``accept`` (current := candidate);
      otherwise ``reject``, state unchanged.
    * With ``max_regressions`` set, an acceptance whose ``regressed`` list is longer than it
      becomes ``reject`` (reason ``regressed_items``): the check composes with every mode.

    Args:
        candidate_score: The candidate's gate score.
        current_score: The current skill's gate score.
        best_score: The best skill's gate score.
        global_step: The step being decided (recorded on a new best).
        best_step: The step of the best skill so far.
        regressed: Ids that flipped pass→fail against the current skill (see
            :func:`regressions`).
        max_regressions: Allowed number of regressed items; ``None`` turns the check off.
        test: The paired test of candidate against current (``None``: the strict rule).
        alpha: Significance level of ``test``.
        min_effect: Smallest mean improvement (score units) worth accepting with ``test``.

    Returns:
        The decision.

    Raises:
        ConfigError: ``max_regressions`` is negative.
    """
    if max_regressions is not None and max_regressions < 0:
        raise ConfigError(f"max_regressions must be >= 0 or None, got {max_regressions}")
    checked = tuple(regressed) if max_regressions is not None else ()
    if test is None:
        better, why_not = candidate_score > current_score, "not_above_current"
        accept_reason, best_reason = "above_current", "new_best"
    elif isinstance(test, SequentialTest):
        # The test stopped at a boundary (it tested ``effect <= min_effect`` itself); a target
        # that reproduced its first round exactly has no noise to test: the means decide.
        exact = test.boundary == "reproduced"
        better = test.boundary == "accept" or (exact and test.effect > min_effect + 1e-12)
        why_not = "round_budget" if test.boundary == "budget" else "no_improvement"
        accept_reason = best_reason = "above_current" if exact else "significant"
    else:
        significant = test.p_value <= alpha and test.effect > 0
        better = significant and test.effect >= min_effect
        why_not = "below_min_effect" if significant else "not_significant"
        accept_reason = best_reason = "significant"
    if not better:
        return GateDecision("reject", current_score, best_score, best_step, why_not, checked)
    if max_regressions is not None and len(checked) > max_regressions:
        return GateDecision("reject", current_score, best_score, best_step, "regressed_items", checked)
    if candidate_score > best_score:
        return GateDecision(
            "accept_new_best", candidate_score, candidate_score, global_step, best_reason, checked
        )
    return GateDecision("accept", candidate_score, best_score, best_step, accept_reason, checked)


def gate_power_notice(
    *, mode: str, metric: str, n_items: int, alpha: float, semantic_density: bool = False
) -> tuple[str, bool] | None:
    """What the ``paired`` gate's exact sign test can detect over ``n_items`` selection items,
    said before a run spends anything: the smallest p-value it can reach (every item won) and
    the improvement it detects with 80% power (the current skill at 50%, each item an
    independent draw: the worst case; ties cost nothing, so a real target often needs fewer).

    Returns:
        ``(text, can_accept)``; ``can_accept`` is False when even a candidate that wins every
        item stays above ``alpha`` (the gate then rejects every step). ``None`` for the modes
        and metrics that do not use the sign test (``strict``; ``repeat`` and the soft, mixed
        or density-weighted scores use a paired bootstrap, which has no such floor).
    """
    if mode != "paired" or metric != "hard" or semantic_density:
        return None
    min_p = sign_test_min_p(n_items)
    effect = detectable_effect(n_items, alpha=alpha)
    head = (
        f"gate: paired sign test over {n_items} selection items at alpha {alpha:g}: "
        f"the smallest p-value it can reach is {min_p:.2g} (every item won)"
    )
    if min_p > alpha:
        return (
            f"{head}, above alpha, so it can never accept a candidate and every step will be "
            "rejected; use evaluation.gate_mode=repeat (each item rolled out evaluation.gate_repeats "
            "times) or a larger selection split (env.split_ratio; evaluation.sel_env_num if it caps the split)",
            False,
        )
    power = (
        f"it detects an improvement of {effect * 100:.0f} points with 80% power (current skill at 50%)"
        if effect is not None
        else "no improvement reaches 80% power on this many items"
    )
    hint = (
        ""
        if effect is not None and effect <= 0.2
        else "; evaluation.gate_mode=repeat or a larger selection split detect smaller ones"
    )
    return f"{head}; {power}{hint}", True


# ── cache ─────────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class GateCacheEntry:
    """Selection scores of one skill; ``items`` and ``soft_items`` map item id → its hard and
    soft score (the mean over ``repeats`` rollouts) when recorded, and ``n_infra`` counts the
    rows lost to infrastructure (left out of the means; a cache hit must carry it, or it
    would bypass the gate's infrastructure guard)."""

    hard: float
    soft: float
    items: Mapping[str, float] = field(default_factory=dict)
    n_infra: int = 0
    soft_items: Mapping[str, float] = field(default_factory=dict)
    repeats: int = 1


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(float(value)):
        raise SkillOptError(f"gate cache: {what} must be a number, got {value!r}")
    return float(value)


class GateCache:
    """Selection scores by skill hash (:func:`skillopt.types.skill_hash`).

    Usage::

        cache = GateCache()
        cache.put(doc.hash, 0.6, 0.7)
        cache.get(doc.hash)            # GateCacheEntry(hard=0.6, soft=0.7, items={})
        GateCache.from_json(cache.to_json()) == cache
    """

    __slots__ = ("_entries",)

    def __init__(self, entries: Mapping[str, GateCacheEntry] | None = None) -> None:
        self._entries: dict[str, GateCacheEntry] = dict(entries or {})

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GateCache) and self._entries == other._entries

    __hash__ = None  # type: ignore[assignment]  # mutable

    def get(self, key: str) -> GateCacheEntry | None:
        """The entry for a skill hash, or ``None``."""
        return self._entries.get(key)

    def put(
        self,
        key: str,
        hard: float,
        soft: float,
        items: Mapping[str, float] | None = None,
        *,
        n_infra: int = 0,
        soft_items: Mapping[str, float] | None = None,
        repeats: int = 1,
    ) -> None:
        """Record (or overwrite) the scores under a :func:`gate_key`."""
        self._entries[key] = GateCacheEntry(
            float(hard), float(soft), dict(items or {}), int(n_infra), dict(soft_items or {}), int(repeats)
        )

    def put_entry(self, key: str, entry: GateCacheEntry) -> None:
        """Record a measurement taken under another key (the same skill behind a new hash)."""
        self._entries[key] = entry

    def to_json(self) -> str:
        """Serialise as ``{"version": 1, "entries": {key: {"hard", "soft", "items"?,
        "soft_items"?, "n_infra"?, "repeats"?}}}``."""
        entries: dict[str, Any] = {}
        for key, e in sorted(self._entries.items()):
            row: dict[str, Any] = {"hard": e.hard, "soft": e.soft}
            if e.items:
                row["items"] = dict(e.items)
            if e.soft_items:
                row["soft_items"] = dict(e.soft_items)
            if e.n_infra:
                row["n_infra"] = e.n_infra
            if e.repeats != 1:
                row["repeats"] = e.repeats
            entries[key] = row
        return json.dumps({"version": 1, "entries": entries}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> GateCache:
        """Parse :meth:`to_json` output; a flat ``{hash: [hard, soft]}`` map is accepted too.

        Raises:
            SkillOptError: Not JSON, or an entry without numeric hard/soft.
        """
        try:
            data = json.loads(text)
        except (TypeError, ValueError) as exc:
            raise SkillOptError(f"gate cache is not valid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise SkillOptError("gate cache must be a JSON object")
        raw = data.get("entries", {}) if "version" in data else data
        if not isinstance(raw, dict):
            raise SkillOptError("gate cache 'entries' must be an object")
        cache = cls()
        for key, row in raw.items():
            if isinstance(row, list | tuple) and len(row) == 2:
                cache.put(str(key), _number(row[0], "hard"), _number(row[1], "soft"))
            elif isinstance(row, dict):
                items, soft_items = row.get("items") or {}, row.get("soft_items") or {}
                if not isinstance(items, dict) or not isinstance(soft_items, dict):
                    raise SkillOptError(f"gate cache: items and soft_items of {key} must be objects")
                cache.put(
                    str(key),
                    _number(row.get("hard"), "hard"),
                    _number(row.get("soft"), "soft"),
                    {str(k): _number(v, f"item {k}") for k, v in items.items()},
                    n_infra=int(_number(row.get("n_infra", 0), "n_infra")),
                    soft_items={str(k): _number(v, f"item {k}") for k, v in soft_items.items()},
                    repeats=int(_number(row.get("repeats", 1), "repeats")),
                )
            else:
                raise SkillOptError(f"gate cache: entry {key} must be [hard, soft] or an object")
        return cache
