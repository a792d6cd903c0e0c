"""The run directory's one owner: commit order, the stage cache's keys, crash injection, and
what it does with damaged files (repairs what it can, names what it cannot)."""

from __future__ import annotations

import json
import shutil

import pytest

from skillopt.reflection.cache import cache_key, memoized
from skillopt.trainer.records import SCHEMA_VERSION
from skillopt.trainer.rundir import Failpoint, RunDirectory, RunDirectoryDamaged, layout
from skillopt.types import SkillVersion, skill_hash
from tests.rundirs import WRITTEN_BY, copy_run
from tests.skillopt.trainer.conftest import Crash, crash_at, decisions


def test_the_stage_cache_hits_only_for_the_same_key(tmp_path):
    run = RunDirectory(tmp_path, failpoint=None)
    slot = run.slot("steps/step_0001", "merged_patch.json")
    key = cache_key("merge", 1, {"skill": "a"})
    assert slot.load(key) is None
    slot.save(key, {"edits": [1]})
    assert slot.load(key)["edits"] == [1]
    assert slot.load(cache_key("merge", 1, {"skill": "b"})) is None  # other inputs: a miss
    assert slot.load(cache_key("merge", 2, {"skill": "a"})) is None  # another format: a miss
    on_disk = json.loads((tmp_path / "steps/step_0001/merged_patch.json").read_text())
    assert on_disk == {"cache_key": key, "edits": [1]}  # readers see the payload's own keys
    (tmp_path / "steps/step_0001/merged_patch.json").write_text("{ torn")
    assert slot.load(key) is None


def test_memoized_keeps_only_what_is_worth_keeping(tmp_path):
    slot = RunDirectory(tmp_path, failpoint=None).slot("", "answer.json")
    calls = []

    def ask(value):
        calls.append(value)
        return value

    encode, decode = (lambda v: {"v": v}), (lambda d: d["v"])
    assert memoized(slot, "k", lambda: ask(""), encode=encode, decode=decode, keep=bool) == ""
    assert memoized(slot, "k", lambda: ask("x"), encode=encode, decode=decode, keep=bool) == "x"
    assert memoized(slot, "k", lambda: ask("y"), encode=encode, decode=decode, keep=bool) == "x"
    assert calls == ["", "x"]  # a failed answer is asked again; a kept one never


def test_a_failpoint_counts_writes_of_one_name(tmp_path):
    hits = []
    run = RunDirectory(tmp_path, failpoint=Failpoint("b.json", 2, crash=lambda: hits.append("crash")))
    for rel in ("a.json", "b.json", "x/b.json", "a.json"):
        run.write_json(rel, {})
    assert hits == ["crash"]


def test_a_failpoint_from_the_environment(monkeypatch):
    monkeypatch.setenv("SKILLOPT_FAILPOINT", "runtime_state.json:3")
    fp = Failpoint.from_env()
    assert fp is not None and (fp.name, fp.n) == ("runtime_state.json", 3)
    monkeypatch.setenv("SKILLOPT_FAILPOINT", "nonsense")
    assert Failpoint.from_env() is None


