"""The run directory's records (``skillopt.trainer.rundir``): each round-trips through its JSON
in the shape readers rely on, an older version is migrated on read, and a newer one (a later
skillopt's) is refused with a message that says to upgrade, never misread."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from skillopt.trainer import FitResult, RunMode, StepRecord
from skillopt.trainer.rundir import (
    ConfigRecord,
    EvalConfigRecord,
    EvalSummary,
    LaunchRecord,
    LiveRecord,
    RecordError,
    ResultRow,
    RunDirectory,
    layout,
)
from skillopt.trainer.state import TrainerState
from skillopt.trainer.versions import upgrade
from skillopt.types import (
    CaseResult,
    InfraErrorKind,
    InfraFailure,
    RolloutResult,
    Usage,
    WorkOutcome,
)
from tests.rundirs import FIXTURES, NEWEST

RUN = FIXTURES / NEWEST
EVAL = RUN / layout.EVALS / "test_best_skill"

#: The keys of a ``results.jsonl`` line in their order (readers and other teams' tools rely on
#: them; ``schema_version`` came last, with version 1).
ROW_KEYS = [
    "id",
    "rollout_id",
    "hard",
    "soft",
    "fail_reason",
    "phase",
    "agent_ok",
    "n_turns",
    "task_type",
    "cases",
    "metrics",
    "usage",
    "timings_s",
    "host",
    "image_digest",
    "container_runtime",
    "infra_error",
    "schema_version",
]


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_row_keeps_its_shape_and_round_trips():
    row = RolloutResult(
        id="t1",
        rollout_id="run/t1",
        hard=0.0,
        soft=0.5,
        fail_reason="infra-timeout: slow",
        phase="infra",
        n_turns=2,
        cases=(CaseResult(name="1", ok=False, stage="eval", reason="A1 differs", report="got 1"),),
        metrics={"task_type": "lookup", "em": 0.0},
        usage=Usage(calls=2, prompt_tokens=100, completion_tokens=10, cached_input_tokens=64),
        timings_s={"total": 1.234567},
        host="h1",
        container_runtime="runsc",
        infra_error=InfraFailure(kind=InfraErrorKind.TIMEOUT, message="slow", outcome=WorkOutcome.LOST),
    )
    stored = ResultRow.of(row).to_json()
    assert list(stored) == ROW_KEYS and stored["schema_version"] == 1
    assert stored["task_type"] == "lookup" and stored["timings_s"] == {"total": 1.2346}
    assert stored["usage"] == {
        "calls": 2,
        "prompt_tokens": 100,
        "completion_tokens": 10,
        "cached_input_tokens": 64,
    }
    assert stored["infra_error"] == {
        "kind": "timeout",
        "message": "slow",
        "retryable": True,
        "outcome": "lost",
    }
    assert stored["cases"] == [{"name": "1", "ok": False, "stage": "eval", "reason": "A1 differs"}]
    back = ResultRow.from_json(json.loads(json.dumps(stored)))
    assert back.to_json() == stored
    # The report lives in the trace's files; given back, the row is the trainer's row again.
    assert back.result(reports={"1": "got 1"}) == dataclasses.replace(row, timings_s={"total": 1.2346})


@pytest.mark.parametrize(("retryable", "outcome"), [(True, WorkOutcome.LOST), (False, WorkOutcome.FINAL)])
def test_a_row_from_before_outcomes_is_migrated_on_read(retryable, outcome):
    # The infrastructure row c376b9d's `skillopt eval` wrote (version 0: no outcome, no version).
    (line,) = [
        r
        for r in _lines(FIXTURES / "c376b9d" / layout.EVALS / "test_best_skill/eval_test/results.jsonl")
        if r["infra_error"]
    ]
    assert (
        "outcome" not in line["infra_error"] and "schema_version" not in line and "container_runtime" in line
    )
    line["infra_error"]["retryable"] = retryable
    row = ResultRow.from_json(line)
    assert row.infra_error is not None and row.infra_error.outcome is outcome
    assert row.schema_version == 1 and row.result().infra_error == InfraFailure(
        kind=InfraErrorKind.TIMEOUT, message=line["infra_error"]["message"], outcome=outcome
    )


def test_what_is_no_row_is_refused_with_what_is_wrong():
    with pytest.raises(RecordError, match=r"is not a result row \(id: Field required\)"):
        ResultRow.from_json({"hard": 1.0})
    with pytest.raises(RecordError, match=r"holds a JSON list, not a JSON dict"):
        ResultRow.from_json([1])
    with pytest.raises(RecordError, match=r"is not a result row \(hard: "):
        ResultRow.from_json({"id": "a", "hard": "high"})


def test_the_config_record_round_trips_and_reads_an_unversioned_one():
    data = _json(RUN / layout.CONFIG)
    assert "schema_version" not in data["derived"]  # version 0
    record = ConfigRecord.from_json(data)
    assert record.config.env.name == "searchqa" and record.derived.total_steps == 4
    assert record.derived.mode == RunMode(simulated=True, reason="in-process simulation")
    assert record.to_json() == {**data, "derived": {**data["derived"], "schema_version": 1}}
    # The oldest runs recorded only whether they were simulated.
    old = ConfigRecord.from_json({**data, "derived": {"simulated": True, "total_steps": 4}})
    assert old.derived.mode == RunMode(simulated=True)


def test_a_config_this_version_does_not_read_says_why():
    data = _json(RUN / layout.CONFIG)
    with pytest.raises(RecordError, match=r"is not a config this skillopt reads: .*train\.batch_sise"):
        ConfigRecord.from_json({**data, "train": {**data["train"], "batch_sise": 3}})


def test_the_config_is_read_without_resolving_it_on_this_machine():
    """A run made elsewhere names paths this machine lacks: its record still reads (only
    ``--resume`` resolves it)."""
    data = _json(RUN / layout.CONFIG)
    data["env"] = {**data["env"], "data_root": "/nowhere/on/this/machine"}
    assert ConfigRecord.from_json(data).config.env.data_root == "/nowhere/on/this/machine"


def test_the_live_record_reads_what_the_writer_wrote():
    data = _json(RUN / layout.LIVE)
    live = LiveRecord.from_json(data)
    assert live.phase == "done" and live.last_gate is not None and live.last_gate.step == 4
    assert live.to_json() | data == live.to_json()  # what was written reads back unchanged
    batch = LiveRecord.from_json({"version": 1, "batch": {"label": "b", "total": 3, "pass": 2}}).batch
    assert batch is not None and batch.passed == 2 and batch.to_json()["pass"] == 2


def test_the_launch_and_eval_records_round_trip():
    launch = LaunchRecord.from_json(_json(RUN / layout.LAUNCH))
    assert launch.kind == "train" and launch.pid == 4242 and launch.schema_version == 1
    assert LaunchRecord.from_json(launch.to_json()) == launch
    data = _json(EVAL / layout.EVAL_CONFIG)
    record = EvalConfigRecord.from_json(data)
    assert record.split == "test" and record.against is not None and record.mode is not None
    assert record.to_json() == {**data, "schema_version": 1}


def test_an_eval_summary_carries_its_version_and_round_trips():
    data = _json(EVAL / layout.EVAL_SUMMARY)
    assert "schema_version" not in data  # version 0
    summary = EvalSummary.from_json(data)
    assert summary.against is not None and summary.difference is not None and summary.n_infra == 1
    again = summary.to_json()
    assert again == {**data, "schema_version": 1, "against": {**data["against"], "schema_version": 1}}
    assert EvalSummary.from_json(again) == summary


NEWER: list[tuple[str, Path, Callable[[Any], Any], str]] = [
    ("results.jsonl", RUN / layout.TEST_BEST / layout.RESULTS, ResultRow.from_json, "schema_version"),
    (
        "step_record.json",
        RUN / layout.step_dir(1) / layout.Step.RECORD,
        StepRecord.from_json,
        "schema_version",
    ),
    ("summary.json", RUN / layout.SUMMARY, FitResult.from_json, "schema_version"),
    ("eval_summary.json", EVAL / layout.EVAL_SUMMARY, EvalSummary.from_json, "schema_version"),
    ("runtime_state.json", RUN / layout.STATE, lambda d: TrainerState.from_json(d, []), "version"),
    ("live.json", RUN / layout.LIVE, LiveRecord.from_json, "version"),
    ("launch.json", RUN / layout.LAUNCH, LaunchRecord.from_json, "schema_version"),
    ("eval_config.json", EVAL / layout.EVAL_CONFIG, EvalConfigRecord.from_json, "schema_version"),
]


@pytest.mark.parametrize(("name", "path", "parse", "key"), NEWER, ids=[n for n, *_ in NEWER])
def test_a_record_of_a_newer_version_is_refused(name, path, parse, key):
    data = _lines(path)[0] if path.suffix == ".jsonl" else _json(path)
    parse(data)  # today's version reads
    with pytest.raises(RecordError, match=rf"has {key} 99: written by a newer skillopt .* upgrade skillopt"):
        parse({**data, key: 99})


def test_a_config_of_a_newer_version_is_refused():
    data = _json(RUN / layout.CONFIG)
    with pytest.raises(RecordError, match="written by a newer skillopt"):
        ConfigRecord.from_json({**data, "derived": {**data["derived"], "schema_version": 2}})


def test_migrations_run_in_order_from_the_records_version():
    steps = {
        0: lambda d: {**d, "seen": [*d.get("seen", []), 0]},
        1: lambda d: {**d, "seen": [*d.get("seen", []), 1]},
    }
    assert upgrade({}, key="v", current=2, steps=steps) == {"seen": [0, 1], "v": 2}
    assert upgrade({"v": 1}, key="v", current=2, steps=steps) == {"seen": [1], "v": 2}
    assert upgrade({"v": 2}, key="v", current=2, steps=steps) == {"v": 2}
    with pytest.raises(RecordError, match="has v 'x', not a version number"):
        upgrade({"v": "x"}, key="v", current=2)


def test_a_history_entry_that_is_no_record_is_named(tmp_path):
    history = _json(RUN / layout.HISTORY)
    (tmp_path / layout.HISTORY).write_text(json.dumps([history[0], {"step": 2}]))
    store = RunDirectory(tmp_path, failpoint=None)
    with pytest.raises(RecordError, match=r"has an entry 2 that is not a step record \(no 'epoch'\)"):
        store.history_records()
    (tmp_path / layout.HISTORY).write_text("[1")
    with pytest.raises(RecordError, match=r"is not valid JSON .*cut off"):
        store.history_records()
