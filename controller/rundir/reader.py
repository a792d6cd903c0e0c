"""Reading a run directory: the one reader behind the WebUI and ``skillopt runs``.

It reads exactly what ``skillopt train`` and ``skillopt eval`` write (layout in the README's
"Run directory" section and reference §1.7) and never writes there, so it can follow a run
while it runs. Files the trainer replaces are replaced atomically; ``results.jsonl`` is
appended, so a torn last line is skipped here (the trainer repairs it on resume).

Status comes from the directory alone (:func:`run_status`): the lock held → ``running``; a
``summary.json`` newer than the last session's start → ``finished`` (status ``complete``) or
``stopped``; launched from the WebUI moments ago and not locked yet → ``starting``; anything
else → ``failed`` (crashed, killed, or refused at startup: ``console.log`` says why).
"""

from __future__ import annotations

import difflib
import enum
import functools
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.rundir.damage import DamageReport
from controller.rundir.damage import inspect as inspect_damage
from controller.rundir.live import LIVE_NAME
from controller.rundir.lock import LOCK_NAME, LockHolder, lock_holder, read_stop_request
from controller.rundir.notes import RunNotes, read_notes
from skillopt.logs import redact_text
from skillopt.models.roles import PriceTable
from skillopt.trainer.evaluation import EvalSummary
from skillopt.trainer.rundir import (
    RunDirectory,
    layout,
    prediction_dir,
    read_result_lines,
    row_from_json,
    trace_from_json,
)
from skillopt.types import RolloutResult, Usage

__all__ = [
    "LAUNCH_NAME",
    "DiffLine",
    "RunDir",
    "RunInfo",
    "RunStatus",
    "diff_lines",
    "is_run_dir",
    "list_runs",
    "run_status",
]

#: Written by the WebUI when it starts a process in a run directory (argv, pid, time).
LAUNCH_NAME = layout.LAUNCH
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class RunStatus(enum.StrEnum):
    STARTING = "starting"  # launched from the WebUI, the process has not taken the lock yet
    RUNNING = "running"  # the lock is held
    FINISHED = "finished"  # summary.json of this session says complete (eval: eval_summary.json)
    STOPPED = "stopped"  # summary.json of this session says stopped (a stop or a budget)
    DAMAGED = "damaged"  # not running, and a file it wrote cannot be read (controller.rundir.damage)
    FAILED = "failed"  # none of the above: crashed, killed, or refused at startup


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


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


@dataclass(frozen=True)
class StatusInfo:
    status: RunStatus
    pid: int = 0
    stop_requested: bool = False
    #: When the current (or last) session started, seconds since the epoch (0 = unknown).
    session_started_at: float = 0.0
    #: What is damaged (status ``damaged``); empty otherwise.
    damage: DamageReport = field(default_factory=DamageReport)


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
    launch = _json(path / LAUNCH_NAME) or {}
    launched_at = float(launch.get("launched_at") or 0.0)
    if launched_at > started:  # launched after the last session began: this launch's process
        pid = int(launch.get("pid") or 0)
        state = RunStatus.STARTING if pid and _alive(pid) else RunStatus.FAILED
        return StatusInfo(state, pid=pid, session_started_at=launched_at)
    report = inspect_damage(path, deep=deep)
    if report:
        return StatusInfo(
            RunStatus.DAMAGED, pid=last.pid if last else 0, session_started_at=started, damage=report
        )
    for name in (layout.SUMMARY, layout.EVAL_SUMMARY):
        summary = _json(path / name)
        if isinstance(summary, dict) and (_mtime(path / name) or 0.0) >= started:
            if summary.get("status", "complete") == "stopped":
                return StatusInfo(RunStatus.STOPPED, session_started_at=started)
            return StatusInfo(RunStatus.FINISHED, session_started_at=started)
    return StatusInfo(RunStatus.FAILED, pid=last.pid if last else 0, session_started_at=started)


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
    best_score_ci95: tuple[float, float] | None = None
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


