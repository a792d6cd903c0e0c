"""The one owner of a run directory: its writes, its stage cache, its committed state.

Every file the trainer keeps goes through :class:`RunDirectory`, replaced atomically
(:mod:`skillopt.durable`: a crash leaves the old file or the new one, never a torn one; the
rollout rows are appended by :mod:`.results`). The state is committed in a fixed order (the
step's record, ``history.json``, ``best_skill.md`` and ``best_skill/<name>/``, then ``runtime_state.json``, the commit
point), so a crash between two writes leaves at most an extra history record, which loading
drops. Readers (the WebUI, ``skillopt runs``, ``--resume``) use the read side, which
never writes.

Crash injection (the resume tests): a :class:`Failpoint` makes the process crash just before
the n-th write of a file of a given name. ``SKILLOPT_FAILPOINT="<name>:<n>"`` does it for a
whole process (it then exits with status 137, as if killed); tests in one process pass their
own ``Failpoint`` that raises.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import structlog

from skillopt.durable import atomic_write_json, atomic_write_text
from skillopt.errors import SkillOptError
from skillopt.reflection.cache import Slot
from skillopt.skill.package import write_package
from skillopt.skill.packed import PackageFrame
from skillopt.trainer.records import StepRecord
from skillopt.trainer.rundir import layout
from skillopt.trainer.state import TrainerState

__all__ = ["DirStageCache", "Failpoint", "RunDirectory", "RunDirectoryDamaged", "RunDirectoryFull"]

log = structlog.get_logger("skillopt.trainer.rundir")

#: Key under which a stage-cache entry records what it was made from.
CACHE_KEY_FIELD = "cache_key"


class RunDirectoryDamaged(SkillOptError):
    """A file the run needs is unreadable (truncated, not JSON, wrong shape)."""


class RunDirectoryFull(SkillOptError):
    """The run directory's filesystem has no space left (ENOSPC, or the quota): the run stopped
    at a write, which left the old file (atomic writes) or no half record (appends)."""

    @classmethod
    def from_os_error(cls, root: Path, exc: OSError) -> RunDirectoryFull:
        """The error for ``exc`` (a disk-full ``OSError``) met while writing into ``root``."""
        what = f" (writing {exc.filename})" if exc.filename else ""
        return cls(
            f"no space left on the filesystem of the run directory {root}{what}: the run stopped "
            "there, every file it wrote is whole. Free space on that filesystem first"
        )


def _exit_as_killed() -> None:
    os._exit(137)


class Failpoint:
    """Crash just before the ``n``-th write of a file named ``name``.

    Args:
        crash: what crashing means (default: exit with status 137 at once, as ``kill -9``).
    """

    def __init__(self, name: str, n: int, *, crash: Callable[[], Any] = _exit_as_killed) -> None:
        self.name, self.n, self.crash = name, n, crash
        self.hits = 0

    @classmethod
    def from_env(cls) -> Failpoint | None:
        """The process-wide failpoint of ``SKILLOPT_FAILPOINT="<name>:<n>"``, if set."""
        name, _, n = os.environ.get("SKILLOPT_FAILPOINT", "").partition(":")
        return cls(name, int(n)) if name and n.isdigit() else None

    def check(self, path: Path) -> None:
        if path.name == self.name:
            self.hits += 1
            if self.hits == self.n:
                self.crash()


_FROM_ENV: Any = object()


class RunDirectory:
    """A run directory, for writing (the trainer) and reading (everyone).

    Args:
        root: the directory (created on the first write, never by reading).
        failpoint: crash injection; by default ``SKILLOPT_FAILPOINT`` when set.
    """

    def __init__(self, root: Path, *, failpoint: Failpoint | None = _FROM_ENV) -> None:
        self.root = Path(root)
        self.failpoint = Failpoint.from_env() if failpoint is _FROM_ENV else failpoint
        #: The package the run's skill texts (SKILL.md bodies) live in; the trainer sets it.
        self.frame = PackageFrame()
        self._best_written = ""  # tree hash of the package in best_skill/, written once each

    def path(self, rel: str = "") -> Path:
        return self.root / rel if rel else self.root

    # -- writing ---------------------------------------------------------------------------------

    def _check(self, path: Path) -> None:
        if self.failpoint is not None:
            self.failpoint.check(path)

    def write_json(self, rel: str, data: Any) -> None:
        path = self.path(rel)
        self._check(path)
        atomic_write_json(path, data)

    def write_text(self, rel: str, text: str) -> None:
        path = self.path(rel)
        self._check(path)
        atomic_write_text(path, text)

    def save_skill(self, step: int, text: str) -> None:
        """The skill after ``step``: its text (``skills/skill_vNNNN.md``) and its whole package
        (``skill_packages/vNNNN/<name>/``, files unchanged since the previous version hard-linked)."""
        self.write_text(layout.skill_file(step), text)
        previous = self.path(layout.skill_package_dir(step - 1)) / self.frame.name if step else None
        write_package(self.frame.spec(text), self.path(layout.skill_package_dir(step)), link_from=previous)

    def _write_best(self, text: str) -> None:
        spec = self.frame.spec(text)
        self.write_text(layout.BEST_SKILL, spec.content)
        tree = spec.tree_sha256
        if tree != self._best_written or not (self.path(layout.BEST_SKILL_DIR) / spec.name).is_dir():
            write_package(spec, self.path(layout.BEST_SKILL_DIR))
            self._best_written = tree

    def commit(self, state: TrainerState, record: StepRecord | None = None) -> None:
        """Commit the run state (and a new step's record with it). ``runtime_state.json`` is
        written last: until it is, the previous commit stands."""
        if record is not None:
            self.write_json(f"{layout.step_dir(record.step)}/{layout.Step.RECORD}", record.to_json())
        self.write_json(layout.HISTORY, [r.to_json() for r in state.history])
        self._write_best(state.best_skill)
        self.write_json(layout.STATE, state.to_json())

    def commit_progress(self, state: TrainerState) -> None:
        """Commit the progress counters only (a segment of a step, whose outputs are in the
        stage cache): the rest of ``state`` must be as it was at the last :meth:`commit`."""
        self.write_json(layout.STATE, state.to_json())

    # -- the stage cache -------------------------------------------------------------------------

    def stage_cache(self, under: str) -> DirStageCache:
        """The stage cache of a folder of the run (``steps/step_0001/patches`` ...)."""
        return DirStageCache(self, under)

    def slot(self, under: str, name: str) -> Slot:
        """One named entry of the stage cache of ``under``."""
        return Slot(self.stage_cache(under), name)

    # -- reading (never writes) --------------------------------------------------------------------

    def exists(self, rel: str) -> bool:
        return self.path(rel).exists()

    def read_json(self, rel: str) -> Any | None:
        """The JSON in ``rel``, or ``None`` when it is missing or unreadable."""
        try:
            return json.loads(self.path(rel).read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return None

    def read_text(self, rel: str) -> str | None:
        try:
            return self.path(rel).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None

    def read_skill(self, step: int) -> str | None:
        return self.read_text(layout.skill_file(step))

    def load_state(self) -> TrainerState | None:
        """The committed state with its history, ``None`` for a run that never committed.

        A damaged ``history.json`` is rebuilt from the steps' own records (each committed step
        wrote one before the history).

        Raises:
            RunDirectoryDamaged: ``runtime_state.json`` or a committed step's record is
                unreadable (the message names the file and what to do).
        """
        path = self.path(layout.STATE)
        if not path.exists():
            return None
        data = self.read_json(layout.STATE)
        if not isinstance(data, dict) or not isinstance(data.get("last_completed_step", 0), int):
            raise RunDirectoryDamaged(
                f"{path} is damaged (not a run state); the run cannot be resumed from it. "
                "Start a new run, or restore the file from a backup"
            )
        last = int(data.get("last_completed_step", 0))
        history = self._history(last)
        self._repair_records(history)
        return TrainerState.from_json(data, history)

    def _repair_records(self, history: list[StepRecord]) -> None:
        """Rewrite a committed step's unreadable ``step_record.json`` from the history (which
        holds the same record), so a resumed run leaves no damaged file behind."""
        for record in history:
            rel = f"{layout.step_dir(record.step)}/{layout.Step.RECORD}"
            if self.path(rel).exists() and not isinstance(self.read_json(rel), dict):
                log.warning("rundir.step_record_repaired", dir=str(self.root), step=record.step)
                self.write_json(rel, record.to_json())

    def committed_history(self) -> list[dict[str, Any]]:
        """The committed step records of ``history.json`` as JSON (what the WebUI and
        ``skillopt runs`` show; a record past the committed step is left out)."""
        hist = self.read_json(layout.HISTORY)
        if not isinstance(hist, list):
            return []
        state = self.read_json(layout.STATE)
        last = state.get("last_completed_step") if isinstance(state, dict) else None
        return [r for r in hist if isinstance(r, dict) and (last is None or r.get("step", 0) <= last)]

    def _history(self, last_step: int) -> list[StepRecord]:
        raw = self.read_json(layout.HISTORY)
        if isinstance(raw, list):
            try:
                return [StepRecord.from_json(r) for r in raw if int(r["step"]) <= last_step]
            except (KeyError, TypeError, ValueError):
                pass
        if last_step == 0:
            return []
        log.warning("rundir.history_rebuilt", dir=str(self.root), last_step=last_step)
        records = []
        for step in range(1, last_step + 1):
            rel = f"{layout.step_dir(step)}/{layout.Step.RECORD}"
            try:
                records.append(StepRecord.from_json(self.read_json(rel)))  # type: ignore[arg-type]  # not a dict: from_json raises TypeError, caught below
            except (KeyError, TypeError, ValueError) as exc:
                raise RunDirectoryDamaged(
                    f"{self.path(layout.HISTORY)} is damaged and {self.path(rel)} cannot replace it "
                    f"({type(exc).__name__}); the run cannot be resumed"
                ) from exc
        return records


class DirStageCache:
    """:class:`~skillopt.reflection.cache.StageCache` over a folder of the run: entry ``name``
    is the file ``<under>/<name>``, holding the payload and the key it was made from."""

    def __init__(self, run: RunDirectory, under: str) -> None:
        self.run, self.under = run, under

    def _rel(self, name: str) -> str:
        return f"{self.under}/{name}" if self.under else name

    def load(self, name: str, key: str) -> Mapping[str, Any] | None:
        data = self.run.read_json(self._rel(name))
        if isinstance(data, dict) and data.get(CACHE_KEY_FIELD) == key:
            return data
        return None

    def save(self, name: str, key: str, payload: Mapping[str, Any]) -> None:
        self.run.write_json(self._rel(name), {CACHE_KEY_FIELD: key, **payload})
