"""Reading a run directory: the one reader behind the WebUI and ``skillopt runs``.

It reads exactly what ``skillopt train`` and ``skillopt eval`` write, through the run
directory's own records (:mod:`skillopt.trainer.rundir`: each file's model, any version
migrated on read), and never writes there, so it can follow a run while it runs. Files the
trainer replaces are replaced atomically; ``results.jsonl`` is appended, so a torn last line is
skipped here (the trainer repairs it on resume). A file that is there but is not its record
reads as absent here; :mod:`controller.rundir.damage` names it, and the status says
``damaged`` (:mod:`controller.rundir.status`).
"""

from __future__ import annotations

import difflib
import functools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from controller.rundir.damage import DamageReport
from controller.rundir.notes import RunNotes, read_notes
from controller.rundir.status import RunStatus, StatusInfo, read_launch, run_status
from skillopt.gate import Interval
from skillopt.logs import redact_text
from skillopt.models.roles import PriceTable
from skillopt.trainer.records import StepRecord
from skillopt.trainer.rundir import (
    ConfigRecord,
    EvalSummary,
    LaunchRecord,
    LiveRecord,
    RecordError,
    ResultRow,
    RunDirectory,
    layout,
    prediction_dir,
    read_rows,
    trace_from_json,
)
from skillopt.trainer.rundir.schema import read_json
from skillopt.trainer.state import RunMode, TrainerState
from skillopt.trainer.summary import FitResult
from skillopt.types import RolloutResult, Usage

__all__ = [
    "DiffLine",
    "RunDir",
    "RunInfo",
    "RunStatus",
    "StatusInfo",
    "diff_lines",
    "is_run_dir",
    "list_runs",
    "run_status",
]

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
T = TypeVar("T")


def _quiet(read: Callable[[], T | None]) -> T | None:
    """``read()``, or ``None`` for a file that is there but is not its record (damage says so)."""
    try:
        return read()
    except RecordError:
        return None


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


@dataclass(frozen=True)
class RunInfo:
    """One line of the runs list."""

    name: str
    path: Path
    kind: str  # train | eval
    status: RunStatus
    pid: int
    stop_requested: bool
    env: str
    agent: str
    optimizer: str
    target: str
    simulated: bool | None
    mode_reason: str
    baseline_score: float | None
    best_score: float | None
    steps_done: int
    total_steps: int
    tokens: int
    cost_usd: float
    started_at: float
    updated_at: float
    hosts: tuple[str, ...] = ()
    #: The live phase while running (baseline, training, epoch_end, test, done, stopped).
    phase: str = ""
    #: 95% interval of ``best_score`` (``[lo, hi]``; None when not recorded).
    best_score_ci95: Interval | None = None
    #: ``evaluation.gate_mode`` (train runs).
    gate_mode: str = ""
    #: The noisy simulation (``run.simulate: noisy``).
    noisy: bool = False
    #: Status ``damaged``: which files, what the directory still proves, what to do.
    damage: DamageReport = field(default_factory=DamageReport)
    #: What a person wrote about the run (``notes.json``): a note, tags, archived (hidden).
    notes: RunNotes = field(default_factory=RunNotes)
    #: Package files the accepted steps changed (``+`` added, ``-`` removed, ``~`` changed;
    #: the last change of each file), e.g. ``("+references/totals.md", "~SKILL.md")``.
    files_changed: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["path"] = str(self.path)
        d["status"] = self.status.value
        d["damage"] = self.damage.to_dict() if self.damage else None
        d["notes"] = self.notes.to_dict()
        d["hosts"] = list(self.hosts)
        d["files_changed"] = list(self.files_changed)
        d["best_score_ci95"] = list(self.best_score_ci95) if self.best_score_ci95 else None
        return d


@dataclass(frozen=True)
class DiffLine:
    """One line of a line diff: ``kind`` is ``same``, ``add``, ``del`` or ``gap`` (elided)."""

    kind: str
    old_no: int | None
    new_no: int | None
    text: str


def diff_lines(old: str, new: str, *, context: int = 3) -> list[DiffLine]:
    """A line diff of two texts with ``context`` unchanged lines around each change."""
    a, b = old.splitlines(), new.splitlines()
    out: list[DiffLine] = []
    for group in difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(context):
        if out:
            out.append(DiffLine("gap", None, None, "…"))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out += [
                    DiffLine("same", i + 1, j + 1, a[i])
                    for i, j in zip(range(i1, i2), range(j1, j2), strict=True)
                ]
                continue
            out += [DiffLine("del", i + 1, None, a[i]) for i in range(i1, i2)]
            out += [DiffLine("add", None, j + 1, b[j]) for j in range(j1, j2)]
    return out


