"""A rollout directory on disk: ``results.jsonl``, ``infra_attempts.jsonl``, ``predictions/``.

Each rollout directory holds ``results.jsonl`` (one line per finished item, appended as rows
arrive) and ``predictions/<id>/`` (trace, prompts, code, produced files). A row is appended
only after its prediction files are written, so on resume every id in ``results.jsonl`` is
complete and is not sent again; a torn last line from a crash is dropped. A full disk tears
nothing: prediction files are replaced atomically and a row's line is appended whole or not at
all (:mod:`skillopt.durable`). Rows that ended on
infrastructure are the exception: a resumed batch moves them to ``infra_attempts.jsonl`` and
runs those items again.
"""

from __future__ import annotations

import collections
import json
import re
from collections.abc import Sequence
from pathlib import Path

import structlog

from skillopt.durable import append_text, atomic_write_bytes, atomic_write_text
from skillopt.models.prefix import PrefixMeter
from skillopt.trainer.rundir.layout import INFRA_ATTEMPTS, PREDICTIONS, RESULTS, target_stage
from skillopt.trainer.rundir.rowjson import ResultRow, trace_from_json, trace_to_json
from skillopt.trainer.versions import RecordError
from skillopt.types import RolloutResult, Trace, Usage

__all__ = [
    "append_row",
    "load_rows",
    "prediction_dir",
    "read_rows",
    "set_aside_infra_rows",
    "target_prefix_on_disk",
    "target_usage_on_disk",
]

log = structlog.get_logger("skillopt.trainer.rundir")

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _safe(name: str) -> str:
    return _SAFE.sub("_", name)[:120] or "item"


def prediction_dir(out_dir: Path, item_id: str) -> Path:
    """Where the trace and files of item ``item_id`` of the rollout dir ``out_dir`` are kept."""
    return out_dir / PREDICTIONS / _safe(item_id)


def _row(line: str) -> ResultRow | None:
    """The row on one line of a rows file; ``None`` for a torn or foreign line."""
    try:
        return ResultRow.from_json(json.loads(line))
    except (ValueError, RecursionError):  # not JSON (json's error is a ValueError), not a row
        return None


def read_rows(out_dir: Path) -> list[ResultRow]:
    """The rows of ``out_dir/results.jsonl``, first occurrence of an id winning; a torn or
    foreign line is skipped (read-only: for readers that follow a running run)."""
    try:
        text = (out_dir / RESULTS).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    rows: dict[str, ResultRow] = {}
    for line in text.splitlines():
        row = _row(line)
        if row is not None:
            rows.setdefault(row.id, row)
    return list(rows.values())


def load_rows(out_dir: Path, *, with_traces: bool = True) -> dict[str, RolloutResult]:
    """Rows already in ``out_dir/results.jsonl`` (first occurrence of an id wins); a torn last
    line is dropped and the file rewritten without it (the writer's repair on resume)."""
    path = out_dir / RESULTS
    rows: dict[str, RolloutResult] = {}
    if not path.exists():
        return rows
    good_lines: list[str] = []
    torn = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            stored = ResultRow.from_json(json.loads(line))
        except json.JSONDecodeError:
            torn = True  # only the last line can be torn (appends are sequential)
            continue
        except RecordError as exc:  # not a row of ours: dropped, so its item runs again
            log.warning("rollouts.row_unreadable", dir=str(out_dir), problem=str(exc))
            torn = True
            continue
        if stored.id in rows:
            continue
        trace: Trace | None = None
        reports: dict[str, str] = {}
        tpath = prediction_dir(out_dir, stored.id) / "trace.json"
        if with_traces and tpath.exists():
            trace, reports = trace_from_json(json.loads(tpath.read_text(encoding="utf-8")))
        rows[stored.id] = stored.result(trace, reports)
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
    path = out_dir / RESULTS
    aside = out_dir / INFRA_ATTEMPTS
    failed = {k for k, r in rows.items() if r.infra_error is not None}
    if failed:
        keep: list[str] = []
        move: list[str] = []
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = _row(line)
                (move if row is not None and row.id in failed else keep).append(line)
        # Record first, then drop: a crash in between leaves the row in both, which only
        # counts one attempt too many.
        append_text(aside, "".join(line + "\n" for line in move))
        _rewrite(path, keep)
        for k in failed:
            del rows[k]
        log.info("rollouts.rerun_infra", dir=str(out_dir), n=len(failed))
    counts: dict[str, int] = collections.Counter()
    if aside.exists():
        for line in aside.read_text(encoding="utf-8").splitlines():
            row = _row(line)
            if row is not None:
                counts[row.id] += 1
    return counts


