"""``skillopt sleep mine``: harvested sessions → tasks of the ``sleep`` env, split by session.

::

    <out>/                         (default .skillopt/sleep/mined/<UTC timestamp>/)
      mined.json                   MineManifest: sessions per split, counts, miner, record hashes
      data/train.json              the env's split files (MinedItem lists, checkable tasks only);
      data/val.json                  val is the selection split the gate uses
      data/test.json
      unchecked.json               tasks with no checkable reference (kept out of every split)

``--set env.name=sleep --set env.data_root=<out>`` trains on it (:class:`skillopt.envs.sleep.data.SleepData`).

**Split by session.** Each session's split comes from a hash of the seed and its
``source:session_id`` (:func:`split_of`): the same harvest and seed give the same splits, a
session keeps its split when later harvests add sessions (a task tested once never moves into
train), and no session gives tasks to two splits. A split below its minimum size is reported,
not filled from the others.

**Tasks without a reference** are dropped from the split files, not trained on: a train task
the trainer cannot score teaches nothing, and the gate must never see one. They are listed in
``unchecked.json`` with the reason, for a person (or a later model miner) to look at.

Every text written here comes from already-redacted harvest records (or a model's reply about
them) and is marked ``from_transcript``: data, never instructions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

import structlog
from pydantic import BaseModel, ConfigDict, ValidationError

from skillopt.durable import atomic_write_json
from skillopt.envs.sleep.items import CATEGORIES, MinedItem
from skillopt.errors import ConfigError
from skillopt.sleep.record import HarvestedSession
from skillopt.sleep.rules import session_key
from skillopt.sleep.store import INDEX, HarvestStore

__all__ = [
    "DEFAULT_RATIO",
    "MANIFEST_VERSION",
    "SPLITS",
    "MineConfig",
    "MineManifest",
    "MineResult",
    "Miner",
    "NothingMined",
    "mine",
    "split_of",
]

log = structlog.get_logger(__name__)

MANIFEST_VERSION = 1
#: The splits, in order, and the file each is written to (``val`` is the selection split).
SPLITS: tuple[str, ...] = ("train", "selection", "test")
_FILES = {"train": "train.json", "selection": "val.json", "test": "test.json"}
#: Share of sessions per split, in :data:`SPLITS` order.
DEFAULT_RATIO: tuple[float, float, float] = (0.6, 0.2, 0.2)


class Miner(Protocol):
    """Turns one harvested session into one task (``reference=None`` when nothing checkable).

    ``preview`` is exactly what the miner would send to a model for the session (``""`` when it
    calls none): ``--dry-run`` prints it and sends nothing.
    """

    name: str

    def mine(self, session: HarvestedSession) -> MinedItem: ...

    def preview(self, session: HarvestedSession) -> str: ...


class NothingMined(ConfigError):
    """No session gave a task with a checkable reference; the message says why, by reason."""


@dataclass(frozen=True, kw_only=True)
class MineConfig:
    """What to mine and where to.

    Attributes:
        harvest: the harvest folder (``skillopt sleep harvest --out``).
        out: the output folder (created; files in it are replaced).
        seed: the split seed (the same seed gives the same splits).
        ratio: share of sessions for train, selection, test.
        min_sizes: the fewest tasks a split should have; fewer is reported.
        dry_run: mine and split, write nothing.
    """

    harvest: Path
    out: Path
    seed: int = 0
    ratio: tuple[float, float, float] = DEFAULT_RATIO
    min_sizes: Mapping[str, int] = field(default_factory=lambda: {"train": 2, "selection": 1, "test": 1})
    dry_run: bool = False

    def __post_init__(self) -> None:
        if len(self.ratio) != 3 or any(r < 0 for r in self.ratio) or sum(self.ratio) <= 0:
            raise ConfigError(
                f"split ratio {self.ratio}: give three non-negative shares (train, selection, test)"
            )


class SplitInfo(BaseModel):
    """One split in the manifest: its sessions and task count."""

    model_config = ConfigDict(frozen=True)

    file: str
    tasks: int
    minimum: int
    sessions: list[str]


class MineManifest(BaseModel):
    """``mined.json``."""

    model_config = ConfigDict(frozen=True)

    version: int = MANIFEST_VERSION
    created_at: datetime
    harvest: str
    miner: str
    model: str = ""
    seed: int
    ratio: tuple[float, float, float]
    env: dict[str, str]
    splits: dict[str, SplitInfo]
    below_minimum: list[str]
    counts: dict[str, int]
    by_kind: dict[str, int]
    by_rule: dict[str, int]
    unchecked_reasons: dict[str, int]
    corrupt_records: list[str]
    records: dict[str, str]


@dataclass(frozen=True)
class MineResult:
    """What a mine found (and, unless a dry run, wrote)."""

    manifest: MineManifest
    tasks: dict[str, tuple[MinedItem, ...]]
    unchecked: tuple[MinedItem, ...]
    out: Path | None


def split_of(session: str, seed: int, ratio: tuple[float, float, float] = DEFAULT_RATIO) -> str:
    """The split of session ``source:session_id``: a hash of the seed and the key in [0, 1),
    cut by ``ratio``."""
    digest = hashlib.sha256(f"{seed}\n{session}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / 2**64
    total, edge = sum(ratio), 0.0
    for name, share in zip(SPLITS, ratio, strict=True):
        edge += share / total
        if u < edge:
            return name
    return SPLITS[-1]


def _read_sessions(harvest: Path) -> tuple[list[HarvestedSession], list[str]]:
    store = HarvestStore(harvest)
    if not (harvest / INDEX).is_file() and not (harvest / "sessions").is_dir():
        raise ConfigError(
            f"no harvest found in {harvest}: run `skillopt sleep harvest` first (or give --harvest DIR)"
        )
    sessions, corrupt = [], []
    entries = store.load().entries
    for key in sorted(entries):
        try:
            sessions.append(store.read(entries[key]))
        except (OSError, ValidationError, ValueError) as exc:
            corrupt.append(f"{entries[key].record}: {type(exc).__name__}")
            log.warning("sleep.mine.corrupt_record", record=entries[key].record, error=type(exc).__name__)
    if not sessions and not corrupt:
        raise ConfigError(f"the harvest in {harvest} holds no sessions: run `skillopt sleep harvest` first")
    return sessions, corrupt


def _count(values: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return dict(sorted(out.items()))


def mine(
    config: MineConfig,
    miner: Miner,
    *,
    model: str = "",
    preview: Callable[[HarvestedSession, str], None] | None = None,
) -> MineResult:
    """Mine every session of the harvest, split by session, and write the output.

    Args:
        preview: called with each session and what the miner would send a model (dry run).

    Raises:
        ConfigError: no harvest in ``config.harvest`` (the message says to run harvest first).
        NothingMined: no task has a checkable reference (nothing is written).
        OSError: the output could not be written.
    """
    sessions, corrupt = _read_sessions(config.harvest)
    items: list[tuple[HarvestedSession, MinedItem]] = []
    previewed = 0
    for session in sessions:
        text = miner.preview(session)
        if preview is not None:
            preview(session, text)
        if config.dry_run and text:
            previewed += 1  # a model miner: nothing is sent on a dry run
            continue
        items.append((session, miner.mine(session)))
    checked = [(s, it) for s, it in items if it.reference is not None]
    unchecked = tuple(it for _, it in items if it.reference is None)
    by_split: dict[str, list[MinedItem]] = {name: [] for name in SPLITS}
    sessions_of: dict[str, list[str]] = {name: [] for name in SPLITS}
    for _, it in checked:
        name = split_of(it.session, config.seed, config.ratio)
        by_split[name].append(it)
        sessions_of[name].append(it.session)
    manifest = _manifest(config, miner, model, items, by_split, sessions_of, unchecked, corrupt)
    tasks = {k: tuple(sorted(v, key=lambda it: it.id)) for k, v in by_split.items()}
    if not checked and not previewed:
        reasons = ", ".join(f"{r} {n}" for r, n in manifest.unchecked_reasons.items()) or "no sessions read"
        raise NothingMined(
            f"no task with a checkable reference in {len(sessions)} sessions ({len(corrupt)} corrupt records "
            f"skipped); why: {reasons}. Harvest more sessions (skillopt sleep harvest), or try --miner model"
        )
    if config.dry_run:
        return MineResult(manifest, tasks, unchecked, None)
    data = config.out / "data"
    for name in SPLITS:
        atomic_write_json(data / _FILES[name], [it.model_dump(mode="json") for it in tasks[name]])
    atomic_write_json(config.out / "unchecked.json", [it.model_dump(mode="json") for it in unchecked])
    atomic_write_json(config.out / "mined.json", manifest.model_dump(mode="json"))
    log.info("sleep.mine.done", out=str(config.out), **{k: len(v) for k, v in tasks.items()})
    return MineResult(manifest, tasks, unchecked, config.out)


def _manifest(
    config: MineConfig,
    miner: Miner,
    model: str,
    items: list[tuple[HarvestedSession, MinedItem]],
    by_split: dict[str, list[MinedItem]],
    sessions_of: dict[str, list[str]],
    unchecked: tuple[MinedItem, ...],
    corrupt: list[str],
) -> MineManifest:
    splits = {
        name: SplitInfo(
            file=f"data/{_FILES[name]}",
            tasks=len(by_split[name]),
            minimum=int(config.min_sizes.get(name, 0)),
            sessions=sorted(set(sessions_of[name])),
        )
        for name in SPLITS
    }
    checked = [it for _, it in items if it.reference is not None]
    return MineManifest(
        created_at=datetime.now(UTC),
        harvest=str(config.harvest),
        miner=miner.name,
        model=model,
        seed=config.seed,
        ratio=config.ratio,
        env={"name": "sleep", "data_root": str(config.out.resolve())},
        splits=splits,
        below_minimum=[n for n, s in splits.items() if s.tasks < s.minimum],
        counts={
            "sessions_read": len(items),
            "corrupt_records": len(corrupt),
            "checkable": len(checked),
            "unchecked": len(unchecked),
        },
        by_kind={k: sum(1 for it in checked if it.reference and it.reference.kind == k) for k in CATEGORIES},
        by_rule=_count([it.rule for it in checked]),
        unchecked_reasons=_count([_reason(it) for it in unchecked]),
        corrupt_records=corrupt,
        records={session_key(s): s.sha256 for s, _ in items},
    )


def _reason(item: MinedItem) -> str:
    """A short reason for the counts: the rule that rejected, or the note's head."""
    return item.rule if item.rule not in ("", "none") else "no rule applies"
