"""Optimizer-side stages of a training step, as pure functions over a model and frozen data.

Reflect (:func:`reflect`) → aggregate (:func:`merge_patches`) → select (:func:`rank_and_select`
or :func:`autonomous_budget`) → update (``skillopt.skill.apply_edits``, :func:`rewrite_skill`,
:func:`full_rewrite_candidate`); plus the in-epoch :class:`StepBuffer`, the epoch-level slow
update and meta skill (:mod:`~skillopt.reflection.longitudinal`), the diagnostic probe
(:mod:`~skillopt.reflection.probe`) and skill-aware appendix helpers.

No gRPC, no Docker, no global state, no files: what a stage keeps for a resumed run goes through
the :class:`~skillopt.reflection.cache.StageCache` it is given. The trainer orchestrates these
stages and owns the run directory.
"""

from skillopt.reflection.aggregate import MergeResult, merge_patches
from skillopt.reflection.analyst import (
    AnalystReplyError,
    ChunkFailure,
    RawPatch,
    ReflectParams,
    ReflectResult,
    analyst_user_message,
    make_minibatches,
    parse_analyst_reply,
    reflect,
)
from skillopt.reflection.cache import NoCache, Slot, StageCache, cache_key, memoized
from skillopt.reflection.longitudinal import (
    MetaSkillProposal,
    Pair,
    PairSide,
    SlowUpdateProposal,
    comparison_pairs,
    comparison_text,
    filter_pairs,
    meta_skill_block,
    missing_changed_pairs,
    normalize_pair_policy,
    propose_meta_skill,
    propose_slow_update,
)
from skillopt.reflection.modes import UPDATE_MODES, normalize_update_mode, payload_key
from skillopt.reflection.probe import diagnostic_instruction, pick_probe_items, reflect_on_probe
from skillopt.reflection.prompts import analyst_system_prompt, load_prompt
from skillopt.reflection.select import LRDecision, Selection, autonomous_budget, format_pool, rank_and_select
from skillopt.reflection.skill_aware import ConsolidationResult, consolidate_appendix, parse_notes
from skillopt.reflection.step_buffer import (
    FailurePattern,
    StepBuffer,
    StepEntry,
    failure_patterns,
    rejected_summaries,
)
from skillopt.reflection.trajectory import format_trajectory, is_failure, reflectable, split_rows
from skillopt.reflection.update import (
    ProtectionCheck,
    RewriteResult,
    full_rewrite_candidate,
    protect,
    rewrite_skill,
)

__all__ = [
    "UPDATE_MODES",
    "AnalystReplyError",
    "ChunkFailure",
    "ConsolidationResult",
    "FailurePattern",
    "LRDecision",
    "MergeResult",
    "MetaSkillProposal",
    "NoCache",
    "Pair",
    "PairSide",
    "ProtectionCheck",
    "RawPatch",
    "ReflectParams",
    "ReflectResult",
    "RewriteResult",
    "Selection",
    "Slot",
    "SlowUpdateProposal",
    "StageCache",
    "StepBuffer",
    "StepEntry",
    "analyst_system_prompt",
    "analyst_user_message",
    "autonomous_budget",
    "cache_key",
    "comparison_pairs",
    "comparison_text",
    "consolidate_appendix",
    "diagnostic_instruction",
    "failure_patterns",
    "filter_pairs",
    "format_pool",
    "format_trajectory",
    "full_rewrite_candidate",
    "is_failure",
    "load_prompt",
    "make_minibatches",
    "memoized",
    "merge_patches",
    "meta_skill_block",
    "missing_changed_pairs",
    "normalize_pair_policy",
    "normalize_update_mode",
    "parse_analyst_reply",
    "parse_notes",
    "payload_key",
    "pick_probe_items",
    "propose_meta_skill",
    "propose_slow_update",
    "protect",
    "rank_and_select",
    "reflect",
    "reflect_on_probe",
    "reflectable",
    "rejected_summaries",
    "rewrite_skill",
    "split_rows",
]
