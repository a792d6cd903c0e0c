"""Controller-side data of the question-answering envs: split files under a data root.

A data root is a folder of JSON/JSONL files, one per split, named after it (``train.json``,
``val.jsonl``, ``dev.jsonl``...; names are matched through
:data:`skillopt.envs.splits.FILE_ALIASES`). Each file holds the items exactly as the benchmark
releases them: a JSON array, an object with a ``data`` list, or JSON lines. The vendored sample
(``<env>/data/sample/``) has the same layout with all three splits.

``split_mode: split_file`` takes the first of the env's :attr:`QAData.layouts` whose files are
all present: the direct layout (``train``/``val``/``test`` files) first, then env-specific
ones that carve a missing split out of another file with a seeded shuffle (e.g. the shared
SearchQA copy has no test file: its ``val.json`` is carved into val and test).
``split_mode: ratio`` pools every file and splits by ``split_ratio``.

Every item becomes a :class:`~skillopt.envs.base.TaskItem` through the env's one function from
a raw item to task + grading payload (:meth:`QAData.make_item`), the same one ``skillopt score``
and the tests use.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from skillopt.envs.base import EnvOptions, TaskItem
from skillopt.envs.splits import FILE_ALIASES, RATIO_NAMES, carve, pick_split, ratio_split
from skillopt.errors import ConfigError

__all__ = ["Carve", "Layout", "QAData", "QADataError", "read_items", "split_files"]

_SUFFIXES = (".json", ".jsonl")


class QADataError(ConfigError):
    """A data root or one of its files is missing or malformed; the message says what to fix."""


@dataclass(frozen=True)
class Carve:
    """A split cut out of another file: the ``[start, end)`` fraction after a seeded shuffle."""

    source: str
    start: float
    end: float


#: Split name → the file stem it is read from, or a :class:`Carve` of one.
Layout = Mapping[str, "str | Carve"]
_DIRECT: Layout = {"train": "train", "val": "val", "test": "test"}


def read_items(path: Path) -> list[dict[str, Any]]:
    """The items of one JSON or JSONL file (an array, an object with a ``data`` list, an object
    of items, or one object per line).

    Raises:
        QADataError: unreadable file or an item that is not a JSON object (naming the line).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise QADataError(f"cannot read {path}: {exc}") from exc
    items: Any
    if path.suffix == ".jsonl":
        items = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                items.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise QADataError(f"{path}:{n}: not valid JSON ({exc.msg})") from exc
    else:
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise QADataError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from exc
        if isinstance(items, dict):
            items = items["data"] if isinstance(items.get("data"), list) else list(items.values())
    if not isinstance(items, list):
        raise QADataError(f"{path}: expected a list of items, got {type(items).__name__}")
    for n, item in enumerate(items, 1):
        if not isinstance(item, dict):
            raise QADataError(f"{path}: item {n} is a {type(item).__name__}, not a JSON object")
    return items


def split_files(root: Path) -> dict[str, Path]:
    """File stem → path of the JSON/JSONL files directly under ``root`` (``.json`` wins a tie)."""
    found: dict[str, Path] = {}
    if root.is_dir():
        for path in sorted(
            root.iterdir(), key=lambda p: (p.stem, _SUFFIXES.index(p.suffix) if p.suffix in _SUFFIXES else 9)
        ):
            if path.is_file() and path.suffix in _SUFFIXES:
                found.setdefault(path.stem, path)
    return found


def _source_stem(files: Mapping[str, Path], name: str) -> str | None:
    """The stem in ``files`` that a layout's source name means (directly or through an alias)."""
    if name in files:
        return name
    for stem in files:
        if FILE_ALIASES.get(stem) == name:
            return stem
    return None


