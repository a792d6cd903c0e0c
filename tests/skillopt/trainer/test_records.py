"""The typed records keep the run directory's JSON contract: the same keys in the same order
as before (readers of ``history.json``, ``step_record.json`` and ``summary.json`` rely on it),
a ``schema_version``, and records of older runs parse."""

from __future__ import annotations

import json

from skillopt.trainer import FitResult, StepRecord
from skillopt.trainer.rundir import layout

#: The keys of a step that produced and gated a candidate, in their historic order.
STEP_KEYS = [
    "step",
    "epoch",
    "step_in_epoch",
    "timing",
    "rollout_hard",
    "rollout_soft",
    "rollout_n",
    "rollout_n_infra",
    "accumulation_batches",
    "n_patches",
    "n_failure_patches",
    "n_success_patches",
    "n_edits_merged",
    "edit_budget",
    "lr_control_mode",
    "n_edits_ranked",
    "support_counts",
    "edit_apply_summary",
    "candidate_hash",
    "candidate_skill_len",
    "selection_hard",
    "selection_soft",
    "selection_cached",
    "selection_n_infra",
    "gate_metric",
    "candidate_gate_score",
    "current_score_before",
    "gate_reason",
    "action",
    "current_score",
    "best_score",
    "best_step",
    "current_origin",
    "best_origin",
    "skill_len",
    "tokens",
    "wall_time_s",
    "schema_version",
]

SUMMARY_KEYS = [
    "version",
    "status",
    "stop_reason",
    "simulated",
    "mode",
    "config",
    "baseline_selection_hard",
    "baseline_selection_score",
    "best_selection_hard",
    "best_selection_score",
    "final_selection_hard",
    "final_selection_score",
    "best_step",
    "current_origin",
    "best_origin",
    "final_gate",
    "total_steps",
    "total_accepts",
    "total_rejects",
    "total_skips",
    "epoch_stats",
    "epoch_stages",
    "total_wall_time_s",
    "token_summary",
    "cost_usd",
    "cacheable_prefix_share",
    "cacheable_prefix",
    "sandbox_hosts",
    "image_digests",
    "environment",
    "baseline_test_hard",
    "baseline_test_soft",
    "test_hard",
    "test_soft",
    "final_test_hard",
    "final_test_soft",
    "test_delta_hard",
    "final_test_delta_hard",
    "test_n_infra",
    "schema_version",
]


#: Schema 2: each score ``X`` has ``X_ci95`` right after it, and the gate's mode and test.
STEP_SCORES = [
    "rollout_hard",
    "rollout_soft",
    "selection_hard",
    "selection_soft",
    "candidate_gate_score",
    "current_score_before",
    "current_score",
    "best_score",
]
SUMMARY_SCORES = [
    "baseline_selection_hard",
    "baseline_selection_score",
    "best_selection_hard",
    "best_selection_score",
    "final_selection_hard",
    "final_selection_score",
    "baseline_test_hard",
    "baseline_test_soft",
    "test_hard",
    "test_soft",
    "final_test_hard",
    "final_test_soft",
    "test_delta_hard",
    "final_test_delta_hard",
]


def _with_intervals(keys: list[str], scores: list[str]) -> list[str]:
    return [k2 for k in keys for k2 in ((k, f"{k}_ci95") if k in scores else (k,))]


def _interval(value) -> bool:
    return isinstance(value, list) and len(value) == 2 and 0.0 - 1e-9 <= value[0] <= value[1] <= 1.0 + 1e-9


