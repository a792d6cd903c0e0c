"""TextWorld data as the trainer sees it: games generated from the seed list, split by it."""

from __future__ import annotations

from pathlib import Path

from skillopt.envs.base import TaskItem
from skillopt.envs.textworld.games import (
    GAMES_FILE,
    GameMeta,
    GameSpec,
    cache_root,
    ensure_game,
    load_game_specs,
)
from skillopt.envs.textworld.spec import TextWorldOptions
from skillopt.errors import ConfigError
from skillopt.types import File, Grading, Task, TestCase

__all__ = ["INITIAL_SKILL", "TextWorldData", "game_item"]

INITIAL_SKILL = Path(__file__).parent / "skills" / "initial.md"
_CANONICAL = {
    "train": "train",
    "val": "val",
    "valid_seen": "val",
    "selection": "val",
    "dev": "val",
    "test": "test",
    "valid_unseen": "test",
}


def game_item(meta: GameMeta, options: TextWorldOptions) -> TaskItem:
    """The task item of a generated game: the game files go to the container; the max score
    and the walkthrough stay on the grading side."""
    spec = meta.spec
    task = Task(
        id=spec.id,
        instruction=meta.objective,
        attributes={
            "challenge": spec.challenge,
            "level": spec.level,
            "seed": spec.seed,
            "category": spec.category,
            "history_length": options.history_length,
            "step_timeout_s": options.step_timeout_s,
        },
        cases=(
            TestCase(
                name="game",
                files=(
                    File(name="game.json", content=meta.game_json.read_bytes()),
                    File(name="game.z8", content=meta.z8.read_bytes()),
                ),
            ),
        ),
    )
    grading = Grading(attributes={"max_score": meta.max_score, "walkthrough": list(meta.walkthrough)})
    return TaskItem(task=task, grading=grading, task_type=spec.category)


class TextWorldData:
    """Splits of generated games.

    Args:
        data_root: a folder with ``games.json`` (a seed list); ``""`` = the vendored one.
        split_mode: ``split_file`` (each game's ``split``) or ``ratio`` (every game pooled and
            split with ``split_ratio``/``split_seed``).
        options: ``env.options``.
    """

    def __init__(
        self,
        data_root: str = "",
        *,
        split_mode: str = "split_file",
        split_ratio: str = "2:1:7",
        split_seed: int = 42,
        options: TextWorldOptions | None = None,
    ) -> None:
        if split_mode not in ("split_file", "ratio"):
            raise ConfigError(f"env.split_mode must be split_file or ratio, got {split_mode!r}")
        self.options = options or TextWorldOptions()
        self.games_file = Path(data_root) / "games.json" if data_root else GAMES_FILE
        self.specs = load_game_specs(self.games_file)
        self.split_mode = split_mode
        self._splits: dict[str, list[GameSpec]] = {"train": [], "val": [], "test": []}
        if split_mode == "split_file":
            for s in self.specs:
                if s.split not in self._splits:
                    raise ConfigError(f"textworld: game {s.id} has split {s.split!r}; use train, val or test")
                self._splits[s.split].append(s)
        else:
            from skillopt.envs.splits import ratio_split

            by_id = {s.id: s for s in self.specs}
            try:
                parts = ratio_split(list(by_id), split_ratio, split_seed)
            except ValueError as exc:
                raise ConfigError(f"env.split_ratio: {exc}") from exc
            self._splits = {name: [by_id[i] for i in ids] for name, ids in parts.items()}
        self._items: dict[str, TaskItem] = {}

    def split(self, name: str) -> list[TaskItem]:
        if name not in _CANONICAL:
            raise ConfigError(f"unknown split {name!r}; use train, val or test")
        items = []
        for spec in self._splits[_CANONICAL[name]]:
            item = self._items.get(spec.id)
            if item is None:
                item = self._items[spec.id] = game_item(ensure_game(spec), self.options)
            items.append(item)
        return items

    def split_sizes(self) -> dict[str, int]:
        """Games per split, without generating them (``skillopt data check``, start lines)."""
        return {k: len(v) for k, v in self._splits.items()}

    def task_types(self) -> list[str]:
        return sorted({s.category for s in self.specs})

    def describe(self) -> dict:
        return {
            "games_file": str(self.games_file),
            "cache": str(cache_root()),
            "split_mode": self.split_mode,
            "counts": {k: len(v) for k, v in self._splits.items()},
            "categories": self.task_types(),
        }

    def initial_skill(self) -> str:
        return INITIAL_SKILL.read_text(encoding="utf-8")
