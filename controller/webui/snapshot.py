"""What the live pages show, as JSON: built from :class:`controller.rundir.reader.RunDir`.

The run page and the runs list render these snapshots in the browser, from the first one
embedded in the page and then from every one pushed over server-sent events, so a page shows
the same thing whether it was just opened or has been following the run for an hour.
:func:`run_signature` is what the event stream watches: it changes whenever a file the
snapshot is built from changes, or the run's lock is taken or dropped.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from controller.rundir.notes import NOTES_NAME
from controller.rundir.reader import RunDir, RunStatus, StatusInfo, list_runs
from skillopt.trainer.rundir import layout

__all__ = ["RunsList", "run_signature", "run_snapshot", "runs_signature", "runs_snapshot"]

_WATCHED = (
    NOTES_NAME,
    layout.LIVE,
    layout.STATE,
    layout.HISTORY,
    layout.SUMMARY,
    layout.EVAL_SUMMARY,
    layout.TRAIN_LOG,
    layout.CONSOLE_LOG,
    layout.LOCK,
    layout.STOP,
    layout.LAUNCH,
    layout.EVALS,
    layout.STEPS,
    layout.SKILLS,
)
_RECORD_KEYS = (
    "step",
    "epoch",
    "tokens",
    "action",
    "gate_reason",
    "gate_mode",
    "gate_test",
    "candidate_gate_score",
    "candidate_gate_score_ci95",
    "current_score",
    "current_score_ci95",
    "current_score_before",
    "current_score_before_ci95",
    "best_score",
    "best_score_ci95",
    "rollout_hard",
    "rollout_n",
    "rollout_n_infra",
    "n_edits_merged",
    "n_edits_ranked",
    "edit_budget",
    "edit_apply_summary",
    "file_changes",
    "script_checks",
    "selection_n_infra",
    "wall_time_s",
)
_SUMMARY_KEYS = (
    "status",
    "best_selection_score",
    "baseline_selection_score",
    "final_selection_score",
    "best_step",
    "baseline_test_hard",
    "test_hard",
    "final_test_hard",
    "total_accepts",
    "total_rejects",
    "total_wall_time_s",
    "cacheable_prefix_share",
    "cacheable_prefix",
)


def _stat(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
        return st.st_mtime_ns, st.st_size
    except OSError:
        return 0, 0


def run_signature(run: RunDir, status: StatusInfo | None = None) -> tuple[Any, ...]:
    """Changes when anything the run's snapshot shows may have changed (``status``: the run's,
    when the caller has it)."""
    st = status or run.status()
    evals = run.path / "evals"
    eval_sigs = (
        tuple(
            (p.name, _stat(p / layout.EVAL_SUMMARY), _stat(p / layout.LOCK)) for p in sorted(evals.iterdir())
        )
        if evals.is_dir()
        else ()
    )
    return (st.status, st.pid, st.stop_requested, *(_stat(run.path / n) for n in _WATCHED), eval_sigs)


def _format_log_line(line: str) -> dict[str, str]:
    try:
        obj = json.loads(line)
    except ValueError:
        return {"time": "", "level": "", "text": line}
    if not isinstance(obj, dict):
        return {"time": "", "level": "", "text": line}
    rest = " ".join(f"{k}={v}" for k, v in obj.items() if k not in ("timestamp", "level", "event"))
    return {
        "time": str(obj.get("timestamp", ""))[11:19],
        "level": str(obj.get("level", "")),
        "text": f"{obj.get('event', '')} {rest}".strip(),
    }


def _pick(data: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """``keys`` of a record's JSON (its current shape), ``None`` for a part it has not (a step
    without a candidate has no selection scores)."""
    return {k: data.get(k) for k in keys}


def run_snapshot(run: RunDir) -> dict[str, Any]:
    """Everything the live run page shows."""
    info = run.info()
    live, state, summary, config = run.live(), run.state(), run.summary(), run.config()
    history = [{**_pick(r.to_json(), _RECORD_KEYS), **run.step_spend(r)} for r in run.history()]
    live_json = live.to_json() if live is not None else {}
    if info.status not in (RunStatus.RUNNING, RunStatus.STARTING):
        # What a live file says about a process that is gone is history, not a present stage.
        live_json |= {"stage": "", "batch": None, "running": 0, "hosts": []}
    return {
        "info": info.to_dict(),
        "live": live_json,
        "history": history,
        "baseline_score": run.baseline_score(),
        "num_epochs": config.config.train.num_epochs if config is not None else None,
        "steps": run.steps(),
        "skills": [{"label": label, "rel": rel} for label, rel in run.skill_versions()],
        "evals": [e.to_dict() for e in run.evals()],
        "log": [_format_log_line(line) for line in run.log_tail(layout.TRAIN_LOG, 80)],
        "console": run.log_tail(layout.CONSOLE_LOG, 60),
        "stop_reason": (summary.stop_reason if summary is not None else "")
        or (state.stop_reason if state is not None else ""),
        "summary": _pick(summary.to_json(), _SUMMARY_KEYS) if summary is not None else None,
        "epoch_stages": dict(state.epoch_stages) if state is not None else {},
    }


def runs_signature(runs_dir: Path) -> tuple[Any, ...]:
    return (_stat(runs_dir), *((r.name, run_signature(r)) for r in list_runs(runs_dir)))


class RunsList:
    """The runs list, each run's line re-read only when its signature changed (a list of many
    finished runs and one live one costs one run's reading per push)."""

    def __init__(self, runs_dir: Path) -> None:
        self.runs_dir = runs_dir
        self._lines: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def snapshot(self) -> dict[str, Any]:
        with self._lock:  # one list shared by every request and stream of the server
            lines: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}
            for run in list_runs(self.runs_dir):
                status = run.status()  # read once for both
                sig = run_signature(run, status)
                cached = self._lines.get(run.name)
                lines[run.name] = cached if cached and cached[0] == sig else (sig, run.info(status).to_dict())
            self._lines = lines
            return {"runs": [line for _, line in lines.values()]}


def runs_snapshot(runs_dir: Path) -> dict[str, Any]:
    return RunsList(runs_dir).snapshot()
