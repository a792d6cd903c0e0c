"""Resume parity: a run that crashes anywhere, then resumes, ends with exactly the decisions
and files of a run that never stopped, without running again what it had committed."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from skillopt.trainer.rundir import layout
from tests.skillopt.trainer.conftest import (
    Crash,
    assert_no_duplicate_rows,
    crash_at,
    decisions,
    files,
    target_spend,
)

#: Commits of the short run (``runtime_state.json`` writes): 1 baseline; per step 2 segment
#: commits (rollout_reflect, propose) and the step's commit; per epoch end the slow update,
#: the meta skill and the epoch; 1 before the test evaluations.
N_COMMITS = 1 + 4 * 3 + 2 * 3 + 1


def test_the_short_run_commits_where_the_crash_points_assume(reference):
    # 20 train items in batches of 10, two epochs: four steps, each with patches.
    history = json.loads((reference / layout.HISTORY).read_text())
    assert [r["step"] for r in history] == [1, 2, 3, 4]
    assert all(r["n_patches"] > 0 for r in history)
    actions = [r["action"] for r in history]
    assert any("accept" in a for a in actions) and "reject" in actions, actions


@pytest.mark.parametrize("commit", range(1, N_COMMITS + 1))
def test_a_crash_before_any_commit_resumes_to_the_same_decisions_and_files(reference, fit, tmp_path, commit):
    out = tmp_path / "run"
    with pytest.raises(Crash):
        fit(out, failpoint=crash_at(layout.STATE, commit))
    result, _ = fit(out)
    assert result.status == "complete"
    assert decisions(out) == decisions(reference)
    assert files(out) == files(reference)
    assert target_spend(out) == target_spend(reference)
    assert_no_duplicate_rows(out)


# Writes inside segments (between two commits): an analyst chunk, the merge, the ranking, the
# candidate, the step record, the history, the epoch comparison, a proposal, the summary.
MID_SEGMENT = [
    ("minibatch_fail_001.json", 1),  # step 1: the first chunk written, two still to come
    ("minibatch_succ_001.json", 3),  # step 3: mid epoch 2, with a step buffer
    (layout.Step.MERGED, 2),
    (layout.Step.RANKED, 3),
    (layout.Step.CANDIDATE, 3),
    (layout.Step.DIGEST, 3),
    (layout.Step.RECORD, 3),
    (layout.HISTORY, 2),
    (layout.BEST_SKILL, 4),
    (layout.Epoch.COMPARISON, 1),
    (layout.Epoch.PROPOSAL, 1),
    (layout.Epoch.PROPOSAL, 2),
    (layout.SUMMARY, 1),
]


@pytest.mark.parametrize(("name", "n"), MID_SEGMENT)
def test_a_crash_inside_a_segment_resumes_to_the_same_decisions_and_files(reference, fit, tmp_path, name, n):
    out = tmp_path / "run"
    with pytest.raises(Crash):
        fit(out, failpoint=crash_at(name, n))
    fit(out)
    assert decisions(out) == decisions(reference)
    assert files(out) == files(reference)
    assert target_spend(out) == target_spend(reference)
    assert_no_duplicate_rows(out)


def _ledger_stages(run: Path) -> Counter:
    lines = (run / layout.OPTIMIZER_LEDGER).read_text().splitlines()
    return Counter(json.loads(x)["stage"] for x in lines if x.strip())


def test_committed_segments_are_replayed_without_a_model_call_or_a_rollout(reference, fit, tmp_path):
    out = tmp_path / "run"
    # Commits: 1 baseline, 2-4 step 1, 5-7 step 2, 8-10 epoch 1's end, 11 step 3's
    # rollout_reflect, 12 its propose; the crash comes just before step 3's own commit (13).
    with pytest.raises(Crash):
        fit(out, failpoint=crash_at(layout.STATE, 13))
    before = _ledger_stages(out)
    state = json.loads((out / layout.STATE).read_text())
    assert state["last_completed_step"] == 2 and state["step_stages"] == ["rollout_reflect", "propose"]
    _, executor = fit(out)
    after = _ledger_stages(out)
    new = after - before
    # Step 3's analysts, merge and ranking are not asked again; step 4 asks its own.
    assert new == _ledger_stages(reference) - before, (new, before)
    assert not any(
        r.rollout_id.split("/", 1)[1].startswith("steps/step_0003/rollout") for r in executor.requests
    )


# The other ways a step can run: each keeps its optimizer answers in its own cache entry, so a
# crash just before that entry (or the commits around it) also resumes to the same decisions.
VARIANTS = {
    "autonomous edit budget": (["optimizer.lr_control_mode=autonomous"], layout.Step.LR_DECISION),
    "rewrite from suggestions": (
        ["optimizer.skill_update_mode=rewrite_from_suggestions"],
        layout.Step.REWRITE,
    ),
    "deep reflect": (["gradient.deep_reflect=true"], "probe_patch.json"),
    "accumulation": (["train.accumulation=2", "train.batch_size=5"], "minibatch_fail_000.json"),
    "full rewrite": (["optimizer.skill_update_mode=full_rewrite_minibatch"], layout.Step.FULL_REWRITE),
    "changed pairs": (["optimizer.longitudinal_pair_policy=changed"], layout.Epoch.PAIRS_ALL),
}


@pytest.fixture(scope="module")
def variant_references(tmp_path_factory, fit) -> dict[str, Path]:
    refs = {}
    for name, (overrides, _) in VARIANTS.items():
        refs[name] = tmp_path_factory.mktemp("variant") / "run"
        fit(refs[name], *overrides)
    return refs


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize(
    "crash", ["before its entry", "before step 1's propose commit", "before step 1's commit"]
)
def test_every_kind_of_step_resumes_to_the_same_decisions(variant_references, fit, tmp_path, variant, crash):
    overrides, entry = VARIANTS[variant]
    failpoint = {
        "before its entry": crash_at(entry, 1),
        "before step 1's propose commit": crash_at(layout.STATE, 3),
        "before step 1's commit": crash_at(layout.STATE, 4),
    }[crash]
    out = tmp_path / "run"
    with pytest.raises(Crash):
        fit(out, *overrides, failpoint=failpoint)
    fit(out, *overrides)
    reference = variant_references[variant]
    assert decisions(out) == decisions(reference)
    assert files(out) == files(reference)
    assert_no_duplicate_rows(out)
