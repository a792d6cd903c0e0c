"""Every name in a run directory, in one place.

A run directory is read by people, by ``skillopt runs``, by the WebUI and by other teams'
tools, so its layout is a contract: the trainer writes it (:class:`~.store.RunDirectory`), and
every reader (``controller.rundir``, the WebUI, ``skillopt train --resume``) finds files by
these names, never by literals of its own::

    <run>/
      config.json  runtime_state.json  history.json  summary.json  best_skill.md (its SKILL.md)
      best_skill/<name>/             the best skill as an Agent Skills package, ready to install
      optimizer_calls.jsonl  lr_history.jsonl  training_curve.png  train.log  console.log
      live.json  launch.json  run_id  .lock  stop_request.json       (the controller's)
      simulation_truth.json          the noisy simulation's ground truth (simulation only)
      tracking.json  tensorboard/  wandb/   experiment trackers' run ids and files (tracking.*)
      skills/skill_v0000.md ...                  the current skill after each step (its packed text)
      skill_packages/v0000/<name>/ ...           the same versions as whole Agent Skills packages
      selection_eval_baseline/  final_selection_eval/  final_selection_eval_best/   rollout dirs
      test_eval_baseline/  test_eval/  test_eval_final/              rollout dirs + summary.json
      steps/step_0001/
        rollout/  (or batch_<a>/rollout/ with accumulation)          rollout dir
        patches/minibatch_{fail|succ}_NNN.json                       analyst chunks (cached)
        probe/diagnostic_instruction.json  probe/rollout/  probe/probe_patch.json
        merged_patch.json  lr_decision.json  ranked_edits.json       stage outputs (cached)
        edit_apply_report.json | rewrite_result.json | full_rewrite_result.json
        candidate_skill.md  selection_eval/  trajectory_digest.json  step_record.json
        selection_eval_r2/ ...  (evaluation.gate_mode: repeat: one rollout dir per repeat;
                                 sequential: one per round after the first)
        selection_eval_current/  (the current skill, when its measurement was missing)
        selection_eval_current_r2/ ...  (sequential: the current skill's rounds not measured before)
      slow_update/epoch_NN/  rollout_prev/ rollout_curr/ comparison.json comparison_pairs.json
                             proposal.json candidate_skill.md selection_eval/ slow_result.json
      meta_skill/epoch_NN/   proposal.json meta_skill_result.json (comparison.json when the
                             slow update is off)
      evals/<name>/          ``skillopt eval --run`` of this run (from the CLI or the WebUI)

    <eval dir>/ eval_config.json (what ``--resume`` continues) eval_summary.json eval.log
                eval_<split>/ eval_<split>_against/                  rollout dirs

    <rollout dir>/ results.jsonl  infra_attempts.jsonl  predictions/<id>/{trace.json, ...}
"""

from __future__ import annotations

import re

__all__ = [
    "BATCH_STEP_RE",
    "BEST_SKILL",
    "BEST_SKILL_DIR",
    "CONFIG",
    "CONSOLE_LOG",
    "CURVE",
    "EVALS",
    "EVAL_CONFIG",
    "EVAL_SUMMARY",
    "HISTORY",
    "INFRA_ATTEMPTS",
    "LAUNCH",
    "LIVE",
    "LOCK",
    "LR_HISTORY",
    "MARKERS",
    "OPTIMIZER_LEDGER",
    "PREDICTIONS",
    "RESULTS",
    "RUN_ID",
    "SIMULATION_TRUTH",
    "SKILLS",
    "SKILL_FILE_RE",
    "SKILL_PACKAGES",
    "STATE",
    "STEPS",
    "STEP_DIR_RE",
    "STOP",
    "SUMMARY",
    "TRACKING",
    "TRAIN_LOG",
    "Step",
    "batch_dir",
    "epoch_dir",
    "repeat_dir",
    "skill_file",
    "skill_package_dir",
    "step_dir",
    "target_stage",
]

# -- the run's root ---------------------------------------------------------------------------
CONFIG = "config.json"  # the effective config (redacted) and what was derived from it
STATE = "runtime_state.json"  # everything resume needs; the commit point of every segment
HISTORY = "history.json"  # one record per committed step (written before the state)
SUMMARY = "summary.json"  # the run's result (complete or stopped)
EVAL_SUMMARY = "eval_summary.json"  # ``skillopt eval``'s result
EVAL_CONFIG = "eval_config.json"  # what an eval runs: config, skills, split, mode (its resume)
BEST_SKILL = "best_skill.md"
BEST_SKILL_DIR = "best_skill"  # best_skill/<name>/: the best package
OPTIMIZER_LEDGER = "optimizer_calls.jsonl"  # every optimizer call's usage, as it happens
LR_HISTORY = "lr_history.jsonl"  # the autonomous edit budget's decisions
CURVE = "training_curve.png"
TRAIN_LOG = "train.log"
CONSOLE_LOG = "console.log"  # stdout/stderr of a process the WebUI launched
LIVE = "live.json"  # the running session's progress (controller.rundir.live)
LAUNCH = "launch.json"  # written by the WebUI when it starts a process here
RUN_ID = "run_id"
SIMULATION_TRUTH = "simulation_truth.json"  # the noisy simulation's exact scores (never real runs)
TRACKING = "tracking.json"  # each experiment tracker's run id, for --resume (skillopt.tracking)
LOCK = ".lock"  # held by the process that runs the run (controller.rundir.lock)
STOP = "stop_request.json"
SKILLS = "skills"
SKILL_PACKAGES = "skill_packages"
STEPS = "steps"
EVALS = "evals"
#: Files whose presence makes a folder a run (or eval) directory.
MARKERS = (CONFIG, STATE, LOCK, LAUNCH, EVAL_SUMMARY, EVAL_CONFIG)

