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
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import structlog

from skillopt.durable import atomic_write_json, atomic_write_text
from skillopt.errors import SkillOptError
from skillopt.reflection.cache import Slot
from skillopt.skill.package import write_package
from skillopt.skill.packed import PackageFrame
from skillopt.trainer.records import StepRecord
from skillopt.trainer.rundir import layout
from skillopt.trainer.rundir.evalsummary import EvalSummary
from skillopt.trainer.rundir.schema import ConfigRecord, EvalConfigRecord, parse, read_record
from skillopt.trainer.state import TrainerState
from skillopt.trainer.summary import FitResult
from skillopt.trainer.versions import RecordError, json_type
from skillopt.types import SkillVersion

__all__ = ["DirStageCache", "Failpoint", "RunDirectory", "RunDirectoryDamaged", "RunDirectoryFull"]

log = structlog.get_logger("skillopt.trainer.rundir")

T = TypeVar("T")

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
        frame: how the run's skill versions are written as text and read back
            (``skills/skill_vNNNN.md``, the state): made from the run's initial version. A
            reader leaves it out: a package's versions then lack the files the frame holds.
        failpoint: crash injection; by default ``SKILLOPT_FAILPOINT`` when set.
    """

    def __init__(
        self, root: Path, *, frame: PackageFrame | None = None, failpoint: Failpoint | None = _FROM_ENV
    ) -> None:
        self.root = Path(root)
        self.frame = frame or PackageFrame()
        self.failpoint = Failpoint.from_env() if failpoint is _FROM_ENV else failpoint
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

    def save_skill(self, step: int, skill: SkillVersion) -> None:
        """The skill after ``step``: its packed text (``skills/skill_vNNNN.md``) and its whole
        package (``skill_packages/vNNNN/<name>/``, files unchanged since the previous version
        hard-linked)."""
        self.write_text(layout.skill_file(step), self.frame.text(skill))
        previous = self.path(layout.skill_package_dir(step - 1)) / skill.name if step else None
        write_package(skill, self.path(layout.skill_package_dir(step)), link_from=previous)

    def _write_best(self, skill: SkillVersion) -> None:
        self.write_text(layout.BEST_SKILL, skill.content)
        tree = skill.tree_sha256
        if tree != self._best_written or not (self.path(layout.BEST_SKILL_DIR) / skill.name).is_dir():
            write_package(skill, self.path(layout.BEST_SKILL_DIR))
            self._best_written = tree

    def commit(self, state: TrainerState, record: StepRecord | None = None) -> None:
        """Commit the run state (and a new step's record with it). ``runtime_state.json`` is
        written last: until it is, the previous commit stands."""
        if record is not None:
            self.write_json(f"{layout.step_dir(record.step)}/{layout.Step.RECORD}", record.to_json())
        self.write_json(layout.HISTORY, [r.to_json() for r in state.history])
        if state.best_skill is not None:
            self._write_best(state.best_skill)
        self.write_json(layout.STATE, state.to_json(self.frame))

    def commit_progress(self, state: TrainerState) -> None:
        """Commit the progress counters only (a segment of a step, whose outputs are in the
        stage cache): the rest of ``state`` must be as it was at the last :meth:`commit`."""
        self.write_json(layout.STATE, state.to_json(self.frame))

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
        """The JSON in ``rel``, or ``None`` when it is missing or unreadable (the stage cache's
        entries; a record is read with :meth:`record`)."""
        try:
            return json.loads(self.path(rel).read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return None

    def read_text(self, rel: str) -> str | None:
        try:
            return self.path(rel).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None

    def read_skill(self, step: int) -> SkillVersion | None:
        """The skill after ``step`` as it was saved (``None``: never saved, or unreadable)."""
        text = self.read_text(layout.skill_file(step))
        return None if text is None else self.frame.stored(text)

    def skill_texts(self) -> Iterator[str]:
        """Every packed text of a skill the run stored: its versions (``skills/``), its
        candidates (``candidate_skill.md`` of its steps and slow updates) and the state's
        current and best skills. What a selection cache written before versions keyed its
        measurements by (:func:`skillopt.gate.rekey_by_tree`); read as it is asked."""
        paths = [
            *self.root.glob(f"{layout.SKILLS}/*.md"),
            *self.root.glob(f"{layout.STEPS}/*/{layout.Step.CANDIDATE}"),
            *self.root.glob(f"slow_update/*/{layout.Epoch.CANDIDATE}"),
        ]
        for path in sorted(paths):
            text = self.read_text(str(path.relative_to(self.root)))
            if text is not None:
                yield text
        state = self.read_json(layout.STATE)
        if isinstance(state, dict):
            yield from (t for key in ("current_skill", "best_skill") if isinstance(t := state.get(key), str))

    def record(
        self, rel: str, parser: Callable[[Any], T], *, what: str = "", frozen: bool = False
    ) -> T | None:
        """The record in ``rel`` (any version, migrated), ``None`` when there is no such file
        (``frozen``: an immutable record, parsed once per version of the file: :func:`read_record`).

        Raises:
            RecordError: the file is there but unreadable or not that record (the message says
                what is wrong with it).
        """
        return read_record(self.path(rel), parser, what=what, frozen=frozen)

    def config(self) -> ConfigRecord | None:
        """``config.json``. Raises: RecordError: unreadable."""
        return self.record(layout.CONFIG, ConfigRecord.from_json, what="a run's config", frozen=True)

    def state(self) -> TrainerState | None:
        """``runtime_state.json`` without its history. Raises: RecordError: unreadable."""
        return self.record(
            layout.STATE, lambda d: TrainerState.from_json(d, [], self.frame), what="a run state"
        )

    def summary(self) -> FitResult | None:
        """``summary.json``. Raises: RecordError: unreadable."""
        return self.record(layout.SUMMARY, FitResult.from_json, what="a run summary", frozen=True)

    def eval_summary(self, rel: str = layout.EVAL_SUMMARY) -> EvalSummary | None:
        """An evaluation's summary (``eval_summary.json``, or a test rollout dir's
        ``summary.json``). Raises: RecordError: unreadable."""
        return self.record(rel, EvalSummary.from_json, what="an evaluation summary", frozen=True)

    def eval_config(self) -> EvalConfigRecord | None:
        """``eval_config.json`` (an eval directory). Raises: RecordError: unreadable."""
        return self.record(layout.EVAL_CONFIG, EvalConfigRecord.from_json, what="an eval's record")

    def step_record(self, step: int, *, shared: bool = True) -> StepRecord | None:
        """``steps/step_NNNN/step_record.json`` (``shared``: parsed once per version of the
        file, for readers). Raises: RecordError: unreadable."""
        rel = f"{layout.step_dir(step)}/{layout.Step.RECORD}"
        return self.record(rel, StepRecord.from_json, what="a step record", frozen=shared)

    def history_records(self, *, shared: bool = True) -> list[StepRecord] | None:
        """Every record in ``history.json`` (also one past the committed step), ``None`` when
        there is no such file (``shared``: parsed once per version of the file, for readers).

        Raises:
            RecordError: unreadable, or a record in it is.
        """
        records = self.record(layout.HISTORY, _history_json, what="a list of step records", frozen=shared)
        return None if records is None else list(records)

    def load_state(self) -> TrainerState | None:
        """The committed state with its history, ``None`` for a run that never committed.

        A damaged ``history.json`` is rebuilt from the steps' own records (each committed step
        wrote one before the history).

        Raises:
            RunDirectoryDamaged: ``runtime_state.json`` or a committed step's record is
                unreadable (the message names the file and what to do).
        """
        try:
            state = self.state()
        except RecordError as exc:
            raise RunDirectoryDamaged(
                f"{self.path(layout.STATE)} is damaged ({exc}); the run cannot be resumed from it. "
                "Start a new run, or restore the file from a backup"
            ) from None
        if state is None:
            return None
        history = self._history(state.last_completed_step)
        self._repair_records(history)
        state.history = history
        return state

    def _repair_records(self, history: list[StepRecord]) -> None:
        """Rewrite a committed step's unreadable ``step_record.json`` from the history (which
        holds the same record), so a resumed run leaves no damaged file behind."""
        for record in history:
            rel = f"{layout.step_dir(record.step)}/{layout.Step.RECORD}"
            if self.path(rel).exists() and not isinstance(self.read_json(rel), dict):
                log.warning("rundir.step_record_repaired", dir=str(self.root), step=record.step)
                self.write_json(rel, record.to_json())

    def committed_history(self) -> list[StepRecord]:
        """The committed step records, for readers: ``history.json``'s (a record past the
        committed step left out), else, when it is missing or damaged, the steps' own records
        that can be read, as ``--resume`` would rebuild it. Never raises: what cannot be read is left out
        (:mod:`controller.rundir.damage` says what)."""
        try:
            state = self.state()
        except RecordError:
            state = None
        last = state.last_completed_step if state is not None else None
        try:
            records = self.history_records()
        except RecordError:
            records = None
        if records is not None:
            return [r for r in records if last is None or r.step <= last]
        if not last:
            return []
        out = []
        for step in range(1, last + 1):
            try:
                record = self.step_record(step)
            except RecordError:
                continue
            if record is not None:
                out.append(record)
        return out

    def _history(self, last_step: int) -> list[StepRecord]:
        """The committed history ``--resume`` builds on (read afresh, never a reader's copy)."""
        try:
            records = self.history_records(shared=False)
        except RecordError:
            records = None
        if records is not None:
            return [r for r in records if r.step <= last_step]
        if last_step == 0:
            return []
        log.warning("rundir.history_rebuilt", dir=str(self.root), last_step=last_step)
        out = []
        for step in range(1, last_step + 1):
            rel = f"{layout.step_dir(step)}/{layout.Step.RECORD}"
            try:
                record = self.step_record(step, shared=False)
            except RecordError as exc:
                raise RunDirectoryDamaged(
                    f"{self.path(layout.HISTORY)} is damaged and {self.path(rel)} cannot replace it "
                    f"({exc}); the run cannot be resumed"
                ) from exc
            if record is None:
                raise RunDirectoryDamaged(
                    f"{self.path(layout.HISTORY)} is damaged and {self.path(rel)} is missing; "
                    "the run cannot be resumed"
                )
            out.append(record)
        return out


def _history_json(data: Any) -> tuple[StepRecord, ...]:
    """``history.json``: a list of step records.

    Raises:
        RecordError: not a list, or a record in it is not a step record (naming which).
    """
    if not isinstance(data, list):
        raise RecordError(f"holds a JSON {json_type(data)}, not a JSON list")
    records = []
    for i, entry in enumerate(data, 1):
        try:
            records.append(parse(entry, StepRecord.from_json, what="a step record"))
        except RecordError as exc:
            raise RecordError(f"has an entry {i} that {exc}") from None
    return tuple(records)


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
