"""Experiment trackers (skillopt.tracking): a demo run logged to MLflow, W&B and TensorBoard,
stopped after step 2 and resumed, read back with each library's own reader; and trackers that
fail (an unreachable MLflow, a TensorBoard folder that cannot be made, a backend that never
answers) leave the run's decisions exactly those of an untracked run.

The run is the real trainer in this process (``simulated_trainer``), its trackers the real
libraries writing local stores: MLflow's SQLite store beside the run, W&B offline files,
TensorBoard event files.
"""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import threading
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from skillopt.config import load_config
from skillopt.errors import ConfigError
from skillopt.tracking import Backend, Point, RunInfo, TrackerCallback, load_state, tracking_callbacks
from skillopt.trainer.callbacks import Callback, FitStartEvent, StageEvent
from skillopt.trainer.rundir import layout
from tests.skillopt.trainer.conftest import ENV, SHORT, decisions

# MLflow's SQLite store on SQLAlchemy 2.1 (MLflow's code, not ours).
pytestmark = pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy is deprecated")

ALL = [
    "tracking.mlflow.enabled=true",
    "tracking.wandb.enabled=true",
    "tracking.wandb.mode=offline",
    "tracking.tensorboard.enabled=true",
]


class StopAfterStep(Callback):
    """Asks the run to stop once step ``step`` is evaluated (it commits, then the run stops)."""

    def __init__(self, step: int) -> None:
        self.step = step
        self.control: Any = None

    def on_fit_start(self, event: FitStartEvent) -> None:
        self.control = event.control

    def on_stage_end(self, event: StageEvent) -> None:
        if (event.step, event.stage) == (self.step, "evaluate"):
            self.control.request_stop("stop requested (test)")


@pytest.fixture(scope="module")
def tracked(tmp_path_factory, fit) -> Iterator[Path]:
    """A demo run with all three trackers, stopped after step 2 and resumed to its end."""
    with pytest.MonkeyPatch.context() as mp:
        for name in ("MLFLOW_TRACKING_URI", "WANDB_MODE", "WANDB_DIR"):
            mp.delenv(name, raising=False)
        home = tmp_path_factory.mktemp("wandb-home")  # W&B's staging copies and logs, not ~
        for name in ("WANDB_DATA_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR"):
            mp.setenv(name, str(home / name.lower()))
        out = tmp_path_factory.mktemp("tracked") / "demo"
        first, _ = fit(out, *ALL, callbacks=[StopAfterStep(2)])
        assert first.status == "stopped" and first.total_steps == 2
        ids = load_state(out)
        second, _ = fit(out, *ALL)
        assert second.status == "complete" and second.total_steps == 4
        assert load_state(out) == ids  # the resumed process continued the same tracker runs
        yield out


def history(run: Path) -> list[dict[str, Any]]:
    return json.loads((run / layout.HISTORY).read_text())


def baseline(run: Path) -> float:
    return json.loads((run / layout.SUMMARY).read_text())["baseline_selection_score"]


def test_tracking_changes_no_decision_of_the_run(tracked, reference):
    assert decisions(tracked) == decisions(reference)


# -- MLflow: its client -----------------------------------------------------------------------------


def test_mlflow_holds_the_steps_params_tags_and_skills_of_one_run(tracked):
    from mlflow.tracking import MlflowClient

    state = load_state(tracked)["mlflow"]
    client = MlflowClient(tracking_uri=f"sqlite:///{tracked.parent / 'mlflow.db'}")
    assert state["tracking_uri"] == f"sqlite:///{tracked.parent.resolve() / 'mlflow.db'}"
    experiment = client.get_experiment_by_name("skillopt")
    runs = client.search_runs([experiment.experiment_id])
    assert [r.info.run_id for r in runs] == [state["run_id"]]  # resumed into the same run
    run = runs[0]
    assert run.info.status == "FINISHED" and run.info.run_name == "demo"
    steps = history(tracked)

    current = client.get_metric_history(run.info.run_id, "score/current")
    assert sorted((m.step, m.value) for m in current) == [(0, baseline(tracked))] + [
        (s["step"], s["current_score"]) for s in steps
    ]
    selection = client.get_metric_history(run.info.run_id, "selection/score")
    assert sorted((m.step, m.value) for m in selection) == [
        (s["step"], s["candidate_gate_score"]) for s in steps if "candidate_gate_score" in s
    ]
    low = {m.step: m.value for m in client.get_metric_history(run.info.run_id, "selection/score_ci95_low")}
    assert low == {s["step"]: s["candidate_gate_score_ci95"][0] for s in steps if "candidate_gate_score" in s}
    accepted = {m.step: m.value for m in client.get_metric_history(run.info.run_id, "gate/accepted")}
    assert accepted == {s["step"]: float("accept" in s["action"]) for s in steps}
    assert 0.0 in accepted.values() and 1.0 in accepted.values()  # the demo accepts and rejects
    p_values = {m.step: m.value for m in client.get_metric_history(run.info.run_id, "gate/p_value")}
    assert p_values == {s["step"]: s["gate_test"]["p_value"] for s in steps if s.get("gate_test")}
    epochs = client.get_metric_history(run.info.run_id, "epoch/accepts")
    assert sorted(m.step for m in epochs) == [1, 2]
    for name in ("tokens/total", "cost/total_usd", "time/step_s", "gate/effect"):
        assert client.get_metric_history(run.info.run_id, name), name
    assert run.data.metrics["final/steps"] == 4

    assert run.data.params["train.batch_size"] == "10"
    assert run.data.params["tracking.mlflow.enabled"] == "true"
    tags = run.data.tags
    assert (tags["env"], tags["agent"], tags["gate_mode"], tags["simulated"]) == (
        "searchqa",
        "qa",
        "strict",
        "simulated",
    )
    top = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"skills", "best_skill", "steps", "summary.json", "history.json"} <= top
    versions = [a.path for a in client.list_artifacts(run.info.run_id, "skills")]
    assert versions == [f"skills/v{v:04d}" for v in range(5)]
    records = [a.path for a in client.list_artifacts(run.info.run_id, "steps")]
    assert records == [f"steps/step_{s:04d}.json" for s in range(1, 5)]
    (best_name,) = (tracked / layout.BEST_SKILL_DIR).iterdir()
    local = client.download_artifacts(run.info.run_id, f"best_skill/{best_name.name}/SKILL.md")
    assert Path(local).read_text() == (best_name / "SKILL.md").read_text()


