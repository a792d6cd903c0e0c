"""OfficeQA splits on the controller side, from a data root laid out like
``../shared/datasets/officeqa``: ``questions.jsonl`` (one question per line), ``splits.json``
(``{"train": [uid...], "val": [...], "test": [...]}``; without it each question's ``split``
field decides) and ``corpus/<bulletin>.txt``. The vendored sample (``data/sample``, 8 questions
and the bulletins they cite) has the same layout.

Each corpus file is read once and shared by every question citing it, so memory is bounded by
the corpus, not by the number of questions. A question whose cited bulletin is missing is an
error naming it (``uncovered.jsonl`` of the shared folder, questions without a corpus, is never
read).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from skillopt.envs._qa.data import QADataError, read_items
from skillopt.envs.base import EnvOptions, TaskItem
from skillopt.envs.officeqa.items import CATEGORIES, attach_corpus, item_from_raw
from skillopt.envs.officeqa.spec import OfficeQAOptions
from skillopt.envs.splits import FILE_ALIASES, RATIO_NAMES, pick_split, ratio_split
from skillopt.errors import ConfigError

__all__ = ["SAMPLE_ROOT", "OfficeQAData"]

_HERE = Path(__file__).parent
SAMPLE_ROOT = _HERE / "data" / "sample"
_SPLITS = ("train", "val", "test")


class OfficeQAData:
    """OfficeQA splits (implements :class:`skillopt.envs.base.EnvData`).

    Args:
        data_root: a folder like ``../shared/datasets/officeqa`` (``""`` = the vendored sample).
        split_mode: ``split_file`` (``splits.json`` / the items' ``split``) or ``ratio``.
        split_ratio: ``train:val:test`` proportions for ``ratio``.
        split_seed: seed of ratio splits.
        options: the env's validated ``env.options``.

    Raises:
        QADataError: a missing or malformed file, a duplicate uid, a cited bulletin not in the
            corpus (messages name the file and the question).
    """

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
        self.root = Path(data_root).expanduser().resolve() if data_root else SAMPLE_ROOT
        self.options = options if isinstance(options, OfficeQAOptions) else OfficeQAOptions()
        self.split_mode = split_mode
        self.split_seed = split_seed
        questions = self.root / "questions.jsonl"
        if not questions.is_file():
            raise QADataError(
                f"officeqa data root {self.root} has no questions.jsonl; point env.data_root at a folder "
                'like ../shared/datasets/officeqa ("" = the vendored sample)'
            )
        self._corpus: dict[str, bytes] = {}
        self._items: dict[str, TaskItem] = {}
        self._declared: dict[str, str] = {}
        for n, raw in enumerate(read_items(questions)):
            item = self._make(raw, n, questions)
            if item.id in self._items:
                raise QADataError(f"{questions}: duplicate uid {item.id!r} (line {n + 1})")
            self._items[item.id] = item
            self._declared[item.id] = str(raw.get("split", ""))
        parts = self._ratio(split_ratio) if split_mode == "ratio" else self._split_file()
        self._splits = {name: [self._items[i] for i in ids] for name, ids in parts.items()}

    def _make(self, raw: dict[str, Any], n: int, path: Path) -> TaskItem:
        try:
            item = item_from_raw(raw, options=self.options, position=n, source="questions")
        except (ValueError, TypeError, KeyError) as exc:
            raise QADataError(f"{path}: line {n + 1}: {exc}") from exc
        names = item.task.attributes.get("source_files") or []
        if not names:
            raise QADataError(f"{path}: line {n + 1}: question {item.id} cites no source_files")
        return attach_corpus(
            item, raw, options=self.options, files={m: self._file(m, item.id) for m in names}
        )

    def _file(self, name: str, uid: str) -> bytes:
        if name not in self._corpus:
            path = self.root / "corpus" / name
            try:
                self._corpus[name] = path.read_bytes()
            except OSError as exc:
                raise QADataError(
                    f"officeqa: question {uid} cites {name}, which is not in {self.root / 'corpus'} "
                    f"({exc.strerror}); only questions whose bulletins are all in the corpus can be used"
                ) from None
        return self._corpus[name]

    def _split_file(self) -> dict[str, list[str]]:
        path = self.root / "splits.json"
        if path.is_file():
            try:
                listed = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise QADataError(f"{path}: not valid JSON ({exc})") from None
            if not isinstance(listed, dict):
                raise QADataError(f"{path}: expected an object of split name -> list of uids")
            out: dict[str, list[str]] = {}
            for name in _SPLITS:
                uids = listed.get(name, [])
                if not isinstance(uids, list):
                    raise QADataError(f"{path}: {name!r} must be a list of uids")
                out[name] = [str(u) for u in uids if str(u) in self._items]
            return out
        return {
            name: [i for i, s in self._declared.items() if FILE_ALIASES.get(s, s) == name] for name in _SPLITS
        }

    def _ratio(self, ratio: str) -> dict[str, list[str]]:
        try:
            parts = ratio_split(list(self._items), ratio, self.split_seed)
        except ValueError as exc:
            raise ConfigError(f"env.split_ratio: {exc}") from None
        return {name: parts[name] for name in RATIO_NAMES}

    # -- EnvData ---------------------------------------------------------------------------------

    def split(self, name: str) -> list[TaskItem]:
        """Items of a split; ``name`` may be an alias (``valid_seen``/``selection``/``dev`` → val).

        Raises:
            ConfigError: unknown split (the message lists the available ones).
        """
        return pick_split(self._splits, name, env="officeqa", root=self.root)

    def task_types(self) -> list[str]:
        return list(CATEGORIES)

    def describe(self) -> dict[str, Any]:
        return {
            "root": str(self.root),
            "split_mode": self.split_mode,
            "sizes": {k: len(v) for k, v in self._splits.items()},
            "corpus_files": len(self._corpus),
            "corpus_bytes": sum(len(b) for b in self._corpus.values()),
            "options": self.options.model_dump(mode="json"),
        }

    def initial_skill(self) -> str:
        return (_HERE / "skills" / "initial.md").read_text(encoding="utf-8")

    def items(self) -> list[TaskItem]:
        """Every question of the root, in file order."""
        return list(self._items.values())
