"""TextWorld games from a vendored seed list, generated on first use and cached by seed.

The data of this env is a *generator config* (``data/sample/games.json``): for each game its
challenge (``tw-coin_collector``, ``tw-treasure_hunter``, ``tw-cooking``), level, seed and
split. :func:`ensure_game` generates a game with TextWorld's own challenge generators (what
``tw-make`` runs) into ``<cache>/<textworld version>/<game id>/`` once; later calls read the
cache. Nothing is downloaded. Generation needs the ``textworld`` package on the controller
(``pip install 'skillopt[textworld]'``); playing happens in the rollout container.

A cache entry is complete when its ``meta.json`` exists: it is written into a temporary folder
that is renamed into place, so concurrent processes (the trainer and the simulation server)
never see half a game.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillopt.errors import ConfigError

__all__ = [
    "CHALLENGES",
    "GAMES_FILE",
    "GameMeta",
    "GameSpec",
    "cache_root",
    "ensure_game",
    "load_game_specs",
]

GAMES_FILE = Path(__file__).parent / "data" / "sample" / "games.json"

#: Challenge -> level -> the settings its generator takes. Coin collector and treasure hunter
#: have levels of their own; the cooking game's levels are presets of its skills (``tw-make
#: tw-cooking --help``), harder with each level.
_COOKING = {
    1: {"recipe": 1, "take": 1, "go": 1},
    2: {"recipe": 2, "take": 2, "go": 1, "open": True},
    3: {"recipe": 2, "take": 2, "go": 6, "open": True, "cook": True, "cut": True},
}
_COOKING_DEFAULTS = {
    "recipe": 1,
    "take": 0,
    "go": 1,
    "open": False,
    "cook": False,
    "cut": False,
    "drop": False,
    "recipe_seed": 0,
    "split": None,
}
CHALLENGES = ("tw-coin_collector", "tw-treasure_hunter", "tw-cooking")


@dataclass(frozen=True, kw_only=True)
class GameSpec:
    """One game of the seed list."""

    challenge: str
    level: int
    seed: int
    split: str

    def __post_init__(self) -> None:
        if self.challenge not in CHALLENGES:
            raise ConfigError(
                f"textworld: unknown challenge {self.challenge!r}; use one of {', '.join(CHALLENGES)}"
            )
        if self.challenge == "tw-cooking" and self.level not in _COOKING:
            raise ConfigError(f"textworld: tw-cooking levels are {sorted(_COOKING)}, got {self.level}")
        if not 1 <= self.level <= 300:
            raise ConfigError(f"textworld: level must be in 1..300, got {self.level}")

    @property
    def short(self) -> str:
        return self.challenge.removeprefix("tw-")

    @property
    def id(self) -> str:
        """Filesystem-safe and unique per (challenge, level, seed), e.g. ``coin_collector-l5-s101``."""
        return f"{self.short}-l{self.level}-s{self.seed}"

    @property
    def category(self) -> str:
        """The per-category breakdown row: challenge and level, e.g. ``coin_collector_l5``."""
        return f"{self.short}_l{self.level}"

    def settings(self) -> dict[str, Any]:
        if self.challenge == "tw-cooking":
            return {**_COOKING_DEFAULTS, **_COOKING[self.level]}
        return {"level": self.level}


@dataclass(frozen=True, kw_only=True)
class GameMeta:
    """A generated game: its files and what the trusted side knows about it."""

    spec: GameSpec
    folder: Path
    objective: str
    walkthrough: tuple[str, ...]
    max_score: int
    textworld_version: str
    generation_s: float

    @property
    def z8(self) -> Path:
        return self.folder / "game.z8"

    @property
    def game_json(self) -> Path:
        return self.folder / "game.json"


def load_game_specs(path: Path) -> list[GameSpec]:
    """The seed list in ``path`` (``{"games": [{challenge, level, seed, split}, ...]}``).

    Raises:
        ConfigError: unreadable file, bad entry or a duplicate game.
    """
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        specs = [
            GameSpec(
                challenge=g["challenge"], level=int(g["level"]), seed=int(g["seed"]), split=str(g["split"])
            )
            for g in raw["games"]
        ]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"textworld: cannot read the game list {path}: {exc}") from exc
    ids = [s.id for s in specs]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ConfigError(f"textworld: {path} lists games twice: {', '.join(dupes)}")
    return specs


def textworld_version() -> str:
    try:
        import textworld
    except ImportError as exc:
        raise ConfigError(
            "the textworld env generates its games with the textworld package: pip install 'skillopt[textworld]'"
        ) from exc
    return str(textworld.__version__)


def cache_root() -> Path:
    """Where games are cached: ``$SKILLOPT_TEXTWORLD_CACHE``, else ``~/.cache/skillopt/textworld``."""
    env = os.environ.get("SKILLOPT_TEXTWORLD_CACHE", "")
    return Path(env) if env else Path.home() / ".cache" / "skillopt" / "textworld"


def _read_meta(spec: GameSpec, folder: Path) -> GameMeta | None:
    try:
        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not ((folder / "game.z8").is_file() and (folder / "game.json").is_file()):
        return None
    return GameMeta(
        spec=spec,
        folder=folder,
        objective=meta["objective"],
        walkthrough=tuple(meta["walkthrough"]),
        max_score=int(meta["max_score"]),
        textworld_version=meta["textworld_version"],
        generation_s=float(meta.get("generation_s", 0.0)),
    )


def ensure_game(spec: GameSpec, root: Path | None = None) -> GameMeta:
    """The game of ``spec``, generated into the cache on first use.

    Raises:
        ConfigError: textworld is missing or cannot generate this game.
    """
    version = textworld_version()
    folder = (root or cache_root()) / f"tw-{version}" / spec.id
    meta = _read_meta(spec, folder)
    if meta is not None:
        return meta
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{spec.id}-", dir=folder.parent))
    try:
        t0 = time.monotonic()
        game = _generate(spec, tmp / "game.z8")
        info = {
            "id": spec.id,
            "challenge": spec.challenge,
            "level": spec.level,
            "seed": spec.seed,
            "settings": spec.settings(),
            "objective": game.objective,
            "walkthrough": list(game.walkthrough or []),
            "max_score": int(game.max_score),
            "textworld_version": version,
            "generation_s": round(time.monotonic() - t0, 3),
        }
        (tmp / "game.ni").unlink(missing_ok=True)  # the Inform 7 source: not needed to play
        (tmp / "meta.json").write_text(json.dumps(info, indent=1), encoding="utf-8")
        with contextlib.suppress(OSError):  # another process finished the same game first: use its
            os.rename(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    meta = _read_meta(spec, folder)
    if meta is None:
        raise ConfigError(f"textworld: generating {spec.id} left no complete game in {folder}")
    return meta


def _generate(spec: GameSpec, path: Path):
    import textworld
    import textworld.challenges
    from textworld.generator import compile_game

    options = textworld.GameOptions()
    options.seeds = spec.seed
    options.path = str(path)
    options.file_ext = ".z8"
    options.force_recompile = True
    _desc, make, _args = textworld.challenges.CHALLENGES[spec.challenge]
    try:
        game = make(settings=spec.settings(), options=options)
        compile_game(game, options)
    except Exception as exc:  # the generator's own errors (no quest for these settings, ...)
        raise ConfigError(f"textworld: cannot generate {spec.id}: {type(exc).__name__}: {exc}") from exc
    if not game.walkthrough or game.max_score <= 0:
        raise ConfigError(f"textworld: {spec.id} has no walkthrough or no score to reach")
    return game
