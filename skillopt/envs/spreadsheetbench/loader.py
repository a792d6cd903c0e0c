"""SpreadsheetBench data: task records, splits and test-case files under a data root.

A data root holds ``dataset.json`` (task records), ``splits.json`` (``{split: [ids]}``) and
``spreadsheet/<id>/`` with the test-case workbooks. The project vendors a small sample
(:data:`SAMPLE_ROOT`); larger runs point :data:`ROOT_ENV_VAR` at a full copy.

Usage::

    data = SpreadsheetBenchData(default_data_root())
    for record in data.split("train"):
        task, grading = data.build_task(record)
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillopt.envs.splits import SPLIT_ALIASES, largest_remainder, ratio_split
from skillopt.errors import ConfigError
from skillopt.types import File, Grading, Task, TestCase

__all__ = [
    "PACKAGE_SAMPLE_ROOT",
    "ROOT_ENV_VAR",
    "SAMPLE_ROOT",
    "SPLIT_ALIASES",
    "CaseFiles",
    "SpreadsheetBenchData",
    "SpreadsheetBenchDataError",
    "TaskRecord",
    "build_task",
    "default_data_root",
    "discover_cases",
    "largest_remainder",
    "task_type_of",
]

SAMPLE_ROOT = Path(__file__).parent / "data" / "sample"
#: Synthetic tasks that need a skill package (``env.options.sample: package``; the offline
#: simulation's package family, :mod:`skillopt.testing.fixtures.spreadsheetbench.package`).
PACKAGE_SAMPLE_ROOT = Path(__file__).parent / "data" / "package"
ROOT_ENV_VAR = "SKILLOPT_SPREADSHEETBENCH_ROOT"

_TASK_CACHE_SIZE = 64


class SpreadsheetBenchDataError(ConfigError):
    """A data root or a task's files are missing or malformed; the message says what to fix."""


def default_data_root() -> Path:
    """The data root: ``$SKILLOPT_SPREADSHEETBENCH_ROOT`` if set, else the vendored sample."""
    value = os.environ.get(ROOT_ENV_VAR, "").strip()
    return Path(value).expanduser() if value else SAMPLE_ROOT


def task_type_of(instruction_type: str) -> str:
    """``cell_level``, ``sheet_level`` or ``other`` from an ``instruction_type`` such as
    ``Cell-Level Manipulation``."""
    lowered = instruction_type.lower()
    if "cell" in lowered:
        return "cell_level"
    if "sheet" in lowered:
        return "sheet_level"
    return "other"


@dataclass(frozen=True, slots=True)
class CaseFiles:
    """The two workbooks of one test case: what the agent gets and the gold output."""

    name: str
    input_path: Path
    answer_path: Path


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskRecord:
    """One task of ``dataset.json``, with its folder resolved.

    Attributes:
        split: The split that ``splits.json`` puts the task in (``""`` if none); the record's own
            ``split`` field is kept in ``raw``.
        directory: Absolute folder of the task's workbooks.
        raw: The record exactly as in ``dataset.json``.
    """

    id: str
    instruction: str
    instruction_type: str
    answer_position: str
    answer_sheet: str
    release: str
    split: str
    directory: Path
    raw: Mapping[str, Any]

    @property
    def task_type(self) -> str:
        """See :func:`task_type_of`."""
        return task_type_of(self.instruction_type)

    @property
    def cases(self) -> tuple[CaseFiles, ...]:
        """The test cases found in :attr:`directory` (see :func:`discover_cases`)."""
        return discover_cases(self.directory, self.id)


def _case_patterns(task_id: str) -> list[tuple[re.Pattern[str], str]]:
    tid = re.escape(task_id)
    # Each pattern maps a file name to (case number, role); earlier patterns win a clash.
    return [
        (re.compile(rf"^(\d+)_{tid}_(input|answer)\.xlsx$"), "numbered"),
        (re.compile(rf"^(\d+)_{tid}_(init|golden)\.xlsx$"), "numbered"),
        (re.compile(r"^()(initial|golden)\.xlsx$"), "bare"),
    ]


_ROLE = {"input": "input", "init": "input", "initial": "input", "answer": "answer", "golden": "answer"}


