"""What a run is made of, decided once from the config and the data (reference §1.2): the
skill it starts from, the splits it uses, steps per epoch, and the epoch's batches
(deterministic given the seed)."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from skillopt.config import Config
from skillopt.envs.base import EnvData, TaskItem
from skillopt.errors import ConfigError
from skillopt.types import SkillVersion

__all__ = [
    "Batch",
    "RunPlan",
    "first",
    "initial_skill",
    "load_data",
    "plan_epoch",
    "sample_items",
    "steps_per_epoch",
]


@dataclass(frozen=True)
class Batch:
    index: int  # batch index within the epoch
    seed: int
    items: tuple[TaskItem, ...]


def load_data(config: Config) -> EnvData:
    """The env's data as ``config.env`` describes it (data root, split, options).

    Raises:
        ConfigError: the data root or its split does not load (the message says what to fix).
    """
    from skillopt.envs.registry import load_env_data

    e = config.env
    return load_env_data(
        e.name,
        data_root=e.data_root,
        split_mode=e.split_mode,
        split_ratio=e.split_ratio,
        split_seed=e.split_seed,
        options=e.options,
    )


def initial_skill(config: Config, data: EnvData) -> SkillVersion:
    """The version a run starts from: the package or SKILL.md that ``env.skill_init`` names,
    else the env's shipped initial skill as a one-file skill.

    Raises:
        SkillPackageError: ``env.skill_init`` breaks a package rule (each one named).
        SkillError: ``env.skill_init`` cannot be read.
    """
    from skillopt.skill.package import load_skill  # the standard's parser: only when used

    e = config.env
    if e.skill_init:
        return load_skill(Path(e.skill_init), limits=e.skill_limits)
    return SkillVersion(content=data.initial_skill())


def first(items: Sequence[TaskItem], n: int) -> list[TaskItem]:
    """The first ``n`` items (all of them when ``n`` is 0 or negative)."""
    return list(items[:n] if n and n > 0 else items)


def steps_per_epoch(train_size: int, batch_size: int, accumulation: int) -> int:
    if train_size <= 0:
        raise ConfigError("the train split is empty; check env.data_root and the split settings")
    return math.ceil(train_size / (batch_size * accumulation))


@dataclass(frozen=True, kw_only=True)
class RunPlan:
    """The splits and the step counts of a run.

    Raises (from :meth:`of`):
        ConfigError: ``train.train_size`` disagrees with the split, or the selection split is
            empty (the gate needs held-out items).
    """

    train: tuple[TaskItem, ...]
    selection: tuple[TaskItem, ...]
    test: tuple[TaskItem, ...]
    #: ``id → (instruction, task type)`` of the train and selection items (reflection prompts).
    task_texts: Mapping[str, tuple[str, str]]
    steps_per_epoch: int
    total_steps: int
    num_epochs: int
    #: ``none`` in full-rewrite mode (no edit budget), else ``optimizer.lr_control_mode``.
    lr_mode: str
    full_rewrite: bool
    #: The selection split's items beyond ``evaluation.sel_env_num`` (the ``sequential`` gate's
    #: later rounds draw these before repeating selection items).
    selection_reserve: tuple[TaskItem, ...] = ()

    def round_size(self, fraction: float = 1.0) -> int:
        """How many items a round after the first measures: ``max(1, round(fraction * n))``
        of the ``n`` selection items."""
        return max(1, round(fraction * len(self.selection)))

    def round_order(self, seed: int) -> tuple[TaskItem, ...]:
        """Every item a later round may measure, in the run's order: the reserve, then the
        selection items, each shuffled by ``seed`` (the ``fixed`` rounds' sequence, and the
        ``discordant`` rounds' tie order)."""
        rng = random.Random(f"{seed}:gate-rounds")
        reserve = list(self.selection_reserve)
        rng.shuffle(reserve)
        repeats = list(self.selection)
        rng.shuffle(repeats)
        return (*reserve, *repeats)

    def round_items(self, round_no: int, *, seed: int, fraction: float = 1.0) -> tuple[TaskItem, ...]:
        """The items of round ``round_no`` of the ``sequential`` gate with
        ``evaluation.gate_round_items: fixed``: round 1 is the selection items; each later round
        :meth:`round_size` items, taken in turn from one sequence: :meth:`round_order`, its
        selection items over and over (so the same run seed gives every skill the same rounds,
        and a round's items are new while the split has new ones)."""
        if round_no <= 1:
            return self.selection
        size = self.round_size(fraction)
        order = self.round_order(seed)
        n_reserve = len(self.selection_reserve)
        repeats = order[n_reserve:]
        start = (round_no - 2) * size
        return tuple(
            order[i] if i < n_reserve else repeats[(i - n_reserve) % len(repeats)]
            for i in range(start, start + size)
        )

    @classmethod
    def of(cls, config: Config, data: EnvData) -> RunPlan:
        train = data.split("train")
        whole = data.split("selection")
        selection = first(whole, config.evaluation.sel_env_num)
        n_train = config.train.train_size or len(train)
        if n_train != len(train):
            raise ConfigError(
                f"train.train_size is {config.train.train_size} but the train split has {len(train)} items; "
                "set train.train_size=0 to use the split"
            )
        if not selection:
            raise ConfigError("the selection (val) split is empty: the gate needs held-out items")
        t = config.train
        per_epoch = steps_per_epoch(n_train, t.batch_size, t.accumulation)
        full_rewrite = config.optimizer.skill_update_mode == "full_rewrite_minibatch"
        return cls(
            train=tuple(train),
            selection=tuple(selection),
            test=tuple(first(data.split("test"), config.evaluation.test_env_num)),
            task_texts={it.id: (it.task.instruction, it.task_type) for it in [*train, *selection]},
            steps_per_epoch=per_epoch,
            total_steps=t.num_epochs * per_epoch,
            num_epochs=t.num_epochs,
            lr_mode="none" if full_rewrite else config.optimizer.lr_control_mode,
            full_rewrite=full_rewrite,
            selection_reserve=tuple(whole[len(selection) :]),
        )

    def epoch_steps(self, epoch: int) -> range:
        """The global step numbers of ``epoch``."""
        return range((epoch - 1) * self.steps_per_epoch + 1, epoch * self.steps_per_epoch + 1)


def plan_epoch(
    items: Sequence[TaskItem], *, epoch: int, seed: int, batch_size: int, n_batches: int
) -> list[Batch]:
    """Shuffle the train items with ``Random(seed + epoch*1000)`` and cut consecutive batches;
    when slices run out (small sets with accumulation) a batch is refilled from a reshuffled
    copy. Batch seed = ``seed + epoch*1000 + index + 1``."""
    order = list(items)
    random.Random(seed + epoch * 1000).shuffle(order)
    batches = []
    for b in range(n_batches):
        chunk = order[b * batch_size : (b + 1) * batch_size]
        if not chunk:
            refill = list(items)
            random.Random(seed + epoch * 1000 + b + 1).shuffle(refill)
            chunk = refill[:batch_size]
        batches.append(Batch(index=b, seed=seed + epoch * 1000 + b + 1, items=tuple(chunk)))
    return batches


def sample_items(
    items: Sequence[TaskItem], n: int, seed: int, *, exclude: set[str] | None = None
) -> list[TaskItem]:
    """The first ``n`` items of a ``Random(seed)`` shuffle (optionally skipping some ids)."""
    order = [it for it in items if not exclude or it.id not in exclude]
    random.Random(seed).shuffle(order)
    return order[:n]