@dataclass
class RunDir:
    """Read-only view of one run directory (or eval directory). Each record is read once per
    view (a page reads the config for every step)."""

    path: Path
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def name(self) -> str:
        return self.path.name

    # -- files -------------------------------------------------------------------------------

    def resolve(self, rel: str) -> Path | None:
        """``rel`` inside this run directory, or None when it would leave it (``..``, an
        absolute path, a symlink pointing out) or names a hidden file."""
        if not rel or "\x00" in rel:
            return None
        parts = Path(rel).parts
        if Path(rel).is_absolute() or any(p in ("..", "") or p.startswith(".") for p in parts):
            return None
        root = self.path.resolve()
        target = (root / rel).resolve()
        return target if target.is_relative_to(root) else None

    def json(self, rel: str) -> Any:
        """The JSON of a file the schema has no record for (a stage's cached output: patches,
        the merged and ranked edits, the apply report), as it is; ``None`` when unreadable."""
        path = self.resolve(rel)
        return _quiet(lambda: read_json(path)) if path else None

    def text(self, rel: str, *, limit: int = 2_000_000) -> str | None:
        """A text file of the run, secret-shaped strings masked."""
        path = self.resolve(rel)
        if path is None or not path.is_file():
            return None
        with open(path, encoding="utf-8", errors="replace") as fh:
            return redact_text(fh.read(limit))

    def exists(self, rel: str) -> bool:
        path = self.resolve(rel)
        return bool(path and path.exists())

    # -- the run's records ---------------------------------------------------------------------

    def status(self, *, deep: bool = False) -> StatusInfo:
        return run_status(self.path, deep=deep)

    @property
    def store(self) -> RunDirectory:
        """The run directory's own reader (``skillopt.trainer.rundir``)."""
        return RunDirectory(self.path, failpoint=None)

    def _once(self, key: str, read: Callable[[], T | None]) -> T | None:
        if key not in self._cache:
            self._cache[key] = _quiet(read)
        return self._cache[key]

    def config(self) -> ConfigRecord | None:
        """``config.json``: the config the run ran with and what it derived (``None``: none yet)."""
        return self._once("config", self.store.config)

    def state(self) -> TrainerState | None:
        """``runtime_state.json`` (not cached: a live page reads it at every push)."""
        return _quiet(self.store.state)

    def history(self) -> list[StepRecord]:
        """The committed step records: ``history.json``, else (damaged) the steps' own records
        up to the last committed step, as ``--resume`` would rebuild it."""
        return self.store.committed_history()

    def summary(self) -> FitResult | None:
        return _quiet(self.store.summary)

    def eval_record(self) -> EvalSummary | None:
        """An eval directory's ``eval_summary.json``."""
        return _quiet(self.store.eval_summary)

    def live(self) -> LiveRecord | None:
        """``live.json``: where the session stands (meaningful while the run is running)."""
        return _quiet(lambda: self.store.record(layout.LIVE, LiveRecord.from_json))

    def launch(self) -> LaunchRecord | None:
        return read_launch(self.store)

    def mode(self) -> RunMode | None:
        """The mode the run ran in: its state's, else its config's (an eval: its summary's)."""
        state, config = self.state(), self.config()
        mode = state.run_mode if state is not None else None
        if mode is None and config is not None:
            mode = config.derived.mode
        ev = self.eval_record() if self.is_eval() else None
        return ev.mode if ev is not None and ev.mode is not None else mode

    def is_eval(self) -> bool:
        launch = self.launch()
        return not self.exists(layout.CONFIG) and (
            self.exists(layout.EVAL_SUMMARY)
            or self.exists(layout.EVAL_CONFIG)
            or (launch is not None and launch.kind == "eval")
        )

    def best_score_ci95(self) -> Interval | None:
        """The best skill's selection interval: the summary's, else the last committed step's."""
        summary = self.summary()
        if summary is not None and summary.best_selection_score_ci95 is not None:
            return summary.best_selection_score_ci95
        hist = self.history()
        return hist[-1].best_score_ci95 if hist else None

    def baseline_score(self) -> float | None:
        """The initial skill's selection score: the summary's, the live status's, else the
        first step's gate's (what the first candidate was compared with)."""
        summary = self.summary()
        if summary is not None and summary.baseline_selection_score is not None:
            return summary.baseline_selection_score
        live = self.live()
        if live is not None and live.baseline_score is not None:
            return live.baseline_score
        hist = self.history()
        return hist[0].selection.current_score_before if hist and hist[0].selection else None

    def usage(self, status: RunStatus | None = None) -> tuple[int, float]:
        """Tokens and cost so far: the live status while running, else the summary, else the
        run state with the config's prices (``status``: the run's, when the caller has it)."""
        status = status or self.status().status
        live = self.live()
        if status is RunStatus.RUNNING and live is not None and live.tokens is not None:
            return live.tokens, live.cost_usd or 0.0
        summary = self.summary()
        # A summary is this session's only when the status came from it (not stale).
        done = (RunStatus.FINISHED, RunStatus.STOPPED, RunStatus.DAMAGED)
        if summary is not None and summary.token_summary and status in done:
            return summary.total_tokens, summary.cost_usd
        state, config = self.state(), self.config()
        if state is None:
            return 0, 0.0
        optimizer, target = state.spent()
        prices = self.prices()
        model = config.config.model if config is not None else None
        cost = (
            prices.cost(model.optimizer, optimizer) + prices.cost(model.target, target)
            if model is not None
            else 0.0
        )
        return optimizer.total_tokens + target.total_tokens, cost

    def info(self, status: StatusInfo | None = None) -> RunInfo:
        """The runs-list line of this run (``status``: the run's, when the caller has it)."""
        st_info = status or self.status()
        running = st_info.status is RunStatus.RUNNING
        config, state, live, launch = self.config(), self.state(), self.live(), self.launch()
        cfg = config.config if config is not None else None
        mode = self.mode()
        tokens, cost = self.usage(st_info.status)
        hosts = set(state.hosts if state is not None else ())
        if running and live is not None:
            hosts |= {h.host or h.address for h in live.hosts}
        kind = "eval" if self.is_eval() else "train"
        ev = self.eval_record() if kind == "eval" else None
        if ev is not None:
            hosts |= set(ev.sandbox_hosts)
        started = [
            t for t in (launch.first_launched_at if launch else None, _mtime(self.path / layout.RUN_ID)) if t
        ]
        updated = [t for t in (_mtime(self.path / layout.LIVE), _mtime(self.path / layout.STATE)) if t]
        total_steps = config.derived.total_steps if config is not None else 0
        return RunInfo(
            name=self.name,
            path=self.path,
            kind=kind,
            status=st_info.status,
            pid=st_info.pid,
            stop_requested=st_info.stop_requested,
            env=cfg.env.name if cfg is not None else launch.env if launch is not None else "",
            agent=cfg.env.agent if cfg is not None else "",
            optimizer=cfg.model.optimizer if cfg is not None else "",
            target=cfg.model.target if cfg is not None else "",
            simulated=mode.simulated if mode is not None else None,
            mode_reason=mode.reason if mode is not None else "",
            baseline_score=self.baseline_score() if kind == "train" else None,
            best_score=(state.best_score if state is not None else None)
            if kind == "train"
            else (ev.hard if ev is not None else None),
            steps_done=state.last_completed_step if state is not None else 0,
            total_steps=total_steps or (live.total_steps if live is not None else 0),
            tokens=tokens,
            cost_usd=cost,
            started_at=min(started) if started else (_mtime(self.path) or 0.0),
            updated_at=max(updated) if updated else (_mtime(self.path) or 0.0),
            hosts=tuple(sorted(h for h in hosts if h)),
            phase=live.phase if running and live is not None else "",
            best_score_ci95=self.best_score_ci95() if kind == "train" else (ev.hard_ci95 if ev else None),
            gate_mode=cfg.evaluation.gate_mode if kind == "train" and cfg is not None else "",
            noisy=mode.noisy if mode is not None else False,
            damage=st_info.damage,
            notes=read_notes(self.path),
            files_changed=self.files_changed() if kind == "train" else (),
        )

    def files_changed(self) -> tuple[str, ...]:
        """The package files the accepted steps changed, by path (the last change wins)."""
        marks = {"added": "+", "removed": "-", "changed": "~"}
        last: dict[str, str] = {}
        for r in self.history():
            if r.accepted and r.proposal is not None:  # accept, accept_new_best
                for c in r.proposal.file_changes:
                    last[str(c["path"])] = marks.get(str(c["status"]), "~")
        return tuple(f"{m}{p}" for p, m in sorted(last.items()))

    # -- steps, rollouts, skills ---------------------------------------------------------------

    def steps(self) -> list[int]:
        root = self.path / layout.STEPS
        if not root.is_dir():
            return []
        return sorted(int(m.group(1)) for p in root.iterdir() if (m := layout.STEP_DIR_RE.match(p.name)))

    def step(self, n: int) -> dict[str, Any]:
        """Everything a step wrote: its record (in its current shape: an older one migrated),
        patches, merged and ranked edits, apply report, the skill before and the candidate, its
        rollout directories."""
        rel = layout.step_dir(n)
        base = self.path / rel
        S = layout.Step
        patches = []
        for pdir in sorted(base.glob(f"**/{S.PATCHES}")):
            for f in sorted(pdir.glob("*.json")):
                data = self.json(str(f.relative_to(self.path)))
                patches.append(
                    {"file": str(f.relative_to(self.path)), **(data if isinstance(data, dict) else {})}
                )
        for probe_file in sorted(base.glob(f"**/{S.PROBE_PATCH}")):
            probe = self.json(str(probe_file.relative_to(self.path)))
            if isinstance(probe, dict) and probe:
                patches.append(
                    {"file": str(probe_file.relative_to(self.path)), "source_type": "probe", **probe}
                )
        record = _quiet(lambda: self.store.step_record(n))
        return {
            "step": n,
            "rel": rel,
            "record": record.to_json() if record is not None else None,
            "patches": patches,
            "merged": self.json(f"{rel}/{S.MERGED}"),
            "ranked": self.json(f"{rel}/{S.RANKED}"),
            "apply_report": self.json(f"{rel}/{S.APPLY_REPORT}"),
            "rewrite": self.json(f"{rel}/{S.REWRITE}") or self.json(f"{rel}/{S.FULL_REWRITE}"),
            "lr_decision": self.json(f"{rel}/{S.LR_DECISION}"),
            "skill_before": self.text(layout.skill_file(n - 1)) if n > 0 else None,
            "candidate": self.text(f"{rel}/{S.CANDIDATE}"),
            "rollout_dirs": self.rollout_dirs(rel),
        }

    def rollout_dirs(self, under: str = "") -> list[str]:
        """Rollout directories (holding ``results.jsonl``) under ``under``, relative to the run."""
        root = self.resolve(under) if under else self.path.resolve()
        if root is None or not root.is_dir():
            return []
        found = sorted(p.parent for p in root.rglob(layout.RESULTS))
        return [str(p.relative_to(self.path.resolve())) for p in found]

    def prices(self) -> PriceTable:
        """The run's price table (its config's ``model.prices``)."""
        config = self.config()
        return PriceTable(prices=config.config.model.price_pairs() if config is not None else {})

    def step_spend(self, record: StepRecord) -> dict[str, Any]:
        """What a committed step spent: the optimizer's tokens (its record) and the target's
        (its rollout rows: the training batch and the selection evaluation), and their cost."""
        config = self.config()
        optimizer = Usage()
        for u in record.tokens.values():
            if isinstance(u, dict):
                optimizer = optimizer + Usage.from_dict(u)
        target = _rows_usage(self.path / layout.step_dir(record.step))
        prices = self.prices()
        cost = (
            prices.cost(config.config.model.optimizer, optimizer)
            + prices.cost(config.config.model.target, target)
            if config is not None
            else 0.0
        )
        return {
            "optimizer_tokens": optimizer.total_tokens,
            "target_tokens": target.total_tokens,
            "cost_usd": round(cost, 6),
        }

    def rows(self, rel: str) -> list[ResultRow]:
        """The rows of a rollout directory (first occurrence of an id wins; a torn line is skipped)."""
        root = self.resolve(rel)
        return read_rows(root) if root is not None else []

    def eval_summary(self, rel: str) -> EvalSummary | None:
        """The evaluation a rollout directory holds, for the rows page: ``<rel>/summary.json``
        (a run's test evaluations) or the ``eval_summary.json`` beside it (an eval directory),
        of any version; ``None`` for a training batch or an unreadable summary."""
        if self.resolve(rel) is None:
            return None
        own = _quiet(lambda: self.store.eval_summary(f"{rel}/{layout.TEST_SUMMARY}"))
        parent = str(Path(rel).parent)
        if own is not None or parent in ("", "."):
            return own
        return _quiet(lambda: self.store.eval_summary(f"{parent}/{layout.EVAL_SUMMARY}"))

    def rollout(self, rel: str, item_id: str) -> tuple[RolloutResult, list[str]] | None:
        """One rollout, typed (row, trace, case reports), and its files relative to the run."""
        row = next((r for r in self.rows(rel) if r.id == item_id), None)
        root = self.resolve(rel)
        if row is None or root is None:
            return None
        pdir = prediction_dir(root, item_id)
        trace_json = _quiet(lambda: read_json(pdir / "trace.json"))
        trace, reports = trace_from_json(trace_json if isinstance(trace_json, dict) else {})
        files = (
            sorted(str(p.relative_to(self.path.resolve())) for p in pdir.rglob("*") if p.is_file())
            if pdir.is_dir()
            else []
        )
        return row.result(trace, reports), files

    def skill_versions(self) -> list[tuple[str, str]]:
        """(label, file relative to the run) of every skill the run wrote, in order."""
        out: list[tuple[str, str]] = []
        skills = self.path / layout.SKILLS
        if skills.is_dir():
            for p in sorted(skills.iterdir()):
                if m := layout.SKILL_FILE_RE.match(p.name):
                    out.append(
                        (f"v{int(m.group(1))} (after step {int(m.group(1))})", f"{layout.SKILLS}/{p.name}")
                    )
        if out:
            out[0] = ("v0 (initial)", out[0][1])
        for n in self.steps():
            candidate = f"{layout.step_dir(n)}/{layout.Step.CANDIDATE}"
            if self.exists(candidate):
                out.append((f"step {n} candidate", candidate))
        for p in sorted((self.path / "slow_update").glob(f"epoch_*/{layout.Epoch.CANDIDATE}")):
            out.append((f"slow update {p.parent.name} candidate", str(p.relative_to(self.path))))
        if self.exists(layout.BEST_SKILL):
            out.append(("best", layout.BEST_SKILL))
        return out

    def skill_package(self, rel: str) -> str:
        """The package folder of the skill version ``rel`` (``skills/skill_v0003.md`` ->
        ``skill_packages/v0003/<name>``, ``best_skill.md`` -> ``best_skill/<name>``), so that
        what is evaluated is the whole package; ``rel`` itself for a run written before
        packages, or a version with no folder (a candidate)."""
        if m := layout.SKILL_FILE_RE.match(Path(rel).name):
            parent = self.path / layout.skill_package_dir(int(m.group(1)))
        elif rel == layout.BEST_SKILL:
            parent = self.path / layout.BEST_SKILL_DIR
        else:
            return rel
        folders = (
            sorted(p for p in parent.iterdir() if p.is_dir() and not p.name.startswith("."))
            if parent.is_dir()
            else []
        )
        return str(folders[0].relative_to(self.path)) if len(folders) == 1 else rel

    def evals(self) -> list[RunInfo]:
        root = self.path / layout.EVALS
        if not root.is_dir():
            return []
        return sorted(
            (RunDir(p).info() for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")),
            key=lambda r: r.started_at,
            reverse=True,
        )

    # -- logs --------------------------------------------------------------------------------

    def log_tail(self, rel: str = layout.TRAIN_LOG, n: int = 200) -> list[str]:
        """The last ``n`` lines of a log of the run (ANSI codes removed, secrets masked)."""
        path = self.resolve(rel)
        if path is None or not path.is_file():
            return []
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 256 * 1024))
            data = fh.read().decode("utf-8", errors="replace")
        lines = data.splitlines()[-n:]
        return [redact_text(_ANSI.sub("", line)) for line in lines]


