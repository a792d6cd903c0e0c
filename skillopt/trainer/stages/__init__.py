"""The stages of a run, each ``run(ctx, state) -> state`` over frozen inputs.

====================  ==============================================================
stage                 does
====================  ==============================================================
BaselineStage         the initial skill's selection score
RolloutReflectStage   rollouts of each accumulation batch, analysts (+ probe)
ProposeStage          aggregate, select (edit budget), update → candidate skill
EvaluateGateStage     the candidate's selection score, the gate's decision
commit_step           the decision applied, the step's record committed
SlowUpdateStage       epoch end: the slow-update block (gated or forced)
MetaSkillStage        epoch end: the optimizer's meta skill
FinishStage           final check, test evaluations, ``summary.json``
====================  ==============================================================
"""

from skillopt.trainer.stages.commit import commit_step
from skillopt.trainer.stages.epoch_end import EpochEndState, MetaSkillStage, SlowUpdateStage
from skillopt.trainer.stages.finish import FinishStage
from skillopt.trainer.stages.gate import EvaluateGateStage, decide_gate
from skillopt.trainer.stages.propose import ProposeStage
from skillopt.trainer.stages.rollout import RolloutReflectStage
from skillopt.trainer.stages.selection import (
    BaselineStage,
    SelectionEval,
    epoch_record,
    evaluate_selection,
    measurement,
    promote,
    remember,
)
from skillopt.trainer.stages.state import GateOutcome, Proposal, Reflection, StepInputs, StepState

__all__ = [
    "BaselineStage",
    "EpochEndState",
    "EvaluateGateStage",
    "FinishStage",
    "GateOutcome",
    "MetaSkillStage",
    "Proposal",
    "ProposeStage",
    "Reflection",
    "RolloutReflectStage",
    "SelectionEval",
    "SlowUpdateStage",
    "StepInputs",
    "StepState",
    "commit_step",
    "decide_gate",
    "epoch_record",
    "evaluate_selection",
    "measurement",
    "promote",
    "remember",
]
