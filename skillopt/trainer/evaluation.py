"""One evaluation of a skill on a split, for the trainer's test evaluations and ``skillopt eval``.

:func:`evaluate_split` rolls the skill out (resumable row by row) and summarises the rows as an
:class:`~skillopt.trainer.rundir.EvalSummary` (a record of the run directory's schema), the one
summary of an evaluation: a run keeps one in each test rollout
directory (``test_eval/summary.json`` ...), ``skillopt eval`` writes one as
``eval_summary.json`` (with what it ran on, and the ``--against`` skill with the paired
difference). Rows lost to infrastructure are never scored: the means, the intervals and the
categories are over the scored rows, and ``ok`` says whether few enough were lost
(``evaluation.max_infra_fraction``) for the numbers to be a measurement.

Usage::

    summary, rows = evaluate_split(rollouts, items, skill, out / "eval_test", label="eval_test",
                                   split="test", skill_name="best_skill.md", config=cfg,
                                   categories=data.task_types())
    summary.hard, summary.hard_ci95, summary.ok
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from skillopt.config import Config
from skillopt.envs.base import TaskItem
from skillopt.gate import PairedTest, gate_score
from skillopt.trainer.rollouts import Rollouts
from skillopt.trainer.rundir.evalsummary import EvalSummary
from skillopt.trainer.scoring import paired_rows
from skillopt.types import RolloutResult, SkillVersion

__all__ = ["compare_rows", "evaluate_split"]


def evaluate_split(
    rollouts: Rollouts,
    items: Sequence[TaskItem],
    skill: SkillVersion,
    out_dir: Path,
    *,
    label: str,
    split: str,
    skill_name: str,
    config: Config,
    categories: Sequence[str],
) -> tuple[EvalSummary, list[RolloutResult]]:
    """Roll ``skill`` out on ``items`` into the rollout dir ``out_dir`` (resumable row by row:
    finished rows are kept, rows lost to infrastructure run again) and summarise the rows.

    Args:
        rollouts: the run's (or the eval's) rollouts.
        items: the split's items, in order.
        skill: the version rolled out.
        out_dir: its rollout dir; ``label`` names it in rollout ids and progress.
        split: the split's name, for the summary.
        skill_name: what the summary says was evaluated (a file).
        config: the run's config (env, ``evaluation.max_infra_fraction``).
        categories: the env's task types (:meth:`EnvData.task_types`).

    Returns:
        The summary and the rows (in item order).

    Raises:
        SystemicFailure: every row so far failed before any model reply.
    """
    rows = rollouts.run(items, skill, out_dir, label=label)
    summary = EvalSummary.of(rows, items, split=split, skill=skill_name, config=config, categories=categories)
    return summary, rows


def compare_rows(
    rows: Sequence[RolloutResult], against: Sequence[RolloutResult], *, metric: str, mixed_weight: float
) -> PairedTest:
    """The paired difference ``rows - against`` over the items both scored, each row scored by
    ``metric`` (``evaluation.gate_metric``: ``hard``, ``soft`` or ``mixed``); a ``none`` test
    (p = 1) when no item was scored on both sides."""
    test = paired_rows(
        rows, against, lambda r: gate_score(r.hard, r.soft, metric=metric, mixed_weight=mixed_weight)
    )
    return test or PairedTest(name="none", p_value=1.0, effect=0.0, ci95=(0.0, 0.0), n=0, wins=0, losses=0)