def _walk_rows_usage(folder: Path) -> Usage:
    total = Usage()
    for path in sorted(folder.rglob(layout.RESULTS)):
        for row in read_rows(path.parent):
            total = total + row.usage
    return total


@functools.lru_cache(maxsize=4096)
def _committed_rows_usage(folder: str, record_stamp: tuple[int, int]) -> Usage:
    return _walk_rows_usage(Path(folder))


def _rows_usage(folder: Path) -> Usage:
    """The target usage of every rollout row of a committed step's folder. A committed step's
    rows are final, so they are read once per record (keyed by its stamp: one stat per step
    per view, not a walk of every step's folders on each push of a live page)."""
    try:
        st = (folder / layout.Step.RECORD).stat()
    except OSError:  # no record (a hand-made or damaged step): read it as it is
        return _walk_rows_usage(folder) if folder.is_dir() else Usage()
    return _committed_rows_usage(str(folder), (st.st_mtime_ns, st.st_size))


def is_run_dir(path: Path) -> bool:
    """Whether ``path`` is a run (or eval) directory: a folder holding one of the files only
    ``skillopt train``/``eval`` or a WebUI launch write (an empty or foreign folder is not)."""
    return (
        path.is_dir() and not path.name.startswith(".") and any((path / m).exists() for m in layout.MARKERS)
    )


def list_runs(runs_dir: Path) -> list[RunDir]:
    """The run directories directly under ``runs_dir`` (newest first)."""
    if not runs_dir.is_dir():
        return []
    runs = [RunDir(p) for p in runs_dir.iterdir() if is_run_dir(p)]
    return sorted(runs, key=lambda r: _mtime(r.path / layout.RUN_ID) or _mtime(r.path) or 0.0, reverse=True)
