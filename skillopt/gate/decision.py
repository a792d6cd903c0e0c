"""The gate's decision on a candidate: accept it (a new best or not) or reject it.

* :func:`decide` compares the candidate with the current and best scores. In ``strict`` mode
  (``evaluation.gate_mode``, the reference's rule) strictly greater than current accepts
  (ties reject); in ``paired`` and ``repeat`` modes a one-sided paired test over the
  selection items (:func:`skillopt.gate.paired.paired_test`) must be significant at
  ``evaluation.gate_alpha`` and the effect at least ``evaluation.gate_min_effect``; in
  ``sequential`` mode the group-sequential test must have crossed its acceptance boundary
  (:func:`skillopt.gate.sequential.sequential_test`). Either way, greater than best makes it
  the new best.
* Opt-in **no-regression** check (an improvement on the reference, §14 item 7: its gate
  compares only aggregate means): pass the ids that flipped pass→fail
  (:func:`regressions`) and ``max_regressions`` to :func:`decide`; an acceptance that broke
  more items than allowed becomes ``reject`` with reason ``regressed_items``.

Pure functions over numbers; the trainer owns rollouts, caching to disk and state changes.

Usage::

    d = decide(0.62, current_score=0.60, best_score=0.60, global_step=3, best_step=1)
    assert d.action == "accept_new_best" and d.best_step == 3
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from skillopt.errors import ConfigError
from skillopt.gate.modes import GateAction
from skillopt.gate.paired import PairedTest
from skillopt.gate.sequential import SequentialTest

__all__ = ["GateDecision", "decide", "decide_final", "regressions"]

# Matches ``RolloutResult.ok``: a fractional hard score counts as a pass only when it is 1.
_PASS = 1.0 - 1e-9


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
        action: ``accept_new_best`` | ``accept`` | ``reject`` (:class:`GateAction`).
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
        return self.action.accepted


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
      A :class:`~skillopt.gate.sequential.SequentialTest` (``sequential``, stopped at a boundary) is
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
    reject = GateAction.REJECT
    if not better:
        return GateDecision(reject, current_score, best_score, best_step, why_not, checked)
    if max_regressions is not None and len(checked) > max_regressions:
        return GateDecision(reject, current_score, best_score, best_step, "regressed_items", checked)
    if candidate_score > best_score:
        return GateDecision(
            GateAction.ACCEPT_NEW_BEST, candidate_score, candidate_score, global_step, best_reason, checked
        )
    return GateDecision(GateAction.ACCEPT, candidate_score, best_score, best_step, accept_reason, checked)


def decide_final(
    final_score: float,
    best_score: float,
    *,
    global_step: int,
    best_step: int,
    test: PairedTest | SequentialTest | None = None,
    regressed: Sequence[str] = (),
    max_regressions: int | None = None,
    alpha: float = 0.05,
    min_effect: float = 0.0,
) -> GateDecision:
    """Whether the run's final skill replaces the best one (the final check), by the run's
    gate with the best skill in the current skill's place.

    * Without ``test`` (``strict``, and the gate off): its score strictly above the best score
      replaces it (reason ``new_best``); otherwise ``reject``, reason ``not_above_best``
      (earlier skills win ties).
    * With ``test``: :func:`decide` of final against best. Only ``accept_new_best`` replaces the
      best skill: a final skill the test accepts but whose score is not above the best score is
      rejected, reason ``not_above_best``.

    Returns:
        ``accept_new_best`` or ``reject``.
    """
    if test is None:
        if final_score > best_score:
            return GateDecision(GateAction.ACCEPT_NEW_BEST, final_score, final_score, global_step, "new_best")
        return GateDecision(GateAction.REJECT, best_score, best_score, best_step, "not_above_best")
    d = decide(
        final_score,
        best_score,
        best_score,
        global_step=global_step,
        best_step=best_step,
        regressed=regressed,
        max_regressions=max_regressions,
        test=test,
        alpha=alpha,
        min_effect=min_effect,
    )
    if d.action is GateAction.ACCEPT:
        return GateDecision(
            GateAction.REJECT, best_score, best_score, best_step, "not_above_best", d.regressed
        )
    return d