def discover_cases(directory: Path, task_id: str) -> tuple[CaseFiles, ...]:
    """Test cases of a task folder, sorted by case number.

    Recognised pairs, in order of precedence for the same case number:
    ``{n}_{id}_input.xlsx`` + ``{n}_{id}_answer.xlsx`` (the released layout),
    ``{n}_{id}_init.xlsx`` + ``{n}_{id}_golden.xlsx`` (the original names), and bare
    ``initial.xlsx`` + ``golden.xlsx`` as case ``1``.

    Raises:
        SpreadsheetBenchDataError: the folder is missing, holds no case, or a case lacks one of
            its two files.
    """
    if not directory.is_dir():
        raise SpreadsheetBenchDataError(f"task {task_id}: folder {directory} does not exist")
    found: dict[int, dict[int, dict[str, Path]]] = {}  # number -> precedence -> role -> path
    names = sorted(p.name for p in directory.iterdir() if p.is_file())
    for precedence, (pattern, kind) in enumerate(_case_patterns(task_id)):
        for name in names:
            if m := pattern.match(name):
                number = 1 if kind == "bare" else int(m[1])
                found.setdefault(number, {}).setdefault(precedence, {})[_ROLE[m[2]]] = directory / name
    cases: list[CaseFiles] = []
    for number in sorted(found):
        precedence = min(found[number])
        roles = found[number][precedence]
        if set(roles) != {"input", "answer"}:
            have = ", ".join(p.name for p in roles.values())
            raise SpreadsheetBenchDataError(
                f"task {task_id}: case {number} has only {have} in {directory}; need an input and an answer"
            )
        cases.append(CaseFiles(name=str(number), input_path=roles["input"], answer_path=roles["answer"]))
    if not cases:
        raise SpreadsheetBenchDataError(
            f"task {task_id}: no test case in {directory} (expected {{n}}_{task_id}_input.xlsx and "
            f"{{n}}_{task_id}_answer.xlsx)"
        )
    return tuple(cases)


def build_task(record: TaskRecord) -> tuple[Task, Grading]:
    """The shared :class:`~skillopt.types.Task` (what the agent sees) and
    :class:`~skillopt.types.Grading` (gold, never sent into a rollout container) of a record.

    Each task case holds one file ``input.xlsx``; each grading case one file ``answer.xlsx``.
    Reads the workbooks now (use :meth:`SpreadsheetBenchData.build_task` for a cached copy).
    """
    cases = record.cases
    task_cases: list[TestCase] = []
    gold_cases: list[TestCase] = []
    for case in cases:
        task_cases.append(
            TestCase(name=case.name, files=(File(name="input.xlsx", content=_read(case.input_path)),))
        )
        gold_cases.append(
            TestCase(name=case.name, files=(File(name="answer.xlsx", content=_read(case.answer_path)),))
        )
    task = Task(
        id=record.id,
        instruction=record.instruction,
        attributes={
            "instruction_type": record.instruction_type,
            "task_type": record.task_type,
            "answer_position": record.answer_position,
            "answer_sheet": record.answer_sheet,
            "release": record.release,
            "split": record.split,
        },
        cases=tuple(task_cases),
    )
    grading = Grading(
        attributes={"answer_position": record.answer_position, "answer_sheet": record.answer_sheet},
        cases=tuple(gold_cases),
    )
    return task, grading


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise SpreadsheetBenchDataError(f"cannot read {path}: {exc}") from exc


