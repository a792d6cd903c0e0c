"""Run directories for the readers' tests, as the trainer wrote them: the fixtures of each
earlier record version (``tests/fixtures/rundirs``, its README says which commit wrote each and
how), and records made from them through the run directory's own models (never hand-written
JSON, which would only test what a test's author guessed the writer writes)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

from skillopt.trainer import FitResult, StepRecord
from skillopt.trainer.rundir import layout

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "rundirs"

#: The commit that wrote each fixture → the versions of its records (the shape each reader
#: must still read): step records and summary, run state, rows, eval summary, config.
WRITTEN_BY = {
    "c376b9d": "records 0, state 1, rows 0, eval summary 0 (test summaries in the old shape), config 0",
    "07ff7b4": "records 1, state 2, rows 0, eval summary 0, config 0",
    "341f351": "records 2, state 2, rows 0, eval summary 0, config 0, eval_config 0, launch 0",
}
#: The newest fixture: the records tests start from.
NEWEST = "341f351"


def copy_run(commit: str, dest: Path) -> Path:
    """A copy of the fixture written by ``commit`` at ``dest`` (tests that write there, e.g. a
    resume, never touch the fixture)."""
    shutil.copytree(FIXTURES / commit, dest, symlinks=True)
    return dest


def step_json(
    step: int,
    *,
    proposal: dict[str, Any] | None = None,
    selection: dict[str, Any] | None = None,
    **changes: Any,
) -> dict[str, Any]:
    """A step record (the newest fixture's first step, as the trainer wrote it: it proposed,
    evaluated and accepted a candidate) made step ``step`` in epoch 1 with these changes, in
    its JSON form: ``changes`` are ``StepRecord`` fields (``action``, ``current_score``,
    ``tokens`` ...), ``proposal`` and ``selection`` fields of its ``ProposalStats``
    (``file_changes`` ...) and ``SelectionStats`` (``candidate_score``, ``gate_reason`` ...)."""
    base = StepRecord.from_json(_json(FIXTURES / NEWEST / layout.step_dir(1) / layout.Step.RECORD))
    assert base.proposal is not None and base.selection is not None
    record = dataclasses.replace(
        base,
        step=step,
        epoch=changes.pop("epoch", 1),
        proposal=dataclasses.replace(base.proposal, **(proposal or {})),
        selection=dataclasses.replace(base.selection, **(selection or {})),
        **changes,
    )
    return record.to_json()


def summary_json(
    status: str = "complete", *, test_hard: float | None = None, **changes: Any
) -> dict[str, Any]:
    """The newest fixture's ``summary.json`` with ``status`` (``complete``, ``stopped``),
    ``changes`` (``FitResult`` fields) and the best skill's test score ``test_hard``."""
    result = FitResult.from_json(_json(FIXTURES / NEWEST / layout.SUMMARY))
    if test_hard is not None:
        assert result.tests is not None
        changes["tests"] = dataclasses.replace(result.tests, best_hard=test_hard)
    return dataclasses.replace(result, status=status, **changes).to_json()


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))