def _pair(value: Any) -> tuple[float, float] | None:
    return (float(value[0]), float(value[1])) if isinstance(value, list) and len(value) == 2 else None


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
    """Read-only view of one run directory (or eval directory)."""

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
        path = self.resolve(rel)
        return _json(path) if path else None

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

    # -- the run -----------------------------------------------------------------------------

    def status(self, *, deep: bool = False) -> StatusInfo:
        return run_status(self.path, deep=deep)

    @property
    def store(self) -> RunDirectory:
        """The run directory's own reader (``skillopt.trainer.rundir``)."""
        return RunDirectory(self.path, failpoint=None)

    def config(self) -> dict[str, Any]:
        if "config" not in self._cache:  # read once per view (a page reads it for every step)
            self._cache["config"] = _dict(self.store.read_json(layout.CONFIG))
        return self._cache["config"]

    def state(self) -> dict[str, Any]:
        return _dict(self.store.read_json(layout.STATE))

    def history(self) -> list[dict[str, Any]]:
        """The committed step records: ``history.json``, else (damaged) the steps' own records
        up to the last committed step, as ``--resume`` would rebuild it."""
        hist = self.store.committed_history()
        if hist or isinstance(self.store.read_json(layout.HISTORY), list):
            return hist
        last = self.state().get("last_completed_step")
        if not isinstance(last, int):
            return []
        records = (self.json(f"{layout.step_dir(n)}/{layout.Step.RECORD}") for n in range(1, last + 1))
        return [r for r in records if isinstance(r, dict)]

    def summary(self) -> dict[str, Any] | None:
        data = self.store.read_json(layout.SUMMARY)
        return data if isinstance(data, dict) else None

    def live(self) -> dict[str, Any] | None:
        return self.json(LIVE_NAME)

    def launch(self) -> dict[str, Any]:
        return self.json(LAUNCH_NAME) or {}

    def is_eval(self) -> bool:
        return not self.exists(layout.CONFIG) and (
            self.exists(layout.EVAL_SUMMARY)
            or self.exists(layout.EVAL_CONFIG)
            or self.launch().get("kind") == "eval"
        )

    def best_score_ci95(self) -> tuple[float, float] | None:
        """The best skill's selection interval: the summary's, else the last committed step's."""
        summary = self.summary() or {}
        value = summary.get("best_selection_score_ci95")
        if value is None:
            hist = self.history()
            value = hist[-1].get("best_score_ci95") if hist else None
        return _pair(value)

    def baseline_score(self) -> float | None:
        summary = self.summary() or {}
        if summary.get("baseline_selection_score") is not None:
            return summary["baseline_selection_score"]
        live = self.live() or {}
        if live.get("baseline_score") is not None:
            return live["baseline_score"]
        hist = self.history()
        return hist[0].get("current_score_before") if hist else None

    def usage(self, status: RunStatus | None = None) -> tuple[int, float]:
        """Tokens and cost so far: the live status while running, else the summary, else the
        run state with the config's prices (``status``: the run's, when the caller has it)."""
        live = self.live() or {}
        status = status or self.status().status
        if status is RunStatus.RUNNING and "tokens" in live:
            return int(live["tokens"]), float(live.get("cost_usd") or 0.0)
        summary = self.summary()
        # A summary is this session's only when the status came from it (not stale).
        done = (RunStatus.FINISHED, RunStatus.STOPPED, RunStatus.DAMAGED)
        if summary and summary.get("token_summary") and status in done:
            return int(summary["token_summary"]["_total"]["total_tokens"]), float(
                summary.get("cost_usd", 0.0)
            )
        st, model = self.state(), self.config().get("model", {})
        prices = self.prices()
        tokens, cost = 0, 0.0
        for key, name in (("usage", model.get("optimizer", "")), ("target_usage", model.get("target", ""))):
            total = Usage()
            for u in (st.get(key) or {}).values():
                total = total + Usage.from_dict(u)
            tokens += total.total_tokens
            cost += prices.cost(name, total)
        return tokens, cost

    def info(self) -> RunInfo:
        """The runs-list line of this run."""
        st_info = self.status()
        cfg, st, live = self.config(), self.state(), self.live() or {}
        derived = cfg.get("derived", {})
        mode = st.get("mode") or derived.get("mode") or {}
        tokens, cost = self.usage(st_info.status)
        hosts = set(st.get("hosts") or [])
        hosts |= {
            h.get("host") or h.get("address")
            for h in live.get("hosts") or []
            if st_info.status is RunStatus.RUNNING
        }
        kind = "eval" if self.is_eval() else "train"
        eval_summary = self.json(layout.EVAL_SUMMARY) or {}
        if kind == "eval" and eval_summary:
            mode = eval_summary.get("mode") or mode
            hosts |= set(eval_summary.get("sandbox_hosts") or [])
        started = [
            t for t in (self.launch().get("first_launched_at"), _mtime(self.path / layout.RUN_ID)) if t
        ]
        updated = [t for t in (_mtime(self.path / LIVE_NAME), _mtime(self.path / layout.STATE)) if t]
        return RunInfo(
            name=self.name,
            path=self.path,
            kind=kind,
            status=st_info.status,
            pid=st_info.pid,
            stop_requested=st_info.stop_requested,
            env=cfg.get("env", {}).get("name", "") or self.launch().get("env", ""),
            agent=cfg.get("env", {}).get("agent", ""),
            optimizer=cfg.get("model", {}).get("optimizer", ""),
            target=cfg.get("model", {}).get("target", ""),
            simulated=mode.get("simulated") if mode else None,
            mode_reason=str(mode.get("reason", "")) if mode else "",
            baseline_score=self.baseline_score() if kind == "train" else None,
            best_score=st.get("best_score") if kind == "train" else eval_summary.get("hard"),
            steps_done=int(st.get("last_completed_step") or 0),
            total_steps=int(derived.get("total_steps") or live.get("total_steps") or 0),
            tokens=tokens,
            cost_usd=cost,
            started_at=min(started) if started else (_mtime(self.path) or 0.0),
            updated_at=max(updated) if updated else (_mtime(self.path) or 0.0),
            hosts=tuple(sorted(h for h in hosts if h)),
            phase=str(live.get("phase", "")) if st_info.status is RunStatus.RUNNING else "",
            best_score_ci95=self.best_score_ci95()
            if kind == "train"
            else _pair(eval_summary.get("hard_ci95")),
            gate_mode=str(cfg.get("evaluation", {}).get("gate_mode", "strict")) if kind == "train" else "",
            noisy=bool(mode.get("noisy")) if mode else False,
            damage=st_info.damage,
            notes=read_notes(self.path),
            files_changed=self.files_changed() if kind == "train" else (),
        )

    def files_changed(self) -> tuple[str, ...]:
        """The package files the accepted steps changed, by path (the last change wins)."""
        marks = {"added": "+", "removed": "-", "changed": "~"}
        last: dict[str, str] = {}
        for r in self.history():
            if str(r.get("action", "")).startswith("accept"):  # accept, accept_new_best
                for c in r.get("file_changes") or ():
                    last[str(c.get("path"))] = marks.get(str(c.get("status")), "~")
        return tuple(f"{m}{p}" for p, m in sorted(last.items()))

    # -- steps, rollouts, skills ---------------------------------------------------------------

    def steps(self) -> list[int]:
        root = self.path / layout.STEPS
        if not root.is_dir():
            return []
        return sorted(int(m.group(1)) for p in root.iterdir() if (m := layout.STEP_DIR_RE.match(p.name)))

    def step(self, n: int) -> dict[str, Any]:
        """Everything a step wrote: record, patches, merged and ranked edits, apply report,
        the skill before and the candidate, its rollout directories."""
        rel = layout.step_dir(n)
        base = self.path / rel
        S = layout.Step
        patches = []
        for pdir in sorted(base.glob(f"**/{S.PATCHES}")):
            for f in sorted(pdir.glob("*.json")):
                data = _json(f) or {}
                patches.append({"file": str(f.relative_to(self.path)), **data})
        for probe_file in sorted(base.glob(f"**/{S.PROBE_PATCH}")):
            probe = _json(probe_file)
            if probe:
                patches.append(
                    {"file": str(probe_file.relative_to(self.path)), "source_type": "probe", **probe}
                )
        before = self.text(layout.skill_file(n - 1)) if n > 0 else None
        return {
            "step": n,
            "rel": rel,
            "record": self.json(f"{rel}/{S.RECORD}"),
            "patches": patches,
            "merged": self.json(f"{rel}/{S.MERGED}"),
            "ranked": self.json(f"{rel}/{S.RANKED}"),
            "apply_report": self.json(f"{rel}/{S.APPLY_REPORT}"),
            "rewrite": self.json(f"{rel}/{S.REWRITE}") or self.json(f"{rel}/{S.FULL_REWRITE}"),
            "lr_decision": self.json(f"{rel}/{S.LR_DECISION}"),
            "skill_before": before,
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
        """The run's price table (its config's ``model.prices``; read once per view)."""
        if "prices" not in self._cache:
            model = self.config().get("model", {})
            self._cache["prices"] = PriceTable(
                prices={
                    m: (p["input"], p["output"], p.get("cached_input"), p.get("cache_write"))
                    for m, p in (model.get("prices") or {}).items()
                }
            )
        return self._cache["prices"]

    def step_spend(self, record: dict[str, Any]) -> dict[str, Any]:
        """What a committed step spent: the optimizer's tokens (its record) and the target's
        (its rollout rows: the training batch and the selection evaluation), and their cost."""
        model = self.config().get("model", {})
        optimizer = Usage()
        for u in (record.get("tokens") or {}).values():
            if isinstance(u, dict):
                optimizer = optimizer + Usage.from_dict(u)
        step = record.get("step")
        target = _rows_usage(self.path / layout.step_dir(int(step))) if isinstance(step, int) else Usage()
        prices = self.prices()
        cost = prices.cost(model.get("optimizer", ""), optimizer) + prices.cost(
            model.get("target", ""), target
        )
        return {
            "optimizer_tokens": optimizer.total_tokens,
            "target_tokens": target.total_tokens,
            "cost_usd": round(cost, 6),
        }

    def rows(self, rel: str) -> list[dict[str, Any]]:
        """The rows of a rollout directory (first occurrence of an id wins; a torn line is skipped)."""
        root = self.resolve(rel)
        return read_result_lines(root) if root is not None else []

    def eval_summary(self, rel: str) -> dict[str, Any] | None:
        """The evaluation a rollout directory holds, for the rows page: ``hard``/``soft`` with
        their intervals, ``n`` (items), ``n_infra``, ``categories`` (name, total, hard,
        interval), ``skill``, ``split`` and the cacheable prefix share. From ``<rel>/summary.json``
        (a run's test evaluations) or the ``eval_summary.json`` beside it (an eval directory),
        of any version (:class:`~skillopt.trainer.evaluation.EvalSummary`); ``None`` for a
        training batch or an unreadable summary."""
        own = self.json(f"{rel}/{layout.TEST_SUMMARY}")
        parent = str(Path(rel).parent)
        outer = self.json(f"{parent}/{layout.EVAL_SUMMARY}") if parent not in ("", ".") else None
        data = own if isinstance(own, dict) else outer if isinstance(outer, dict) else None
        if data is None:
            return None
        try:
            s = EvalSummary.from_json(data)
        except (KeyError, TypeError, ValueError):
            return None
        return {
            "hard": s.hard,
            "hard_ci95": s.hard_ci95,
            "soft": s.soft,
            "soft_ci95": s.soft_ci95,
            "n": s.n_items,
            "n_infra": s.n_infra,
            "skill": s.skill,
            "split": s.split,
            "cacheable_prefix_share": s.cacheable_prefix_share,
            "categories": [
                {"name": name, "total": c.total, "hard": c.hard, "hard_ci95": c.hard_ci95}
                for name, c in sorted(s.categories.items())
            ],
        }

    def rollout(self, rel: str, item_id: str) -> tuple[RolloutResult, list[str]] | None:
        """One rollout, typed (row, trace, case reports), and its files relative to the run."""
        row = next((r for r in self.rows(rel) if str(r["id"]) == item_id), None)
        root = self.resolve(rel)
        if row is None or root is None:
            return None
        pdir = prediction_dir(root, item_id)
        trace_json = _json(pdir / "trace.json") or {}
        trace, reports = trace_from_json(trace_json)
        files = (
            sorted(str(p.relative_to(self.path.resolve())) for p in pdir.rglob("*") if p.is_file())
            if pdir.is_dir()
            else []
        )
        return row_from_json(row, trace, reports), files

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
        for row in read_result_lines(path.parent):
            usage = row.get("usage")
            if isinstance(usage, dict):
                try:
                    total = total + Usage.from_dict(usage)
                except (TypeError, ValueError):
                    continue
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