# -- W&B: its offline run files ---------------------------------------------------------------------


def wandb_records(path: Path) -> Iterator[Any]:
    """The records of a ``.wandb`` file: W&B's LevelDB-style log of ``wandb_internal_pb2.Record``
    (32 KiB blocks of chunks, each ``crc32 (4) | length (2) | type (1) | data``; type 1 full,
    2 first, 3 middle, 4 last), after a 7-byte header ``:W&B``, ``0xBEE1``, version."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    ident, magic, _version = struct.unpack("<4sHB", data[:7])
    assert (ident, magic) == (b":W&B", 0xBEE1), path
    pos, parts = 7, b""
    while pos + 7 <= len(data):
        left = 32768 - pos % 32768
        if left < 7:  # a block's tail too short for a chunk header is padding
            pos += left
            continue
        crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if (crc, length, kind) == (0, 0, 0):
            break
        chunk = data[pos + 7 : pos + 7 + length]
        assert zlib.crc32(bytes([kind]) + chunk) == crc, f"{path}: bad chunk at {pos}"
        pos += 7 + length
        parts = chunk if kind in (1, 2) else parts + chunk
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(parts)
            yield record


def test_wandb_offline_files_hold_the_steps_of_one_run_in_two_parts(tracked):
    run_id = load_state(tracked)["wandb"]["id"]
    parts = sorted((tracked / "wandb").glob(f"offline-run-*-{run_id}"))
    assert len(parts) == 2  # the first process and the resumed one, same run id
    rows: list[dict[str, Any]] = []
    artifacts: list[tuple[str, tuple[str, ...]]] = []
    summary: dict[str, Any] = {}
    tags: list[str] = []
    for part in parts:
        for record in wandb_records(part / f"run-{run_id}.wandb"):
            kind = record.WhichOneof("record_type")
            if kind == "run":
                assert record.run.run_id == run_id and record.run.project == "skillopt"
                tags = list(record.run.tags)
            elif kind == "history":
                rows.append(
                    {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in record.history.item}
                )
            elif kind == "artifact":
                artifacts.append((record.artifact.name, tuple(record.artifact.aliases)))
            elif kind == "summary":
                summary.update({i.key: json.loads(i.value_json) for i in record.summary.update if i.key})
    assert tags == ["env:searchqa", "agent:qa", "gate:strict", "simulated"]
    steps = history(tracked)
    by_step = {r["step"]: r for r in rows if "step" in r}
    assert sorted(by_step) == [0, 1, 2, 3, 4]
    assert by_step[0]["score/current"] == baseline(tracked)
    for s in steps:
        row = by_step[s["step"]]
        assert row["score/current"] == s["current_score"]
        assert row["gate/action"] == s["action"]
        assert row["gate/accepted"] == float("accept" in s["action"])
        if "candidate_gate_score" in s:
            assert row["selection/score"] == s["candidate_gate_score"]
            assert [row["selection/score_ci95_low"], row["selection/score_ci95_high"]] == s[
                "candidate_gate_score_ci95"
            ]
    assert sorted(r["epoch"] for r in rows if "epoch" in r) == [1, 2]
    skills = [aliases for name, aliases in artifacts if name == f"skill-{run_id}"]
    assert sorted(a for aliases in skills for a in aliases if a.startswith("step-")) == [
        f"step-{v}" for v in range(5)
    ]
    assert any(name == f"best-skill-{run_id}" for name, _ in artifacts)
    assert summary["final/steps"] == 4 and summary["skillopt_status"] == "complete"


# -- TensorBoard: its event reader -------------------------------------------------------------------


def test_tensorboard_events_hold_the_steps_epochs_and_skills(tracked):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    events = EventAccumulator(str(tracked / "tensorboard"), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    steps = history(tracked)
    current = events.Scalars("score/current")  # float32 values
    assert [e.step for e in current] == [0, 1, 2, 3, 4]
    assert [e.value for e in current] == pytest.approx(
        [baseline(tracked)] + [s["current_score"] for s in steps]
    )
    assert [e.step for e in events.Scalars("epoch/accepts")] == [1, 2]

    def texts(tag: str) -> list[tuple[int, str]]:
        return [
            (e.step, tensor_util.make_ndarray(e.tensor_proto).item().decode()) for e in events.Tensors(tag)
        ]

    assert texts("gate/action") == [(s["step"], s["action"]) for s in steps]
    skills = texts("skill")
    assert [step for step, _ in skills] == [0, 1, 2, 3, 4]
    assert skills[-1][1] == (tracked / layout.skill_package_dir(4)).glob("*/SKILL.md").__next__().read_text()
    best_texts = texts("best_skill")  # the best so far when the run stopped, then at its end
    assert [step for step, _ in best_texts] == [2, 4]
    best = best_texts[-1][1]
    (best_dir,) = (tracked / layout.BEST_SKILL_DIR).iterdir()
    assert best == (best_dir / "SKILL.md").read_text()
    assert "searchqa" in texts("run/config")[0][1]


# -- trackers that fail --------------------------------------------------------------------------------


class NeverAnswers(Backend):
    """A backend whose server never answers: its first call waits until ``release`` is set."""

    name = "stuck"
    title = "Stuck"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def start(self, run: RunInfo, saved: Mapping[str, Any]) -> Mapping[str, Any]:
        self.calls += 1
        self.release.wait()
        return {}

    def log(self, point: Point) -> None:
        self.calls += 1

    def artifact(self, path: Path, kind: Any, *, step: int) -> None:
        self.calls += 1

    def finish(self, status: Any, *, wall_time: float) -> None:
        self.calls += 1


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_trackers_that_fail_say_so_once_and_leave_the_run_unchanged(
    fit, reference, tmp_path, monkeypatch, capfd
):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # the user's setting wins over ours
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the event folder should be")
    stuck = NeverAnswers()
    slow = TrackerCallback(stuck, flush_timeout_s=0, queue_size=2)
    out = tmp_path / "run"
    try:
        result, _ = fit(
            out,
            "tracking.mlflow.enabled=true",
            f"tracking.mlflow.tracking_uri=http://127.0.0.1:{closed_port()}",
            "tracking.tensorboard.enabled=true",
            f"tracking.tensorboard.log_dir={blocked / 'tb'}",
            callbacks=[slow],
        )
    finally:
        stuck.release.set()
    assert result.status == "complete"
    assert decisions(out) == decisions(reference)
    err = capfd.readouterr().err
    assert err.count("MLflow tracking failed") == 1, err
    assert err.count("TensorBoard tracking failed") == 1, err
    assert err.count("Stuck tracking falls behind") == 1 and slow.dropped > 0, err
    assert err.count("Stuck tracking was still sending after 0 s") == 1, err
    assert stuck.calls == 1  # the run never waited on it past its start
    assert not {"mlflow", "tensorboard"} & set(load_state(out))  # no run opened: nothing to resume


def test_trackers_import_nothing_until_a_run_starts():
    """skillopt imports and builds its trackers without loading any tracker library."""
    code = (
        "import sys\n"
        "from skillopt.config import load_config\n"
        "from skillopt.tracking import tracking_callbacks\n"
        f"cfg = load_config({ENV!r}, {[*SHORT, *ALL]!r})\n"
        "assert len(tracking_callbacks(cfg)) == 3\n"
        "loaded = sorted(m for m in ('mlflow', 'wandb', 'tensorboard') if m in sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_no_tracker_by_default_and_each_by_its_key():
    assert tracking_callbacks(load_config(ENV, SHORT)) == []
    names = [
        cb.backend.name
        for cb in tracking_callbacks(load_config(ENV, [*SHORT, "tracking.wandb.enabled=true"]))
    ]
    assert names == ["wandb"]


def test_an_enabled_tracker_without_its_library_is_refused_before_the_run(monkeypatch):
    monkeypatch.setitem(sys.modules, "mlflow", None)  # how Python blocks an import: not installed
    config = load_config(ENV, [*SHORT, "tracking.mlflow.enabled=true"])
    with pytest.raises(ConfigError, match=r"mlflow is not installed: pip install 'skillopt\[mlflow\]'"):
        tracking_callbacks(config)
