"""Rollout stage: a batch of items under one skill, resumable row by row.

Each rollout directory holds ``results.jsonl`` (one line per finished item, appended as rows
arrive) and ``predictions/<id>/`` (trace, prompts, code, produced files). A row is appended
only after its prediction files are written, so on resume every id in ``results.jsonl`` is
complete and is not sent again; a torn last line from a crash is dropped. Rows that ended on
infrastructure are the exception: a resumed batch moves them to ``infra_attempts.jsonl`` and
runs those items again.
"""

from __future__ import annotations

import collections
import json
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from skillopt.durable import atomic_write_text
from skillopt.envs.base import TaskItem
from skillopt.errors import SystemicFailure
from skillopt.trainer.executor import RolloutExecutor
from skillopt.trainer.records import row_from_json, row_to_json, trace_from_json, trace_to_json
from skillopt.types import Limits, ModelSpec, RolloutRequest, RolloutResult, SkillSpec

__all__ = [
    "RolloutSpec",
    "RolloutStage",
    "load_rows",
    "prediction_dir",
    "score_rows",
    "set_aside_infra_rows",
]

log = structlog.get_logger("skillopt.trainer.rollouts")

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _safe(name: str) -> str:
    return _SAFE.sub("_", name)[:120] or "item"


def prediction_dir(out_dir: Path, item_id: str) -> Path:
    """Where the trace and files of item ``item_id`` of the rollout dir ``out_dir`` are kept."""
    return out_dir / "predictions" / _safe(item_id)


@dataclass(frozen=True, kw_only=True)
class RolloutSpec:
    """What every rollout of a run shares."""

    run_id: str
    env: str
    agent: str
    model: ModelSpec
    limits: Limits
    skill_name: str = "skillopt-target"
    #: Model exchange cache mode for every rollout ("" = the host's default).
    model_cache: str = ""


@dataclass(frozen=True)
class BatchScore:
    hard: float
    soft: float
    n: int
    n_infra: int
    n_failed: int


def score_rows(rows: Sequence[RolloutResult]) -> BatchScore:
    """Means of hard/soft over rows without infrastructure errors (those are masked)."""
    scored = [r for r in rows if r.infra_error is None]
    n = len(scored)
    return BatchScore(
        hard=sum(r.hard for r in scored) / n if n else 0.0,
        soft=sum(r.soft for r in scored) / n if n else 0.0,
        n=n,
        n_infra=len(rows) - n,
        n_failed=sum(1 for r in scored if r.hard < 1e-9),
    )


def load_rows(out_dir: Path, *, with_traces: bool = True) -> dict[str, RolloutResult]:
    """Rows already in ``out_dir/results.jsonl`` (first occurrence of an id wins); a torn last
    line is dropped and the file rewritten without it."""
    path = out_dir / "results.jsonl"
    rows: dict[str, RolloutResult] = {}
    if not path.exists():
        return rows
    good_lines: list[str] = []
    torn = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            torn = True  # only the last line can be torn (appends are sequential)
            continue
        if obj["id"] in rows:
            continue
        trace, reports = None, {}
        tpath = prediction_dir(out_dir, obj["id"]) / "trace.json"
        if with_traces and tpath.exists():
            trace, reports = trace_from_json(json.loads(tpath.read_text(encoding="utf-8")))
        rows[obj["id"]] = row_from_json(obj, trace, reports)
        good_lines.append(line)
    if torn:
        _rewrite(path, good_lines)
    return rows


def _rewrite(path: Path, lines: Sequence[str]) -> None:
    atomic_write_text(path, "".join(line + "\n" for line in lines))


