"""One evaluation of a skill on a split, for the trainer's test evaluations and ``skillopt eval``.

:func:`evaluate_split` rolls the skill out (resumable row by row) and summarises the rows as an
:class:`EvalSummary`, the one summary of an evaluation: a run keeps one in each test rollout
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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillopt.config import Config
from skillopt.envs.base import TaskItem
from skillopt.gate import Interval, PairedTest, ci_json, ci_of, gate_score, mean_interval
from skillopt.trainer.rollouts import Rollouts
from skillopt.trainer.scoring import paired_rows, score_rows, too_many_infra
from skillopt.types import RolloutResult, SkillSpec

__all__ = ["CategoryScore", "EvalSummary", "compare_rows", "evaluate_split"]

#: The category every scored row falls in (the old test summaries' ``overall`` key).
_OVERALL = "overall"


@dataclass(frozen=True, kw_only=True)
class CategoryScore:
    """The scored rows of one category (``task_type``) and their hard accuracy."""

    total: int
    hard: float
    hard_ci95: Interval | None = None

    def to_json(self) -> dict[str, Any]:
        return {"total": self.total, "hard_acc": self.hard, "hard_acc_ci95": ci_json(self.hard_ci95)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> CategoryScore:
        return cls(
            total=int(d.get("total", 0)),
            hard=float(d.get("hard_acc", d.get("hard")) or 0.0),
            hard_ci95=ci_of(d.get("hard_acc_ci95", d.get("hard_ci95"))),
        )


@dataclass(frozen=True, kw_only=True)
class EvalSummary:
    """A skill's scores on a split.

    ``n_items`` rows were made, ``n_scored`` of them scored (the rest, ``n_infra``, were lost
    to infrastructure); ``hard``/``soft`` are means over the scored rows with their 95%
    intervals, ``categories`` the same per ``task_type``. The fields after ``env`` are only
    ``skillopt eval``'s (``None``/empty in a run's test evaluations, whose run has them in
    ``summary.json``).
    """

    #: The split (``test``; ``skillopt eval --split``: ``train``, ``val``, ``test``, ``all``).
    split: str
    #: What was evaluated: a skill file (``skillopt eval``: its path; a run: the file in the
    #: run directory, ``best_skill.md``, ``skills/skill_v0000.md`` ...).
    skill: str
    n_items: int
    n_scored: int
    n_infra: int
    hard: float
    soft: float
    hard_ci95: Interval | None = None
    soft_ci95: Interval | None = None
    categories: Mapping[str, CategoryScore] = field(default_factory=dict)
    #: ``evaluation.max_infra_fraction`` when it was evaluated.
    max_infra_fraction: float = 1.0
    #: The env: ``name``, ``agent`` and ``options`` (e.g. SpreadsheetBench's grading mode).
    env: Mapping[str, Any] = field(default_factory=dict)
    #: ``--against``: the other skill on the same items, and the paired difference (this
    #: skill minus that one) by ``metric`` (``evaluation.gate_metric``).
    against: EvalSummary | None = None
    difference: PairedTest | None = None
    metric: str = ""
    #: Where and how it ran: the run mode (``RunMode.to_dict()``), the sandbox hosts, the
    #: environment manifest, the target's cacheable prefix share (:mod:`skillopt.models.prefix`).
    mode: Mapping[str, Any] | None = None
    sandbox_hosts: tuple[str, ...] = ()
    environment: Mapping[str, Any] | None = None
    cacheable_prefix_share: float | None = None
    cacheable_prefix: Mapping[str, Any] | None = None

    @property
    def ok(self) -> bool:
        """Few enough rows (of this skill and the ``--against`` one) were lost to
        infrastructure for the means to be a measurement."""
        mine = not too_many_infra(self.n_infra, self.n_items, self.max_infra_fraction)
        return mine and (self.against is None or self.against.ok)

    @classmethod
    def of(
        cls,
        rows: Sequence[RolloutResult],
        items: Sequence[TaskItem],
        *,
        split: str,
        skill: str,
        config: Config,
        categories: Sequence[str],
    ) -> EvalSummary:
        """Summarise ``rows`` (one per item of ``items``). ``categories``: the env's task
        types (:meth:`EnvData.task_types`); a type an item has beyond them is added."""
        s = score_rows(rows)
        scored = [r for r in rows if r.infra_error is None]
        types = {it.id: it.task_type for it in items}
        names = [*categories, *sorted(set(types.values()) - set(categories))]
        return cls(
            split=split,
            skill=skill,
            n_items=len(rows),
            n_scored=s.n,
            n_infra=s.n_infra,
            hard=s.hard,
            soft=s.soft,
            hard_ci95=mean_interval([r.hard for r in scored]),
            soft_ci95=mean_interval([r.soft for r in scored]),
            categories={t: _category([r for r in scored if types.get(r.id) == t]) for t in names},
            max_infra_fraction=config.evaluation.max_infra_fraction,
            env={"name": config.env.name, "agent": config.env.agent, "options": dict(config.env.options)},
        )

    def to_json(self) -> dict[str, Any]:
        """The summary's JSON form (``eval_summary.json``; a run's test summaries add
        :meth:`legacy_json`)."""
        out: dict[str, Any] = {
            "skill": self.skill,
            "split": self.split,
            "n_items": self.n_items,
            "n_scored": self.n_scored,
            "hard": self.hard,
            "hard_ci95": ci_json(self.hard_ci95),
            "soft": self.soft,
            "soft_ci95": ci_json(self.soft_ci95),
            "n_infra": self.n_infra,
            "max_infra_fraction": self.max_infra_fraction,
            "ok": self.ok,
            "by_task_type": {name: c.to_json() for name, c in self.categories.items()},
            "env": dict(self.env),
        }
        if self.mode is not None:
            out.update(simulated=bool(self.mode.get("simulated")), mode=dict(self.mode))
        if self.mode is not None or self.sandbox_hosts:
            out["sandbox_hosts"] = list(self.sandbox_hosts)
        if self.environment is not None:
            out["environment"] = dict(self.environment)
        if self.against is not None:
            difference = {**self.difference.to_json(), "metric": self.metric} if self.difference else None
            out["against"] = {**self.against.to_json(), "difference": difference}
        if self.cacheable_prefix is not None:
            out["cacheable_prefix_share"] = self.cacheable_prefix_share
            out["cacheable_prefix"] = dict(self.cacheable_prefix)
        return out

    def legacy_json(self) -> dict[str, Any]:
        """The keys a run's test summaries had before this summary was shared with ``skillopt
        eval``, still written there: the categories at the top level with ``overall``, ``n``
        (= ``n_scored``) and ``env_options`` (= ``env.options``). Read by the e2e tests
        (``test_qa_e2e``, ``test_textworld_e2e``) and by tools written against those files."""
        overall = CategoryScore(total=self.n_scored, hard=self.hard, hard_ci95=self.hard_ci95)
        return {
            **{name: c.to_json() for name, c in self.categories.items()},
            _OVERALL: overall.to_json(),
            "n": self.n_scored,
            "env_options": dict(self.env.get("options") or {}),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> EvalSummary:
        """Parse either file of any version: ``eval_summary.json`` (``n_items``, ``n_scored``,
        ``by_task_type``, ``env``) or a run's test summary, also one written before they were
        one summary (categories at the top level, ``n`` scored rows, ``env_options``).

        Raises:
            KeyError, TypeError, ValueError: not an evaluation summary.
        """
        n_infra = int(d.get("n_infra") or 0)
        n_scored = int(d["n_scored"] if "n_scored" in d else d["n"])
        cats = d.get("by_task_type")
        if not isinstance(cats, Mapping):  # an old test summary: categories at the top level
            cats = {k: v for k, v in d.items() if isinstance(v, Mapping) and "total" in v and k != _OVERALL}
        against = d.get("against")
        difference = against.get("difference") if isinstance(against, Mapping) else None
        env = d.get("env")
        if not isinstance(env, Mapping):  # an old test summary: only the env's options
            env = {"options": d.get("env_options") or {}}
        prefix = d.get("cacheable_prefix")
        return cls(
            split=str(d.get("split", "")),
            skill=str(d.get("skill", "")),
            n_items=int(d.get("n_items", n_scored + n_infra)),
            n_scored=n_scored,
            n_infra=n_infra,
            hard=float(d["hard"]),
            soft=float(d.get("soft") or 0.0),
            hard_ci95=ci_of(d.get("hard_ci95")),
            soft_ci95=ci_of(d.get("soft_ci95")),
            categories={
                str(k): CategoryScore.from_json(v) for k, v in cats.items() if isinstance(v, Mapping)
            },
            max_infra_fraction=float(d.get("max_infra_fraction", 1.0)),
            env=dict(env),
            against=cls.from_json(against) if isinstance(against, Mapping) else None,
            difference=_paired_test(difference) if isinstance(difference, Mapping) else None,
            metric=str(difference.get("metric", "")) if isinstance(difference, Mapping) else "",
            mode=d.get("mode") if isinstance(d.get("mode"), Mapping) else None,
            sandbox_hosts=tuple(d.get("sandbox_hosts") or ()),
            environment=d.get("environment") if isinstance(d.get("environment"), Mapping) else None,
            cacheable_prefix_share=d.get("cacheable_prefix_share"),
            cacheable_prefix=prefix if isinstance(prefix, Mapping) else None,
        )


def _category(rows: Sequence[RolloutResult]) -> CategoryScore:
    hard = [r.hard for r in rows]
    return CategoryScore(
        total=len(rows), hard=sum(hard) / len(hard) if hard else 0.0, hard_ci95=mean_interval(hard)
    )


def _paired_test(d: Mapping[str, Any]) -> PairedTest:
    ci = ci_of(d.get("ci95")) or (0.0, 0.0)
    return PairedTest(
        name=str(d.get("name", "none")),
        p_value=float(d.get("p_value", 1.0)),
        effect=float(d.get("effect", 0.0)),
        ci95=ci,
        n=int(d.get("n", 0)),
        wins=int(d.get("wins", 0)),
        losses=int(d.get("losses", 0)),
    )


def evaluate_split(
    rollouts: Rollouts,
    items: Sequence[TaskItem],
    skill: str | SkillSpec,
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
        skill: the skill's text (rolled out in ``rollouts.frame``) or its whole package.
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