class QAData:
    """Splits of a question-answering env (implements :class:`skillopt.envs.base.EnvData`).

    Subclasses set :attr:`env`, :attr:`sample_root`, :attr:`initial_skill_path`,
    :attr:`categories`, optionally :attr:`layouts`, and implement :meth:`make_item`.

    Args:
        data_root: folder of split files (``""`` = the vendored sample).
        split_mode: ``split_file`` or ``ratio``.
        split_ratio: ``train:val:test`` proportions for ``ratio``.
        split_seed: seed of ratio splits and carves.
        options: the env's validated ``env.options``.

    Raises:
        QADataError: no usable files, a malformed item, duplicate ids (messages name the file).
    """

    env: ClassVar[str]
    sample_root: ClassVar[Path]
    initial_skill_path: ClassVar[Path]
    #: Every ``task_type`` an item can have, in breakdown order (``()`` = those in the data).
    categories: ClassVar[tuple[str, ...]]
    #: Layouts tried after the direct one (``train``/``val``/``test`` files).
    layouts: ClassVar[tuple[Layout, ...]] = ()

    def __init__(
        self,
        data_root: str = "",
        *,
        split_mode: str = "split_file",
        split_ratio: str = "2:1:7",
        split_seed: int = 42,
        options: EnvOptions | None = None,
    ) -> None:
        if split_mode not in ("split_file", "ratio"):
            raise ConfigError(f"env.split_mode must be split_file or ratio, got {split_mode!r}")
        self.root = Path(data_root).expanduser().resolve() if data_root else self.sample_root
        self.options = options
        self.split_mode = split_mode
        self.split_seed = split_seed
        files = split_files(self.root)
        if not files:
            raise QADataError(
                f"{self.env} data root {self.root} holds no .json/.jsonl split files; point env.data_root "
                f'at a folder like ../shared/datasets/{self.env} ("" = the vendored sample)'
            )
        self._items: dict[str, dict[str, TaskItem]] = {}  # file stem -> id -> item
        for stem, path in files.items():
            self._items[stem] = self._load(path, stem)
        self.layout: dict[str, str] = {}
        if split_mode == "ratio":
            self._splits = self._ratio(split_ratio)
        else:
            self._splits = self._split_file(files)

    # -- building ------------------------------------------------------------------------------

    def make_item(self, raw: Mapping[str, Any], *, position: int, source: str) -> TaskItem:
        """The task item of one raw item (``position``: its 0-based place in file ``source``).

        Raises:
            ValueError: the item lacks a field or has a malformed one (the message names it).
        """
        raise NotImplementedError

    def _load(self, path: Path, stem: str) -> dict[str, TaskItem]:
        out: dict[str, TaskItem] = {}
        for n, raw in enumerate(read_items(path)):
            try:
                item = self.make_item(raw, position=n, source=stem)
            except (ValueError, TypeError, KeyError) as exc:
                raise QADataError(f"{path}: item {n + 1}: {exc}") from exc
            if item.id in out:
                raise QADataError(f"{path}: duplicate item id {item.id!r} (item {n + 1})")
            out[item.id] = item
        return out

    def _split_file(self, files: Mapping[str, Path]) -> dict[str, list[TaskItem]]:
        tried = []
        for layout in (_DIRECT, *self.layouts):
            sources = {
                split: _source_stem(files, src.source if isinstance(src, Carve) else src)
                for split, src in layout.items()
            }
            if all(sources.values()):
                return self._apply(layout, sources)
            tried.append(
                ", ".join(f"{k} <- {v.source if isinstance(v, Carve) else v}" for k, v in layout.items())
            )
        raise QADataError(
            f"{self.env} data root {self.root}: no usable layout for files {', '.join(sorted(files))}; "
            f"tried: {' | '.join(tried)}. Set env.split_mode=ratio to split all files by env.split_ratio."
        )

    def _apply(self, layout: Layout, sources: Mapping[str, str | None]) -> dict[str, list[TaskItem]]:
        out: dict[str, list[TaskItem]] = {}
        for split, src in layout.items():
            stem = sources[split]
            assert stem is not None
            items = self._items[stem]
            if isinstance(src, Carve):
                ids = carve(list(items), src.start, src.end, seed=self.split_seed, salt=f"{self.env}:{stem}")
                out[split] = [items[i] for i in ids]
                self.layout[split] = f"{stem} [{src.start:g}, {src.end:g}) seed {self.split_seed}"
            else:
                out[split] = list(items.values())
                self.layout[split] = stem
        return out

    def _ratio(self, ratio: str) -> dict[str, list[TaskItem]]:
        pool: dict[str, TaskItem] = {}
        for _stem, items in self._items.items():
            for tid, item in items.items():
                if tid in pool:
                    raise QADataError(
                        f"{self.env} data root {self.root}: item id {tid!r} appears in two files"
                    )
                pool[tid] = item
        try:
            parts = ratio_split(list(pool), ratio, self.split_seed)
        except ValueError as exc:
            raise ConfigError(f"env.split_ratio: {exc}") from None
        self.layout = {name: f"ratio {ratio} seed {self.split_seed}" for name in RATIO_NAMES}
        return {name: [pool[i] for i in ids] for name, ids in parts.items()}

    # -- EnvData ---------------------------------------------------------------------------------

    def split(self, name: str) -> list[TaskItem]:
        """Items of a split; ``name`` may be an alias (``valid_seen``/``selection``/``dev`` → val).

        Raises:
            ConfigError: unknown split (the message lists the available ones).
        """
        return pick_split(self._splits, name, env=self.env, root=self.root)

    def task_types(self) -> list[str]:
        """:attr:`categories`, or (when the env has no fixed list) every ``task_type`` found."""
        if self.categories:
            return list(self.categories)
        return sorted({it.task_type for items in self._items.values() for it in items.values()})

    def describe(self) -> dict[str, Any]:
        return {
            "root": str(self.root),
            "split_mode": self.split_mode,
            "layout": dict(self.layout),
            "sizes": {k: len(v) for k, v in self._splits.items()},
            "options": self.options.model_dump(mode="json") if self.options is not None else {},
        }

    def initial_skill(self) -> str:
        return self.initial_skill_path.read_text(encoding="utf-8")

    def items(self, stems: Sequence[str] | None = None) -> list[TaskItem]:
        """Every item of the root (of the given file stems), in file order."""
        return [
            it
            for stem, items in self._items.items()
            if stems is None or stem in stems
            for it in items.values()
        ]