def set_aside_infra_rows(out_dir: Path, rows: dict[str, RolloutResult]) -> dict[str, int]:
    """Move rows that ended on infrastructure out of ``results.jsonl`` (into
    ``infra_attempts.jsonl``, kept as a record) so the batch reruns them; ``rows`` loses them too.

    Returns:
        Per id, how many of its attempts ended on infrastructure so far (reruns get a new
        rollout id from it).
    """
    path = out_dir / "results.jsonl"
    aside = out_dir / "infra_attempts.jsonl"
    failed = {k for k, r in rows.items() if r.infra_error is not None}
    if failed:
        keep, move = [], []
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                (move if json.loads(line)["id"] in failed else keep).append(line)
        # Record first, then drop: a crash in between leaves the row in both, which only
        # counts one attempt too many.
        with open(aside, "a", encoding="utf-8") as fh:
            fh.write("".join(line + "\n" for line in move))
        _rewrite(path, keep)
        for k in failed:
            del rows[k]
        log.info("rollouts.rerun_infra", dir=str(out_dir), n=len(failed))
    counts: dict[str, int] = collections.Counter()
    if aside.exists():
        for line in aside.read_text(encoding="utf-8").splitlines():
            try:
                counts[json.loads(line)["id"]] += 1
            except (json.JSONDecodeError, KeyError):
                continue
    return counts


@dataclass
class _Batch:
    out_dir: Path
    lock: threading.Lock = field(default_factory=threading.Lock)
    rows: dict[str, RolloutResult] = field(default_factory=dict)
    answered: int = 0


