"""Is a data root usable by an env, and how would a run split it? (``skillopt data check``)

The env's own loader decides (the same class the trainer loads, with the same split settings);
before it, a per-item pass collects *every* malformed item, file or task folder instead of the
loader's first one, so a user fixes a data root in one round. Counts are the trainer's: the
train, selection (``val``) and test splits, optionally capped like a run caps them
(``evaluation.sel_env_num``/``test_env_num``).

Usage::

    report = check_data_root("searchqa", Path("my-data"))
    if not report.ok:
        print("\\n".join(report.problems))
    print(report.counts)  # {"train": 80, "selection": 40, "test": 200}
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from skillopt.envs.base import EnvData, EnvOptions
from skillopt.envs.registry import env_dir, env_spec, load_env_data, resolve
from skillopt.errors import SkillOptError

__all__ = [
    "MAX_PROBLEMS",
    "SPLIT_LABELS",
    "DataReport",
    "check_data_root",
    "data_root_of",
    "is_vendored_sample",
    "sample_root",
    "split_counts",
]

#: The splits a run uses, by the names the trainer prints (``selection`` is the ``val`` split).
SPLIT_LABELS = ("train", "selection", "test")
#: Per-item problems listed before the rest are only counted (a wholly wrong root would
#: otherwise print one line per item).
MAX_PROBLEMS = 50


def sample_root(env: str) -> Path:
    """The env's vendored sample (``skillopt/envs/<env>/data/sample``), used when no data root
    is configured."""
    return env_dir(env) / "data" / "sample"


def is_vendored_sample(env: str, root: Path) -> bool:
    """Whether ``root`` is (inside) the env's vendored sample."""
    try:
        return root.expanduser().resolve().is_relative_to(sample_root(env).resolve())
    except OSError:
        return False


def data_root_of(data: EnvData) -> Path | None:
    """The folder a loaded env's data came from (its ``describe()``: ``root``, or the folder of
    TextWorld's ``games_file``); ``None`` when the env does not say."""
    info = data.describe()
    if info.get("root"):
        return Path(str(info["root"]))
    if info.get("games_file"):
        return Path(str(info["games_file"])).parent
    return None


def split_counts(data: EnvData, *, sel_cap: int = 0, test_cap: int = 0) -> dict[str, int]:
    """Items per split as a run uses them: ``train``, ``selection`` (capped at ``sel_cap``)
    and ``test`` (capped at ``test_cap``); a cap of 0 = all. An env whose items are costly to
    build (TextWorld generates its games) may count them with ``split_sizes()``.

    Raises:
        ConfigError: the env has no such split.
    """
    sizes = getattr(data, "split_sizes", None)
    if callable(sizes):
        raw = dict(sizes())
        counts = {"train": raw.get("train", 0), "selection": raw.get("val", 0), "test": raw.get("test", 0)}
    else:
        counts = {label: len(data.split(label)) for label in SPLIT_LABELS}
    for label, cap in (("selection", sel_cap), ("test", test_cap)):
        if cap and cap > 0:
            counts[label] = min(counts[label], cap)
    return counts


@dataclass(frozen=True, kw_only=True)
class DataReport:
    """What ``skillopt data check`` found.

    Attributes:
        env: the env name.
        root: the data root checked (resolved).
        sample: whether it is the env's vendored sample.
        counts: items per split (``train``/``selection``/``test``); empty when it did not load.
        problems: what makes the root unusable, one line each (per item where the loader's
            format allows it), with what to fix.
        notes: what a run should know but that does not stop it (e.g. an empty test split).
        detail: the loader's own description (``describe()``), when it loaded.
    """

    env: str
    root: Path
    sample: bool
    counts: Mapping[str, int] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    detail: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "env": self.env,
            "root": str(self.root),
            "sample": self.sample,
            "ok": self.ok,
            "counts": dict(self.counts),
            "problems": list(self.problems),
            "notes": list(self.notes),
            "detail": dict(self.detail),
        }


def check_data_root(
    env: str,
    root: Path | None,
    *,
    split_mode: str = "split_file",
    split_ratio: str = "2:1:7",
    split_seed: int = 42,
    options: Mapping[str, Any] | EnvOptions | None = None,
    sel_cap: int = 0,
    test_cap: int = 0,
) -> DataReport:
    """Check ``root`` (``None`` = the env's vendored sample) with the env's real loader.

    Never raises for a bad root: every problem is in the report.

    Raises:
        InvalidRequest: unknown env.
        ConfigError: bad ``options`` (names ``env.options.<key>``).
    """
    spec = env_spec(env)
    parsed = spec.parse_options(options)
    where = (root or sample_root(env)).expanduser().resolve()
    base = DataReport(env=env, root=where, sample=is_vendored_sample(env, where))
    if not where.is_dir():
        return _with(base, problems=(f"{where} is not a folder; give the data root (layouts: docs/data.md)",))
    if spec.data_root_problem is not None and (problem := spec.data_root_problem(where, split_mode)):
        return _with(base, problems=(problem,))
    scanner = _SCANNERS.get(env) or (_scan_split_files if spec.raw_item else None)
    problems = scanner(env, where, parsed) if scanner is not None else []
    if problems:
        return _with(base, problems=_capped(problems))
    try:
        data = load_env_data(
            env,
            data_root=str(where),
            split_mode=split_mode,
            split_ratio=split_ratio,
            split_seed=split_seed,
            options=parsed,
        )
        counts = split_counts(data, sel_cap=sel_cap, test_cap=test_cap)
        detail = data.describe()
    except SkillOptError as exc:
        return _with(base, problems=(exc.message,))
    except ValueError as exc:  # a ratio the loader passes on unchecked
        return _with(base, problems=(f"env.split_ratio: {exc}",))
    problems, notes = [], []
    if counts["train"] == 0:
        problems.append("the train split is empty: a run has nothing to learn from")
    if counts["selection"] == 0:
        problems.append("the selection (val) split is empty: the gate needs held-out items")
    if counts["test"] == 0:
        notes.append("the test split is empty: set evaluation.eval_test=false for runs on this root")
    return _with(base, counts=counts, problems=tuple(problems), notes=tuple(notes), detail=detail)


