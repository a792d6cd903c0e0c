"""The one summary of an evaluation, :class:`EvalSummary`: a run's test evaluations
(``test_eval/summary.json`` ...) and ``skillopt eval``'s ``eval_summary.json`` (with what it
ran on, and the ``--against`` skill with the paired difference). Made by
:func:`skillopt.trainer.evaluation.evaluate_split`; read back, of any version, with
:meth:`EvalSummary.from_json`.

Versions (``schema_version``): 1 is this shape. 0 (no version) is either file before it was
versioned: ``eval_summary.json`` had the same keys (the oldest without intervals), and a run's
test summary before it was shared with ``skillopt eval`` held its categories at the top level
with ``overall``, ``n`` (the scored rows) and ``env_options``; both read as version 1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from skillopt.config import Config
from skillopt.envs.base import TaskItem
from skillopt.gate import Interval, PairedTest, ci_json, ci_of, mean_interval
from skillopt.trainer.scoring import score_rows, too_many_infra
from skillopt.trainer.state import RunMode
from skillopt.trainer.versions import upgrade
from skillopt.types import RolloutResult

__all__ = ["EVAL_SUMMARY_VERSION", "CategoryScore", "EvalSummary"]

#: ``eval_summary.json`` and a run's test summaries (``schema_version``).
EVAL_SUMMARY_VERSION = 1

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
    #: Where and how it ran: the run mode, the sandbox hosts, the environment manifest, the
    #: target's cacheable prefix share (:mod:`skillopt.models.prefix`).
    mode: RunMode | None = None
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
            out.update(simulated=self.mode.simulated, mode=self.mode.to_dict())
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
        out["schema_version"] = EVAL_SUMMARY_VERSION
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
    def from_json(cls, data: Any) -> EvalSummary:
        """Parse either file of any version (:func:`_from_v0` brings a version 0 summary to
        this shape).

        Raises:
            RecordError: written by a newer skillopt, or not a JSON object.
            KeyError, TypeError, ValueError: not an evaluation summary.
        """
        d = upgrade(data, key="schema_version", current=EVAL_SUMMARY_VERSION, steps={0: _from_v0})
        against = d.get("against")
        difference = against.get("difference") if isinstance(against, Mapping) else None
        prefix = d.get("cacheable_prefix")
        environment = d.get("environment")
        mode = d.get("mode")
        return cls(
            split=str(d.get("split", "")),
            skill=str(d.get("skill", "")),
            n_items=int(d["n_items"]),
            n_scored=int(d["n_scored"]),
            n_infra=int(d.get("n_infra") or 0),
            hard=float(d["hard"]),
            soft=float(d.get("soft") or 0.0),
            hard_ci95=ci_of(d.get("hard_ci95")),
            soft_ci95=ci_of(d.get("soft_ci95")),
            categories={str(k): CategoryScore.from_json(v) for k, v in (d.get("by_task_type") or {}).items()},
            max_infra_fraction=float(d.get("max_infra_fraction", 1.0)),
            env=dict(d.get("env") or {}),
            against=cls.from_json(against) if isinstance(against, Mapping) else None,
            difference=_paired_test(difference) if isinstance(difference, Mapping) else None,
            metric=str(difference.get("metric", "")) if isinstance(difference, Mapping) else "",
            mode=RunMode.from_dict(mode) if isinstance(mode, Mapping) else None,
            sandbox_hosts=tuple(d.get("sandbox_hosts") or ()),
            environment=environment if isinstance(environment, Mapping) else None,
            cacheable_prefix_share=d.get("cacheable_prefix_share"),
            cacheable_prefix=prefix if isinstance(prefix, Mapping) else None,
        )


def _from_v0(d: dict[str, Any]) -> dict[str, Any]:
    """Version 0 → 1: a run's test summary from before it was shared with ``skillopt eval``
    (categories at the top level beside ``overall``, ``n`` scored rows, ``env_options``) gets
    ``n_scored``, ``n_items``, ``by_task_type`` and ``env``; an ``eval_summary.json`` had them."""
    n_infra = int(d.get("n_infra") or 0)
    d.setdefault("n_scored", d["n"] if "n" in d else d.get("n_scored"))
    if d["n_scored"] is None:
        raise KeyError("n_scored")
    d.setdefault("n_items", int(d["n_scored"]) + n_infra)
    if not isinstance(d.get("by_task_type"), Mapping):
        d["by_task_type"] = {
            k: v for k, v in d.items() if isinstance(v, Mapping) and "total" in v and k != _OVERALL
        }
    if not isinstance(d.get("env"), Mapping):
        d["env"] = {"options": d.get("env_options") or {}}
    return d


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
