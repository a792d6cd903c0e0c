"""Starting ``skillopt train`` / ``skillopt eval`` from the WebUI: the CLI itself, as a child.

A run launched from the page is the same thing as one started in a terminal: the page only
writes the arguments. The child gets its own session (closing the UI does not stop it), the
UI's environment (provider keys reach the run the way they reach a terminal run, never the
page), and ``console.log`` in its run directory as stdout and stderr. ``launch.json`` (a
:class:`~skillopt.trainer.rundir.LaunchRecord`) records the argv and pid, which
:func:`controller.rundir.status.run_status` uses until the child holds the run's lock. The
arguments are the ones the page checked first with the CLI's own parser and loader
(:func:`controller.cli.parse_args`, ``controller.commands.train.load``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import structlog

from skillopt.durable import atomic_write_json
from skillopt.trainer.rundir import LaunchRecord, RecordError, RunDirectory, layout

__all__ = ["Launcher", "eval_args", "resume_args", "train_args"]

log = structlog.get_logger("skillopt.controller.webui")

_CLI = [sys.executable, "-m", "controller.cli"]


def train_args(config: str, overrides: list[str], out: Path) -> list[str]:
    """``skillopt train --config CONFIG --out OUT --set ...`` (the arguments after ``skillopt``)."""
    args = ["train", "--config", config, "--out", str(out)]
    for item in overrides:
        args += ["--set", item]
    return args


def resume_args(run_dir: Path, overrides: list[str], *, simulate: str) -> list[str]:
    """``skillopt train --resume RUN --simulate MODE --set ...``."""
    args = ["train", "--resume", str(run_dir), "--simulate", simulate]
    for item in overrides:
        args += ["--set", item]
    return args


def eval_args(run_dir: Path, skill: Path, split: str, out: Path) -> list[str]:
    """``skillopt eval --run RUN``: the run's own config and mode (the CLI reads them)."""
    return ["eval", "--run", str(run_dir), "--skill", str(skill), "--split", split, "--out", str(out)]


class Launcher:
    """Starts CLI children and reaps them (a reaped child is not mistaken for a live one)."""

    def __init__(self) -> None:
        self._children: dict[int, subprocess.Popen[bytes]] = {}
        self._lock = threading.Lock()

    def start(self, run_dir: Path, args: list[str], *, kind: str, env_name: str = "") -> int:
        """Start ``skillopt ARGS...`` for ``run_dir``; returns the child's pid."""
        run_dir.mkdir(parents=True, exist_ok=True)
        try:
            previous = RunDirectory(run_dir, failpoint=None).record(layout.LAUNCH, LaunchRecord.from_json)
        except RecordError:
            previous = None
        argv = [*_CLI, *args]
        launched_at = time.time()
        console = open(run_dir / layout.CONSOLE_LOG, "ab")  # noqa: SIM115 - handed to the child
        try:
            console.write(f"\n== {time.strftime('%Y-%m-%d %H:%M:%S')} webui: {' '.join(argv[2:])}\n".encode())
            console.flush()
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                start_new_session=True,
            )
        finally:
            console.close()
        record = LaunchRecord(
            kind=kind,
            env=env_name or (previous.env if previous is not None else ""),
            argv=tuple(argv[2:]),
            pid=proc.pid,
            launched_at=launched_at,
            first_launched_at=(previous.first_launched_at if previous is not None else 0.0) or launched_at,
        )
        atomic_write_json(run_dir / layout.LAUNCH, record.to_json())
        with self._lock:
            self._children[proc.pid] = proc
        threading.Thread(target=self._reap, args=(proc,), daemon=True, name=f"reap-{proc.pid}").start()
        log.info("webui.launched", run_dir=str(run_dir), pid=proc.pid, kind=kind)
        return proc.pid

    def _reap(self, proc: subprocess.Popen[bytes]) -> None:
        code = proc.wait()
        with self._lock:
            self._children.pop(proc.pid, None)
        log.info("webui.child_exited", pid=proc.pid, code=code)

    def running(self) -> list[int]:
        with self._lock:
            return sorted(self._children)