class RolloutStage:
    """Runs batches through an executor and records them.

    Args:
        executor: where rollouts run.
        spec: what all rollouts of the run share.
        on_row: called for every new row (progress display, log).
        systemic_after: abort once this many rows arrived and none got a model reply.

    ``on_batch(label, total, done)``, when set, is called as a batch starts: ``done`` of its
    ``total`` rows are on disk already (a resumed batch), the others are about to run.
    """

    def __init__(
        self,
        executor: RolloutExecutor,
        spec: RolloutSpec,
        *,
        on_row: Callable[[RolloutResult, str], None] | None = None,
        systemic_after: int = 8,
    ) -> None:
        self.executor = executor
        self.spec = spec
        self.on_row = on_row
        self.on_batch: Callable[[str, int, int], None] | None = None
        self.systemic_after = systemic_after

    def request(
        self,
        item: TaskItem,
        skill: str,
        label: str,
        *,
        use_eval_feedback: bool,
        diagnostic: str = "",
        rerun: int = 0,
    ) -> RolloutRequest:
        # Deterministic ids: a resumed run asks for the same rollout again, and a host that
        # still holds its result replays it instead of running it twice. A rerun of a row that
        # ended on infrastructure gets a new id, or the host would replay the failure.
        suffix = f"+r{rerun}" if rerun else ""
        return RolloutRequest(
            rollout_id=f"{self.spec.run_id}/{label}/{item.id}"[: 200 - len(suffix)] + suffix,
            env=self.spec.env,
            agent=self.spec.agent,
            task=item.task,
            grading=item.grading,
            skill=SkillSpec(name=self.spec.skill_name, content=skill),
            model=self.spec.model,
            limits=self.spec.limits,
            use_eval_feedback=use_eval_feedback,
            diagnostic_instruction=diagnostic,
            model_cache=self.spec.model_cache,
        )

    def run(
        self,
        items: Sequence[TaskItem],
        skill: str,
        out_dir: Path,
        *,
        label: str,
        use_eval_feedback: bool = False,
        diagnostic: str = "",
    ) -> list[RolloutResult]:
        """Roll ``skill`` out on ``items`` into ``out_dir``; returns rows in item order.

        Raises:
            SystemicFailure: every row so far failed before any model reply (bad credentials,
                model server down): the most common reason is in the message.
        """
        out_dir.mkdir(parents=True, exist_ok=True)
        batch = _Batch(out_dir=out_dir, rows=load_rows(out_dir))
        # Rows that ended on infrastructure are not done: a resumed batch runs them again.
        reruns = set_aside_infra_rows(out_dir, batch.rows)
        todo = [it for it in items if it.id not in batch.rows]
        if batch.rows:
            log.info("rollouts.resumed", dir=str(out_dir), done=len(batch.rows), todo=len(todo))
        if self.on_batch is not None:
            self.on_batch(label, len(items), len(items) - len(todo))
        types = {it.id: it.task_type for it in items}
        stop = threading.Event()
        failure: list[str] = []

        def on_result(row: RolloutResult) -> None:
            with batch.lock:
                if row.id in batch.rows:
                    return  # never a duplicate row
                self._write(out_dir, row, types.get(row.id, ""))
                batch.rows[row.id] = row
                batch.answered += 1 if row.agent_ok else 0
                new = [r for r in batch.rows.values()]
            if self.on_row is not None:
                self.on_row(row, label)
            if not any(r.agent_ok for r in new) and len(new) >= min(self.systemic_after, len(items)):
                failure.append(_common_reason(new))
                stop.set()

        if todo and not self._systemic(batch.rows.values(), len(items)):
            requests = [
                self.request(
                    it,
                    skill,
                    label,
                    use_eval_feedback=use_eval_feedback,
                    diagnostic=diagnostic,
                    rerun=reruns.get(it.id, 0),
                )
                for it in todo
            ]
            self.executor.run(requests, on_result=on_result, stop=stop)
        rows = list(batch.rows.values())
        if failure or self._systemic(rows, len(items)):
            raise SystemicFailure(
                f"every rollout in {out_dir.name} failed before any model reply; most common reason: "
                f"{failure[0] if failure else _common_reason(rows)}"
            )
        missing = [it.id for it in items if it.id not in batch.rows]
        if missing:
            raise SystemicFailure(f"{len(missing)} rollouts of {out_dir} produced no row (stopped?)")
        return [batch.rows[it.id] for it in items]

    def _systemic(self, rows, n_items: int) -> bool:
        rows = list(rows)
        return (
            bool(rows)
            and len(rows) >= min(self.systemic_after, n_items)
            and not any(r.agent_ok for r in rows)
        )

    @staticmethod
    def _write(out_dir: Path, row: RolloutResult, task_type: str) -> None:
        pdir = prediction_dir(out_dir, row.id)
        pdir.mkdir(parents=True, exist_ok=True)
        t = row.trace
        (pdir / "trace.json").write_text(
            json.dumps(trace_to_json(t, row.cases), ensure_ascii=False), encoding="utf-8"
        )
        (pdir / "conversation.json").write_text(
            json.dumps(
                [{"role": m.role, "content": m.content} for m in t.messages], ensure_ascii=False, indent=1
            ),
            encoding="utf-8",
        )
        if t.system_prompt:
            (pdir / "target_system_prompt.txt").write_text(t.system_prompt, encoding="utf-8")
        if t.user_prompt:
            (pdir / "target_user_prompt.txt").write_text(t.user_prompt, encoding="utf-8")
        if t.code:
            (pdir / "code.py").write_text(t.code, encoding="utf-8")
        for key, text in t.notes.items():
            (pdir / f"{_safe(key)}.txt").write_text(text, encoding="utf-8")
        for art in row.artifacts:
            target = pdir / "artifacts" / art.name
            if target.resolve().is_relative_to(pdir.resolve()):
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(art.content)
        line = json.dumps(row_to_json(row, task_type=task_type), ensure_ascii=False) + "\n"
        # One write() per row: a crash (even kill -9) leaves at most a torn last line, which
        # load_rows drops. No fsync per row: after a power loss a row is re-run, never doubled.
        with open(out_dir / "results.jsonl", "a", encoding="utf-8") as fh:
            fh.write(line)


def _common_reason(rows) -> str:
    reasons = collections.Counter((r.fail_reason or "unknown").split("\n")[0][:300] for r in rows)
    return reasons.most_common(1)[0][0] if reasons else "unknown"