# -- a rollout directory ------------------------------------------------------------------------
RESULTS = "results.jsonl"  # one line per finished item, appended as rows arrive
INFRA_ATTEMPTS = "infra_attempts.jsonl"  # rows set aside to rerun (kept as a record)
PREDICTIONS = "predictions"  # predictions/<id>/: trace, prompts, code, artifacts

# -- the initial, baseline, final and test evaluations ------------------------------------------
BASELINE_SELECTION = "selection_eval_baseline"
FINAL_SELECTION = "final_selection_eval"
FINAL_SELECTION_BEST = "final_selection_eval_best"  # the best skill, when a paired gate lacked it
TEST_BASELINE = "test_eval_baseline"
TEST_BEST = "test_eval"
TEST_FINAL = "test_eval_final"
TEST_SUMMARY = "summary.json"  # inside each test rollout dir

STEP_DIR_RE = re.compile(r"^step_(\d{4,})$")
SKILL_FILE_RE = re.compile(r"^skill_v(\d{4,})\.md$")
BATCH_STEP_RE = re.compile(r"^batch_(\d+)$")


def skill_file(step: int) -> str:
    """The current skill after ``step`` (``0``: the initial skill)."""
    return f"{SKILLS}/skill_v{step:04d}.md"


def skill_package_dir(step: int) -> str:
    """The folder holding the package after ``step`` (``skill_packages/v0003/<name>/``)."""
    return f"{SKILL_PACKAGES}/v{step:04d}"


def step_dir(step: int) -> str:
    return f"{STEPS}/step_{step:04d}"


def batch_dir(step: int, batch: int, n_batches: int) -> str:
    """Where an accumulation batch of ``step`` keeps its rollouts, patches and probe."""
    return step_dir(step) if n_batches == 1 else f"{step_dir(step)}/batch_{batch}"


def repeat_dir(rollout_rel: str, repeat: int) -> str:
    """The rollout dir of repeat ``repeat`` (1-based) of an evaluation: the first is the
    evaluation's own dir, the others ``<dir>_r<k>``."""
    return rollout_rel if repeat <= 1 else f"{rollout_rel}_r{repeat}"


def target_stage(rollout_rel: str) -> str:
    """``target_train`` for a step's training rollouts (and their probe re-runs), which see
    the grader's feedback; ``target_eval`` for every evaluation (selection, test, epoch end)."""
    parts = rollout_rel.strip("/").split("/")
    return "target_train" if parts[0] == STEPS and parts[-1] == Step.ROLLOUT else "target_eval"


def epoch_dir(segment: str, epoch: int) -> str:
    """``slow_update/epoch_NN`` or ``meta_skill/epoch_NN``: an epoch-end segment's folder."""
    return f"{segment}/epoch_{epoch:02d}"


class Step:
    """Names inside a step directory (and inside its batch directories)."""

    ROLLOUT = "rollout"
    PATCHES = "patches"
    PROBE = "probe"
    PROBE_INSTRUCTION = "probe/diagnostic_instruction.json"
    PROBE_ROLLOUT = "probe/rollout"
    PROBE_PATCH = "probe/probe_patch.json"
    MERGED = "merged_patch.json"
    LR_DECISION = "lr_decision.json"
    RANKED = "ranked_edits.json"
    APPLY_REPORT = "edit_apply_report.json"
    SCRIPT_CHECKS = "script_checks.json"  # scripts the update wrote, checked in a sandbox
    REWRITE = "rewrite_result.json"
    FULL_REWRITE = "full_rewrite_result.json"
    CANDIDATE = "candidate_skill.md"
    SELECTION = "selection_eval"
    SELECTION_CURRENT = "selection_eval_current"
    DIGEST = "trajectory_digest.json"
    RECORD = "step_record.json"


class Epoch:
    """Names inside ``slow_update/epoch_NN`` and ``meta_skill/epoch_NN``."""

    ROLLOUT_PREV = "rollout_prev"
    ROLLOUT_CURR = "rollout_curr"
    COMPARISON = "comparison.json"  # the pairs both epoch-end segments read (cached)
    PAIRS = "comparison_pairs.json"  # the kept pairs, for people
    PAIRS_ALL = "comparison_pairs_all.json"
    PROPOSAL = "proposal.json"
    CANDIDATE = "candidate_skill.md"
    SELECTION = "selection_eval"
    SELECTION_CURRENT = "selection_eval_current"
    SLOW_RESULT = "slow_result.json"
    META_RESULT = "meta_skill_result.json"
