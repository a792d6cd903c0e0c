"""Typed, frozen records of a whole run: :class:`EpochRecord` per epoch, :class:`TestScores`,
and :class:`FitResult`, what :meth:`Trainer.fit` returns and ``summary.json`` holds (its JSON
form keeps the shape it has always had, plus a ``schema_version``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from skillopt.gate import Interval, ci_json, ci_of
from skillopt.trainer.records import SCHEMA_VERSION, StepRecord, pick_fields
from skillopt.trainer.versions import upgrade

__all__ = ["EpochRecord", "FitResult", "TestScores"]


@dataclass(frozen=True, kw_only=True)
class EpochRecord:
    """An epoch's decisions (``summary.json``'s ``epoch_stats``)."""

    epoch: int
    steps: int
    accepts: int
    rejects: int
    skips: int
    best_score_at_epoch_end: float | None
    current_score_at_epoch_end: float | None
    best_score_at_epoch_end_ci95: Interval | None = None
    current_score_at_epoch_end_ci95: Interval | None = None

    @classmethod
    def of(
        cls,
        epoch: int,
        history: list[StepRecord],
        *,
        best: float | None,
        current: float | None,
        best_ci95: Interval | None = None,
        current_ci95: Interval | None = None,
    ) -> EpochRecord:
        recs = [r for r in history if r.epoch == epoch]
        return cls(
            epoch=epoch,
            steps=len(recs),
            accepts=sum(r.accepted for r in recs),
            rejects=sum(r.action == "reject" for r in recs),
            skips=sum(r.action.startswith("skip") for r in recs),
            best_score_at_epoch_end=best,
            current_score_at_epoch_end=current,
            best_score_at_epoch_end_ci95=best_ci95,
            current_score_at_epoch_end_ci95=current_ci95,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = ci_json(ci_of(value)) if f.name.endswith("_ci95") else value
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> EpochRecord:
        kwargs = pick_fields(cls, d)
        for name in ("best_score_at_epoch_end_ci95", "current_score_at_epoch_end_ci95"):
            kwargs[name] = ci_of(d.get(name))
        return cls(**kwargs)


@dataclass(frozen=True, kw_only=True)
class TestScores:
    """The test-split evaluations of the initial, best and final skills."""

    __test__ = False  # not a pytest class

    baseline_hard: float
    baseline_soft: float
    best_hard: float
    best_soft: float
    final_hard: float
    final_soft: float
    n_infra: Mapping[str, int]
    #: 95% intervals: ``hard``/``soft`` per skill (``baseline``, ``best``, ``final``), and the
    #: paired differences ``delta_hard`` (best - baseline) and ``final_delta_hard``.
    ci95: Mapping[str, Interval | None] = field(default_factory=dict)
    #: One-sided paired p-values of ``delta_hard`` and ``final_delta_hard`` (better than the
    #: initial skill on the test items).
    p_values: Mapping[str, float] = field(default_factory=dict)

    _CI_KEYS = (
        ("baseline_hard", "baseline_test_hard"),
        ("baseline_soft", "baseline_test_soft"),
        ("best_hard", "test_hard"),
        ("best_soft", "test_soft"),
        ("final_hard", "final_test_hard"),
        ("final_soft", "final_test_soft"),
        ("delta_hard", "test_delta_hard"),
        ("final_delta_hard", "final_test_delta_hard"),
    )

    def to_json(self) -> dict[str, Any]:
        values = {
            "baseline_test_hard": self.baseline_hard,
            "baseline_test_soft": self.baseline_soft,
            "test_hard": self.best_hard,
            "test_soft": self.best_soft,
            "final_test_hard": self.final_hard,
            "final_test_soft": self.final_soft,
            "test_delta_hard": self.best_hard - self.baseline_hard,
            "final_test_delta_hard": self.final_hard - self.baseline_hard,
        }
        out: dict[str, Any] = {}
        for name, key in self._CI_KEYS:
            out[key] = values[key]
            out[f"{key}_ci95"] = ci_json(self.ci95.get(name))
        for name, key in (("delta_hard", "test_delta_hard"), ("final_delta_hard", "final_test_delta_hard")):
            out[f"{key}_p_value"] = self.p_values.get(name)
        out["test_n_infra"] = dict(self.n_infra)
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> TestScores | None:
        if "test_hard" not in d:
            return None
        return cls(
            baseline_hard=d["baseline_test_hard"],
            baseline_soft=d["baseline_test_soft"],
            best_hard=d["test_hard"],
            best_soft=d["test_soft"],
            final_hard=d["final_test_hard"],
            final_soft=d["final_test_soft"],
            n_infra=dict(d.get("test_n_infra") or {}),
            ci95={name: ci_of(d.get(f"{key}_ci95")) for name, key in cls._CI_KEYS if d.get(f"{key}_ci95")},
            p_values={
                name: float(d[f"{key}_p_value"])
                for name, key in (
                    ("delta_hard", "test_delta_hard"),
                    ("final_delta_hard", "final_test_delta_hard"),
                )
                if d.get(f"{key}_p_value") is not None
            },
        )


@dataclass(frozen=True, kw_only=True)
class FitResult:
    """What :meth:`Trainer.fit` returns and ``summary.json`` holds.

    ``*_hard`` is the hard accuracy on the selection split; ``*_score`` the selection score
    (``evaluation.gate_metric``, with the semantic-density bonus when enabled).
    """

    version: str
    status: str  # complete | stopped
    stop_reason: str
    simulated: bool
    mode: Mapping[str, Any]
    config: Mapping[str, Any]
    baseline_selection_hard: float | None
    baseline_selection_hard_ci95: Interval | None = None
    baseline_selection_score: float | None
    baseline_selection_score_ci95: Interval | None = None
    best_selection_hard: float | None
    best_selection_hard_ci95: Interval | None = None
    best_selection_score: float | None
    best_selection_score_ci95: Interval | None = None
    final_selection_hard: float | None
    final_selection_hard_ci95: Interval | None = None
    final_selection_score: float | None
    final_selection_score_ci95: Interval | None = None
    best_step: int
    current_origin: str
    best_origin: str
    #: The final check's decision on the final skill against the best one, by the run's gate
    #: (``action``, ``reason``, ``gate_test``); ``None`` when the final skill was the best one.
    final_gate: Mapping[str, Any] | None = None
    total_steps: int
    total_accepts: int
    total_rejects: int
    total_skips: int
    epoch_stats: tuple[EpochRecord, ...]
    epoch_stages: Mapping[str, str]
    total_wall_time_s: float
    token_summary: Mapping[str, Any]
    cost_usd: float
    #: Of all input tokens, the share that repeats a prefix sent earlier in the run to the same
    #: model (:mod:`skillopt.models.prefix`); per role in ``cacheable_prefix``.
    cacheable_prefix_share: float | None = None
    cacheable_prefix: Mapping[str, Any] = field(default_factory=dict)
    sandbox_hosts: tuple[str, ...]
    image_digests: tuple[str, ...]
    environment: Mapping[str, Any]
    tests: TestScores | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return self.status == "complete"

    @property
    def total_tokens(self) -> int:
        """Every token the run spent (optimizer and target), as ``token_summary`` totals them."""
        total = self.token_summary.get("_total") or {}
        return int(total.get("total_tokens", 0))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("tests", "extra"):
                continue
            if f.name == "epoch_stats":
                value = [e.to_json() for e in value]
            elif isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, Mapping):
                value = dict(value)
            out[f.name] = value
        if self.tests is not None:
            out.update(self.tests.to_json())
        out.update(self.extra)
        out["schema_version"] = SCHEMA_VERSION
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> FitResult:
        """Parse ``summary.json`` (any schema version; keys this version does not know are kept
        in ``extra``).

        Raises:
            RecordError: written by a newer skillopt, or not a JSON object.
            KeyError, TypeError, ValueError: not a summary.
        """
        d = upgrade(d, key="schema_version", current=SCHEMA_VERSION)
        names = {f.name for f in fields(cls)} - {"tests", "extra"}
        kwargs = {k: d[k] for k in names if k in d}
        kwargs["epoch_stats"] = tuple(EpochRecord.from_json(e) for e in d.get("epoch_stats") or ())
        for name in names:
            if name.endswith("_ci95"):
                kwargs[name] = ci_of(d.get(name))
        kwargs["sandbox_hosts"] = tuple(d.get("sandbox_hosts") or ())
        kwargs["image_digests"] = tuple(d.get("image_digests") or ())
        tests = TestScores.from_json(d)
        test_keys = set(tests.to_json()) if tests else set()
        extra = {
            k: v for k, v in d.items() if k not in names and k not in test_keys and k != "schema_version"
        }
        return cls(**kwargs, tests=tests, extra=extra)
