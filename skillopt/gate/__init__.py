"""The validation gate: score a candidate skill on the selection split and decide whether it
becomes the current skill (§8), with the statistics that make the decision on a noisy target.

Pure functions and values over numbers; the trainer's gate segment
(:mod:`skillopt.trainer.segments.gate`) takes the rollouts, keeps the cache on disk and applies
the decision. The modules, and what each decides:

* :mod:`~skillopt.gate.modes`: how the gate decides (:class:`GateMode`) and what it decided
  (:class:`GateAction`);
* :mod:`~skillopt.gate.decision`: accept (a new best or not) or reject a candidate, with the
  opt-in no-regression check;
* :mod:`~skillopt.gate.score`: the score the gate compares (``evaluation.gate_metric``, the
  semantic-density bonus); :mod:`~skillopt.gate.selection`: a skill's score on the selection
  split from the run's cache;
* :mod:`~skillopt.gate.cache`: the selection cache, keyed by a version's tree hash and protocol;
* :mod:`~skillopt.gate.paired`: the paired test of candidate against current (exact sign test,
  paired bootstrap); :mod:`~skillopt.gate.sequential`: the ``sequential`` gate's
  group-sequential test over rounds; :mod:`~skillopt.gate.rounds`: which items a later round
  measures; :mod:`~skillopt.gate.power`: what a sign test over ``n`` items can detect;
* :mod:`~skillopt.gate.intervals`: the 95% interval of every score, and how it is written.

The distributions are scipy's (:mod:`~skillopt.gate.distributions`: ``scipy.special``, which
``scipy.stats`` evaluates underneath, at a sixth of its import cost), imported inside the
functions that use them, not at a module's top: scipy takes seconds to load, which the commands
that only read the config or print scores should not pay
(``tests/skillopt/gate/test_gate_intervals.py`` checks it).

Usage::

    cand = gate_score(0.62, 0.70, metric="hard")
    d = decide(cand, current_score=0.60, best_score=0.60, global_step=3, best_step=1)
    assert d.action == "accept_new_best" and d.best_step == 3
"""

from skillopt.gate.cache import GateCache, GateCacheEntry, gate_key, rekey_by_tree, round_draws, round_key
from skillopt.gate.decision import GateDecision, decide, decide_final, regressions
from skillopt.gate.intervals import (
    Interval,
    bootstrap_interval,
    ci_json,
    ci_of,
    format_score,
    is_binary,
    mean_interval,
    wilson_interval,
)
from skillopt.gate.modes import GateAction, GateMode
from skillopt.gate.paired import PairedTest, paired_bootstrap, paired_test, sign_test
from skillopt.gate.power import (
    detectable_effect,
    gate_power_notice,
    items_for_power,
    sign_test_min_p,
    sign_test_power,
)
from skillopt.gate.rounds import discordance, discordant_round, paired_differences, reproduced
from skillopt.gate.score import DEFAULT_LEADING_WORDS, GATE_METRICS, gate_score, semantic_density
from skillopt.gate.selection import SelectionScoring
from skillopt.gate.sequential import (
    FUTILITY_RULES,
    SPENDING_FUNCTIONS,
    SequentialTest,
    alpha_spent,
    look_information,
    sequential_bounds,
    sequential_test,
    sign_walk_bounds,
)

__all__ = [
    "DEFAULT_LEADING_WORDS",
    "FUTILITY_RULES",
    "GATE_METRICS",
    "SPENDING_FUNCTIONS",
    "GateAction",
    "GateCache",
    "GateCacheEntry",
    "GateDecision",
    "GateMode",
    "Interval",
    "PairedTest",
    "SelectionScoring",
    "SequentialTest",
    "alpha_spent",
    "bootstrap_interval",
    "ci_json",
    "ci_of",
    "decide",
    "decide_final",
    "detectable_effect",
    "discordance",
    "discordant_round",
    "format_score",
    "gate_key",
    "gate_power_notice",
    "gate_score",
    "is_binary",
    "items_for_power",
    "look_information",
    "mean_interval",
    "paired_bootstrap",
    "paired_differences",
    "paired_test",
    "regressions",
    "rekey_by_tree",
    "reproduced",
    "round_draws",
    "round_key",
    "semantic_density",
    "sequential_bounds",
    "sequential_test",
    "sign_test",
    "sign_test_min_p",
    "sign_test_power",
    "sign_walk_bounds",
    "wilson_interval",
]