def append_row(out_dir: Path, row: RolloutResult, task_type: str) -> None:
    """Write a row's prediction files, then append its line to ``results.jsonl``."""
    pdir = prediction_dir(out_dir, row.id)
    pdir.mkdir(parents=True, exist_ok=True)
    t = row.trace
    # Each file whole or absent (a full disk mid-write leaves no half JSON); not fsynced: a row
    # whose line did not reach results.jsonl is run again and its files written again.
    texts = {
        "trace.json": json.dumps(trace_to_json(t, row.cases), ensure_ascii=False),
        "conversation.json": json.dumps(
            [{"role": m.role, "content": m.content} for m in t.messages], ensure_ascii=False, indent=1
        ),
    }
    optional = {"target_system_prompt.txt": t.system_prompt, "target_user_prompt.txt": t.user_prompt}
    texts |= {name: text for name, text in [*optional.items(), ("code.py", t.code)] if text}
    texts |= {f"{_safe(key)}.txt": text for key, text in t.notes.items()}
    for name, text in texts.items():
        atomic_write_text(pdir / name, text, durable=False)
    for art in row.artifacts:
        target = pdir / "artifacts" / art.name
        if target.resolve().is_relative_to(pdir.resolve()):
            atomic_write_bytes(target, art.content, durable=False)
    line = json.dumps(ResultRow.of(row, task_type=task_type).to_json(), ensure_ascii=False) + "\n"
    # One write() per row: a crash (even kill -9) leaves at most a torn last line, which
    # load_rows drops; a full disk leaves none. No fsync per row: after a power loss a row is
    # re-run, never doubled.
    append_text(out_dir / RESULTS, line)


def target_usage_on_disk(run_root: Path) -> dict[str, Usage]:
    """The target model's usage of every row the run has on disk (``results.jsonl`` and the
    infrastructure attempts set aside), per stage (:func:`~.layout.target_stage`): the rows
    are the target's ledger, so a crash loses no spend and a resume counts none twice."""
    totals: dict[str, Usage] = {}
    for name in (RESULTS, INFRA_ATTEMPTS):
        for path in run_root.rglob(name):
            stage = target_stage(str(path.parent.relative_to(run_root)))
            try:
                lines = path.read_text(encoding="utf-8").splitlines()
            except OSError:
                continue
            for line in lines:
                row = _row(line)  # None: a torn last line
                if row is not None and row.usage.calls:
                    totals[stage] = totals.get(stage, Usage()) + row.usage
    return totals


#: The trace note in which the sandbox host records a rollout's model exchanges.
EXCHANGES_NOTE = "model_exchanges"


def target_prefix_on_disk(root: Path) -> PrefixMeter:
    """The target's cacheable prefix share over every rollout directory under ``root`` (a run,
    or one eval's output): each row's recorded model exchanges (its prediction dir's
    ``model_exchanges.txt``), rollout directories in path order, rows in the order they
    arrived. Rows without a record (no model, an infrastructure failure) add nothing."""
    meter = PrefixMeter()
    for path in sorted(root.rglob(RESULTS)):
        for row in read_rows(path.parent):
            notes = prediction_dir(path.parent, row.id) / f"{_safe(EXCHANGES_NOTE)}.txt"
            try:
                exchanges = json.loads(notes.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(exchanges, list):
                meter.observe_exchanges(e for e in exchanges if isinstance(e, dict))
    return meter