def _with(report: DataReport, **changes: Any) -> DataReport:
    return replace(report, **changes)


def _capped(problems: list[str]) -> tuple[str, ...]:
    if len(problems) <= MAX_PROBLEMS:
        return tuple(problems)
    return (*problems[:MAX_PROBLEMS], f"... and {len(problems) - MAX_PROBLEMS} more problems")


# -- per-item scans: every bad item, not only the first ------------------------------------------


def _scan_split_files(env: str, root: Path, options: EnvOptions) -> list[str]:
    """A question-answering or code root: every ``.json``/``.jsonl`` file directly under it,
    every item through the env's raw-item function (the loader's own)."""
    from skillopt.envs._qa.data import QADataError, read_items, split_files

    make = resolve(env_spec(env).raw_item)
    problems: list[str] = []
    for stem, path in split_files(root).items():
        try:
            raws = read_items(path)
        except QADataError as exc:
            problems.append(exc.message)
            continue
        seen: dict[str, int] = {}
        for n, raw in enumerate(raws):
            problems += _item_problem(make, raw, options, n, stem, path.name, seen)
    return problems


def _item_problem(
    make: Callable[..., Any],
    raw: Mapping[str, Any],
    options: EnvOptions,
    n: int,
    stem: str,
    where: str,
    seen: dict[str, int],
) -> list[str]:
    try:
        item = make(raw, options=options, position=n, source=stem)
    except (ValueError, TypeError, KeyError) as exc:
        return [f"{where}: item {n + 1}{_id_hint(raw)}: {exc}"]
    if item.id in seen:
        return [f"{where}: item {n + 1}: duplicate id {item.id!r} (also item {seen[item.id] + 1})"]
    seen[item.id] = n
    return []


def _id_hint(raw: Mapping[str, Any]) -> str:
    for key in ("id", "uid", "task_id"):
        if isinstance(raw.get(key), str | int) and not isinstance(raw.get(key), bool):
            return f" ({key} {raw[key]!r})"
    return ""


def _scan_officeqa(env: str, root: Path, options: EnvOptions) -> list[str]:
    """``questions.jsonl``: every question through the env's raw-item function, and every
    bulletin it cites present under ``corpus/``."""
    from skillopt.envs._qa.data import QADataError, read_items

    make = resolve(env_spec(env).raw_item)
    path = root / "questions.jsonl"
    try:
        raws = read_items(path)
    except QADataError as exc:
        return [exc.message]
    problems: list[str] = []
    seen: dict[str, int] = {}
    for n, raw in enumerate(raws):
        found = _item_problem(make, raw, options, n, "questions", path.name, seen)
        if found:
            problems += found
            continue
        cited = raw.get("source_files") or []
        if not cited:
            problems.append(f"{path.name}: line {n + 1}{_id_hint(raw)}: cites no source_files")
        missing = [m for m in cited if isinstance(m, str) and not (root / "corpus" / m).is_file()]
        if missing:
            problems.append(
                f"{path.name}: line {n + 1}{_id_hint(raw)}: cites {', '.join(missing)}, not in {root / 'corpus'}"
            )
    return problems


def _scan_spreadsheetbench(env: str, root: Path, options: EnvOptions) -> list[str]:
    """Every task of ``dataset.json``: its test-case workbooks (an input and an answer per case,
    each an xlsx file) and its ``answer_position``."""
    from skillopt.envs.spreadsheetbench.loader import SpreadsheetBenchData, discover_cases
    from skillopt.envs.spreadsheetbench.positions import parse_answer_position

    try:
        data = SpreadsheetBenchData(root)
    except SkillOptError as exc:
        return [exc.message]
    problems: list[str] = []
    for record in data.records:
        try:
            parse_answer_position(record.answer_position)
            cases = discover_cases(record.directory, record.id)
        except (ValueError, SkillOptError) as exc:
            problems.append(f"task {record.id}: {getattr(exc, 'message', exc)}")
            continue
        for case in cases:
            for path in (case.input_path, case.answer_path):
                if not zipfile.is_zipfile(path):
                    problems.append(f"task {record.id}: {path} is not an xlsx workbook (not a zip file)")
    return problems


_SCANNERS: Mapping[str, Callable[[str, Path, EnvOptions], list[str]]] = {
    "officeqa": _scan_officeqa,
    "spreadsheetbench": _scan_spreadsheetbench,
}