def test_a_damaged_history_is_rebuilt_from_the_step_records_and_the_run_resumes(reference, fit, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(reference, out)
    text = (out / layout.HISTORY).read_text()
    (out / layout.HISTORY).write_text(text[: len(text) // 2])  # cut in half
    state = RunDirectory(out).load_state()
    assert state is not None and [r.step for r in state.history] == [1, 2, 3, 4]
    fit(out)  # a complete run finishes again: rewrites history.json whole
    assert decisions(out) == decisions(reference)


def test_a_damaged_state_is_named_and_not_guessed(reference, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(reference, out)
    (out / layout.STATE).write_text('{"last_completed_step": 4, "current_sk')
    with pytest.raises(RunDirectoryDamaged, match=r"runtime_state\.json is damaged"):
        RunDirectory(out).load_state()
    (out / layout.STATE).write_text(json.dumps(json.loads((reference / layout.STATE).read_text())))
    (out / layout.HISTORY).write_text("[")
    (out / layout.step_dir(2) / layout.Step.RECORD).write_text("")
    with pytest.raises(RunDirectoryDamaged, match=r"step_0002/step_record\.json cannot replace it"):
        RunDirectory(out).load_state()


def test_a_history_record_past_the_committed_step_is_dropped(reference, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(reference, out)
    state = json.loads((out / layout.STATE).read_text())
    state["last_completed_step"] = 3  # the crash came between history.json and the state
    (out / layout.STATE).write_text(json.dumps(state))
    loaded = RunDirectory(out).load_state()
    assert [r.step for r in loaded.history] == [1, 2, 3]


def test_a_run_directory_from_before_the_progress_counters_resumes(reference, fit, tmp_path):
    """State version 1 (no ``step_stages``, no ``epoch_records``, records without
    ``schema_version``), left mid-epoch 2 with step 4's rollouts done: the resume reruns step 4
    from its caches and reaches the same decisions."""
    out = tmp_path / "run"
    with pytest.raises(Crash):  # after step 4's rollout + reflect commit (14), before propose's
        fit(out, failpoint=crash_at(layout.STATE, 15))
    state = json.loads((out / layout.STATE).read_text())
    assert state["last_completed_step"] == 3 and state["step_stages"] == ["rollout_reflect"]
    for key in ("step_stages", "epoch_records"):
        state.pop(key)
    state["version"] = 1
    (out / layout.STATE).write_text(json.dumps(state))
    history = [
        {k: v for k, v in r.items() if k != "schema_version"}
        for r in json.loads((out / layout.HISTORY).read_text())
    ]
    (out / layout.HISTORY).write_text(json.dumps(history))
    result, _ = fit(out)
    assert result.status == "complete" and result.total_steps == 4
    assert decisions(out) == decisions(reference)


@pytest.mark.parametrize("commit", WRITTEN_BY)
def test_a_run_directory_of_every_earlier_version_resumes(fit, tmp_path, commit):
    """``--resume`` of a finished run written by each earlier version (``tests/fixtures/rundirs``):
    its state, history and rows load (migrated on read), its end runs again, and what it writes
    is in today's shape."""
    out = copy_run(commit, tmp_path / "run")
    before = [
        (r["step"], r["action"], r["best_score"]) for r in json.loads((out / layout.HISTORY).read_text())
    ]
    result, _ = fit(out)
    assert result.status == "complete" and result.total_steps == 4 and result.best_step == 1
    history = json.loads((out / layout.HISTORY).read_text())
    assert [(r["step"], r["action"], r["best_score"]) for r in history] == before
    assert {r["schema_version"] for r in history} == {SCHEMA_VERSION}
    assert json.loads((out / layout.SUMMARY).read_text())["schema_version"] == SCHEMA_VERSION


def test_a_selection_cache_keyed_by_skill_texts_resumes_with_every_measurement(reference, fit, tmp_path):
    """A run from before skill versions keyed its selection cache by the hash of each skill's
    text (16 hex digits): resumed mid-epoch 2, every measurement is found again under its
    version's tree hash, and the run ends as the reference did (its cache included)."""
    out = tmp_path / "run"
    with pytest.raises(Crash):  # after step 4's rollout + reflect commit (14), before propose's
        fit(out, failpoint=crash_at(layout.STATE, 15))
    state = json.loads((out / layout.STATE).read_text())
    cache = json.loads(state["gate_cache"]["json"])
    texts = {SkillVersion(content=t).tree_sha256: skill_hash(t) for t in RunDirectory(out).skill_texts()}
    old = {}
    for key, entry in cache["entries"].items():
        tree, _, protocol = key.partition("/")
        old[texts[tree] + (f"/{protocol}" if protocol else "")] = entry
    assert len(old) == len(cache["entries"]) > 1
    state["gate_cache"] = {"json": json.dumps({"version": 1, "entries": old})}
    (out / layout.STATE).write_text(json.dumps(state))

    result, _ = fit(out)

    assert result.status == "complete"
    assert decisions(out) == decisions(reference)
    final = json.loads((out / layout.STATE).read_text())["gate_cache"]
    assert final == json.loads((reference / layout.STATE).read_text())["gate_cache"]
    summary, expected = (json.loads((r / layout.SUMMARY).read_text()) for r in (out, reference))
    assert summary["baseline_selection_hard"] == expected["baseline_selection_hard"] is not None