def test_step_records_keep_their_shape_and_round_trip(reference):
    history = json.loads((reference / layout.HISTORY).read_text())
    expected = _with_intervals(STEP_KEYS, STEP_SCORES)
    expected[expected.index("gate_reason") + 1 : expected.index("gate_reason") + 1] = [
        "gate_mode",
        "gate_test",
    ]
    assert list(history[0]) == expected
    for raw in history:
        for key in STEP_SCORES:
            if raw.get(key) is not None:  # a score measured has its interval, and it holds the score
                lo, hi = raw[f"{key}_ci95"]
                assert _interval([lo, hi]) and lo - 1e-9 <= raw[key] <= hi + 1e-9, key
        if "gate_test" in raw:
            test = raw["gate_test"]
            assert test["mode"] == "strict" and test["name"] in ("sign", "bootstrap")
            lo, hi = test["ci95"]
            assert 0 < test["p_value"] <= 1 and -1 <= lo <= test["effect"] <= hi <= 1
    for raw in history:
        record = StepRecord.from_json(raw)
        assert record.to_json() == raw
        on_disk = json.loads((reference / layout.step_dir(raw["step"]) / layout.Step.RECORD).read_text())
        assert on_disk == raw


def test_the_summary_keeps_its_shape_and_round_trips(reference):
    summary = json.loads((reference / layout.SUMMARY).read_text())
    expected = _with_intervals(SUMMARY_KEYS, SUMMARY_SCORES)
    for key in ("test_delta_hard", "final_test_delta_hard"):
        expected.insert(expected.index(f"{key}_ci95") + 1, f"{key}_p_value")
    # The paired differences are reported with their p-values, after both intervals.
    assert [k for k in summary if not k.endswith("_p_value")] == [
        k for k in expected if not k.endswith("_p_value")
    ]
    assert {k for k in summary if k.endswith("_p_value")} == {
        "test_delta_hard_p_value",
        "final_test_delta_hard_p_value",
    }
    for key in SUMMARY_SCORES:
        if not key.endswith("delta_hard"):
            lo, hi = summary[f"{key}_ci95"]
            assert lo - 1e-9 <= summary[key] <= hi + 1e-9, key
    result = FitResult.from_json(summary)
    assert result.to_json() == summary and result.complete


def test_epoch_stats_are_taken_when_each_epoch_ends(reference):
    summary = json.loads((reference / layout.SUMMARY).read_text())
    history = json.loads((reference / layout.HISTORY).read_text())
    first = summary["epoch_stats"][0]
    # Epoch 1's best is the best after step 2 (before: the final best was written for every epoch).
    assert first["best_score_at_epoch_end"] == history[1]["best_score"]
    assert [e["steps"] for e in summary["epoch_stats"]] == [2, 2]


def test_records_of_older_runs_parse():
    old = {  # a record written before schema_version, for a step without patches
        "step": 3,
        "epoch": 2,
        "step_in_epoch": 0,
        "timing": {"rollout_s": 1.0, "reflect_s": 0.5},
        "rollout_hard": 1.0,
        "rollout_soft": 1.0,
        "rollout_n": 5,
        "rollout_n_infra": 0,
        "accumulation_batches": [
            {
                "batch_idx": 0,
                "batch_seed": 2001,
                "n_envs": 5,
                "hard": 1.0,
                "soft": 1.0,
                "n_infra": 0,
                "n_failure_patches": 0,
                "n_success_patches": 0,
            }
        ],
        "n_patches": 0,
        "n_failure_patches": 0,
        "n_success_patches": 0,
        "action": "skip_no_patches",
        "current_score": 0.8,
        "best_score": 0.8,
        "best_step": 1,
        "current_origin": "step_0001",
        "best_origin": "step_0001",
        "skill_len": 120,
        "tokens": {},
        "wall_time_s": 2.0,
    }
    record = StepRecord.from_json(old)
    assert record.proposal is None and record.selection is None and record.action == "skip_no_patches"
    again = record.to_json()
    # The same keys and values, plus the intervals it never had (null: not measured then).
    assert {k: v for k, v in again.items() if not k.endswith("_ci95")} == {**old, "schema_version": 2}
    assert {k: v for k, v in again.items() if k.endswith("_ci95")} == {
        "rollout_hard_ci95": None,
        "rollout_soft_ci95": None,
        "current_score_ci95": None,
        "best_score_ci95": None,
    }
