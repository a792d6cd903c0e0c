"""The segments of a run, each a :class:`Segment`: ``run(ctx, state) -> state`` over frozen
inputs, then ``commit(ctx, state)``. A segment runs one or more stages (what callbacks see as
``on_stage_start``/``on_stage_end``).

=====================  =================================  ======================================
segment                its stages                         does
=====================  =================================  ======================================
BaselineSegment        baseline                           the initial skill's selection score
RolloutReflectSegment  rollout, reflect (per batch)       rollouts of each accumulation batch,
                                                          analysts (+ probe)
ProposeSegment         aggregate, select, update          the candidate skill
GateSegment            evaluate                           the candidate's selection score, the
                                                          gate's decision; commits the step
SlowUpdateSegment      slow_update                        epoch end: the slow-update block
                                                          (gated or forced)
MetaSkillSegment       meta_skill                         epoch end: the optimizer's meta skill
FinalCheckSegment      (none)                             the final skill against the best one
FinishSegment          test                               test evaluations, ``summary.json``
=====================  =================================  ======================================
"""

from skillopt.trainer.segments.base import Segment
from skillopt.trainer.segments.baseline import BaselineSegment
from skillopt.trainer.segments.epoch_end import EpochEndState, MetaSkillSegment, SlowUpdateSegment
from skillopt.trainer.segments.finish import FinalCheckSegment, FinishSegment
from skillopt.trainer.segments.gate import GateSegment, decide_gate
from skillopt.trainer.segments.propose import ProposeSegment
from skillopt.trainer.segments.rollout_reflect import RolloutReflectSegment
from skillopt.trainer.segments.selection import (
    SelectionEval,
    epoch_record,
    evaluate_selection,
    measurement,
    promote,
    remember,
)
from skillopt.trainer.segments.state import (
    FinalCheck,
    FitState,
    GateOutcome,
    Proposal,
    Reflection,
    StepInputs,
    StepState,
)

__all__ = [
    "BaselineSegment",
    "EpochEndState",
    "FinalCheck",
    "FinalCheckSegment",
    "FinishSegment",
    "FitState",
    "GateOutcome",
    "GateSegment",
    "MetaSkillSegment",
    "Proposal",
    "ProposeSegment",
    "Reflection",
    "RolloutReflectSegment",
    "Segment",
    "SelectionEval",
    "SlowUpdateSegment",
    "StepInputs",
    "StepState",
    "decide_gate",
    "epoch_record",
    "evaluate_selection",
    "measurement",
    "promote",
    "remember",
]
