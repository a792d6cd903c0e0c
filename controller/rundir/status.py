"""A run's status, from its directory alone (:func:`run_status`).

The lock held → ``running``; a ``summary.json`` newer than the last session's start →
``finished`` (status ``complete``) or ``stopped`` (an eval: its ``eval_summary.json`` →
``finished``); launched from the WebUI moments ago and not locked yet → ``starting``; not
running and a file it wrote unreadable → ``damaged`` (:mod:`controller.rundir.damage`);
anything else → ``failed`` (crashed, killed, or refused at startup: ``console.log`` says why).
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, field
from pathlib import Path

from controller.rundir.damage import DamageReport
from controller.rundir.damage import inspect as inspect_damage
from controller.rundir.lock import LOCK_NAME, LockHolder, lock_holder, read_stop_request
from skillopt.trainer.rundir import LaunchRecord, RecordError, RunDirectory, layout

__all__ = ["RunStatus", "StatusInfo", "read_launch", "run_status"]


class RunStatus(enum.StrEnum):
    STARTING = "starting"  # launched from the WebUI, the process has not taken the lock yet
    RUNNING = "running"  # the lock is held
    FINISHED = "finished"  # summary.json of this session says complete (eval: eval_summary.json)
    STOPPED = "stopped"  # summary.json of this session says stopped (a stop or a budget)
    DAMAGED = "damaged"  # not running, and a file it wrote cannot be read (controller.rundir.damage)
    FAILED = "failed"  # none of the above: crashed, killed, or refused at startup


@dataclass(frozen=True)
class StatusInfo:
    status: RunStatus
    pid: int = 0
    stop_requested: bool = False
    #: When the current (or last) session started, seconds since the epoch (0 = unknown).
    session_started_at: float = 0.0
    #: What is damaged (status ``damaged``); empty otherwise.
    damage: DamageReport = field(default_factory=DamageReport)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is not alive (its parent has not reaped it yet).
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


def read_launch(store: RunDirectory) -> LaunchRecord | None:
    """The WebUI's ``launch.json`` of the run, ``None`` when it has none (or an unreadable one:
    a launch record is the WebUI's note, not part of the run)."""
    try:
        return store.record(layout.LAUNCH, LaunchRecord.from_json)
    except RecordError:
        return None


def run_status(path: Path, *, deep: bool = False) -> StatusInfo:
    """The status of the run (or eval) in ``path``, from its files and its lock (``deep``:
    check every committed step's record for damage, not only the last one's)."""
    holder = lock_holder(path)
    if holder is not None:
        return StatusInfo(
            RunStatus.RUNNING,
            pid=holder.pid,
            stop_requested=read_stop_request(path, holder.pid) is not None,
            session_started_at=holder.started_at,
        )
    last = LockHolder.read(path / LOCK_NAME)
    started = last.started_at if last else 0.0
    store = RunDirectory(path, failpoint=None)
    launch = read_launch(store)
    if launch is not None and launch.launched_at > started:  # this launch's process
        state = RunStatus.STARTING if launch.pid and _alive(launch.pid) else RunStatus.FAILED
        return StatusInfo(state, pid=launch.pid, session_started_at=launch.launched_at)
    report = inspect_damage(path, deep=deep)
    if report:
        return StatusInfo(
            RunStatus.DAMAGED, pid=last.pid if last else 0, session_started_at=started, damage=report
        )
    try:  # readable (damage would have said otherwise), unless replaced since
        summary = store.summary() if _mtime(path / layout.SUMMARY) >= started else None
    except RecordError:
        summary = None
    if summary is not None:
        status = RunStatus.STOPPED if summary.status == "stopped" else RunStatus.FINISHED
        return StatusInfo(status, session_started_at=started)
    if store.exists(layout.EVAL_SUMMARY) and _mtime(path / layout.EVAL_SUMMARY) >= started:
        return StatusInfo(RunStatus.FINISHED, session_started_at=started)
    return StatusInfo(RunStatus.FAILED, pid=last.pid if last else 0, session_started_at=started)