class SpreadsheetBenchData:
    """The tasks and splits of one data root.

    Args:
        root: Folder with ``dataset.json``, ``splits.json`` and ``spreadsheet/``.

    Raises:
        SpreadsheetBenchDataError: the root or its index files are missing or malformed; the
            message says to set :data:`ROOT_ENV_VAR`.
    """

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root).expanduser().resolve()
        dataset = self._load_json("dataset.json")
        splits = self._load_json("splits.json")
        if not isinstance(dataset, list) or not isinstance(splits, dict):
            raise self._bad("dataset.json must be a list of tasks and splits.json an object of id lists")
        self._splits: dict[str, list[str]] = {}
        for name, ids in splits.items():
            if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
                raise self._bad(f"splits.json: split {name!r} must be a list of task ids")
            self._splits[str(name)] = list(ids)
        split_of = {tid: name for name, ids in self._splits.items() for tid in ids}
        self._records: dict[str, TaskRecord] = {}
        for raw in dataset:
            record = self._record(raw, split_of)
            if record.id in self._records:
                raise self._bad(f"dataset.json: duplicate task id {record.id!r}")
            self._records[record.id] = record
        unknown = [tid for ids in self._splits.values() for tid in ids if tid not in self._records]
        if unknown:
            raise self._bad(f"splits.json names ids missing from dataset.json: {unknown[:10]}")
        self._task_cache: OrderedDict[str, tuple[Task, Grading]] = OrderedDict()
        self._task_cache_lock = threading.Lock()

    def _bad(self, what: str) -> SpreadsheetBenchDataError:
        return SpreadsheetBenchDataError(
            f"SpreadsheetBench data root {self.root}: {what}. Set {ROOT_ENV_VAR} to a folder holding "
            "dataset.json, splits.json and spreadsheet/<id>/ (default: the vendored sample)."
        )

    def _load_json(self, name: str) -> Any:
        path = self.root / name
        if not path.is_file():
            raise self._bad(f"{name} not found")
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise self._bad(f"cannot read {name}: {exc}") from exc

    def _record(self, raw: Any, split_of: Mapping[str, str]) -> TaskRecord:
        if not isinstance(raw, dict) or not isinstance(raw.get("id"), str) or not raw.get("answer_position"):
            raise self._bad(f"dataset.json: a task lacks 'id' or 'answer_position': {str(raw)[:200]}")
        tid = raw["id"]
        rel = Path(str(raw.get("spreadsheet_path") or f"spreadsheet/{tid}"))
        return TaskRecord(
            id=tid,
            instruction=str(raw.get("instruction", "")),
            instruction_type=str(raw.get("instruction_type", "")),
            answer_position=str(raw["answer_position"]),
            answer_sheet=str(raw.get("answer_sheet") or ""),
            release=str(raw.get("release", "")),
            split=split_of.get(tid, ""),
            directory=rel if rel.is_absolute() else self.root / rel,
            raw=dict(raw),
        )

    # -- lookup --------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._records)

    def __contains__(self, task_id: object) -> bool:
        return task_id in self._records

    @property
    def ids(self) -> list[str]:
        """All task ids, in ``dataset.json`` order."""
        return list(self._records)

    @property
    def records(self) -> list[TaskRecord]:
        """All task records, in ``dataset.json`` order."""
        return list(self._records.values())

    def task(self, task_id: str) -> TaskRecord:
        """The record of ``task_id``.

        Raises:
            KeyError: no such task.
        """
        try:
            return self._records[task_id]
        except KeyError:
            raise KeyError(f"no SpreadsheetBench task {task_id!r} under {self.root}") from None

    # -- splits --------------------------------------------------------------------------------

    @property
    def split_names(self) -> list[str]:
        """The split keys of ``splits.json``."""
        return list(self._splits)

    @property
    def test_split_key(self) -> str | None:
        """The ``splits.json`` key that ``test`` means: ``test``, else ``extra`` (the shared
        dataset has no ``test`` split; its 136 ``extra`` tasks are held out), else ``None``."""
        for key in ("test", "extra"):
            if key in self._splits:
                return key
        return None

    def resolve_split(self, name: str) -> str:
        """The ``splits.json`` key of a split name or alias (see :data:`SPLIT_ALIASES`).

        Raises:
            ConfigError: unknown name; the message lists the available splits and aliases.
        """
        if name in self._splits:
            return name
        canonical = SPLIT_ALIASES.get(name)
        key = self.test_split_key if canonical == "test" else canonical
        if key is not None and key in self._splits:
            return key
        usable = sorted(set(self._splits) | {a for a in SPLIT_ALIASES if self._alias_ok(a)})
        raise ConfigError(f"unknown split {name!r} under {self.root}; available: {', '.join(usable)}")

    def _alias_ok(self, alias: str) -> bool:
        canonical = SPLIT_ALIASES[alias]
        key = self.test_split_key if canonical == "test" else canonical
        return key is not None and key in self._splits

    def split(self, name: str) -> list[TaskRecord]:
        """The records of a split, in ``splits.json`` order. ``name`` may be an alias:
        ``valid_seen``/``selection``/``val`` → ``val``; ``valid_unseen``/``test`` → ``test``
        (or ``extra`` when there is no ``test``)."""
        return [self._records[tid] for tid in self._splits[self.resolve_split(name)]]

    def ratio_split(
        self, ratio: str | Sequence[float | int] = "2:1:7", seed: int = 42
    ) -> dict[str, list[TaskRecord]]:
        """A seeded train/val/test split of all tasks by ``ratio``.

        Ids are sorted, shuffled with ``random.Random(seed)``, then cut into counts from
        :func:`largest_remainder`; the result does not depend on the order of ``dataset.json``.

        Raises:
            ValueError: ``ratio`` is not three non-negative numbers, not all zero.
        """
        parts = ratio_split(list(self._records), ratio, seed)
        return {name: [self._records[tid] for tid in ids] for name, ids in parts.items()}

    def describe(self) -> str:
        """One paragraph on the root: task count, split sizes and what ``test`` maps to."""
        sizes = ", ".join(f"{k} {len(v)}" for k, v in self._splits.items())
        text = f"SpreadsheetBench at {self.root}: {len(self)} tasks; splits: {sizes}."
        key = self.test_split_key
        if key is None:
            text += " No test split."
        elif key != "test":
            text += f" 'test' maps to '{key}' (splits.json has no 'test')."
        return text

    # -- tasks ---------------------------------------------------------------------------------

    def build_task(self, record: TaskRecord | str) -> tuple[Task, Grading]:
        """:func:`build_task` of a record or id, kept in a small LRU (workbooks are read once
        per task while it stays among the 64 most recently used)."""
        rec = self.task(record) if isinstance(record, str) else record
        with self._task_cache_lock:
            cached = self._task_cache.get(rec.id)
            if cached is not None:
                self._task_cache.move_to_end(rec.id)
                return cached
        built = build_task(rec)  # outside the lock: file reads may be slow
        with self._task_cache_lock:
            self._task_cache[rec.id] = built
            while len(self._task_cache) > _TASK_CACHE_SIZE:
                self._task_cache.popitem(last=False)
        return built
