"""The typed run configuration: one frozen pydantic model per section, validated when built.

Every section coerces its fields to their declared types (pydantic's lax mode, plus the few
YAML readings of :mod:`skillopt.validation`) and checks them, so a :class:`Config` that exists
is a valid one, whether it came from YAML (:func:`skillopt.config.load_config`), from a dict
(:func:`skillopt.config.config_from_dict`) or from Python. Bounds and choices are declared in
the field types (:class:`~skillopt.validation.Bounds`, ``Literal``): pydantic enforces them and
:meth:`Config.model_json_schema` (the schema ``skillopt config schema`` prints) shows them; the
rules between fields are the sections' ``_validate``. Errors are
:class:`~skillopt.config._fields.FieldError` naming the key (pydantic's own are worded by
:func:`skillopt.validation.problems`, the one formatter env options share). Enum fields are
stored in their canonical spelling (aliases are resolved here, once).

The models are pure: building one reads no file and asks no registry. What needs either (the
env's name, agent and options, the paths that must exist) is :func:`skillopt.config.resolve_config`,
which the loader runs once on the built config.

No field holds a secret: model keys come from environment variables named by provider profiles
(``model.providers_file``, :mod:`skillopt.models.profiles`).

Each group of sections has its own module, and everything is imported from here
(``skillopt.config.schema``): ``_model.py`` (``model``), ``_training.py`` (``train``,
``gradient``, ``optimizer``), ``_evaluation.py`` (``evaluation``: the gate), ``_rollouts.py``
(``env``, ``sandbox``), ``_run.py`` (``run``, ``tracking``); ``_section.py`` is the base they
share. The whole :class:`Config` and the table of its sections (:data:`SECTIONS`) are below.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from skillopt.config._fields import FieldError
from skillopt.config.schema._evaluation import EvaluationConfig, GateMetric
from skillopt.config.schema._model import ModelConfig, ModelPrice, ReasoningEffort
from skillopt.config.schema._rollouts import EnvConfig, SandboxConfig, SplitMode
from skillopt.config.schema._run import (
    LogLevel,
    MlflowTracking,
    RunConfig,
    Simulate,
    TensorboardTracking,
    TrackingConfig,
    WandbMode,
    WandbTracking,
)
from skillopt.config.schema._section import _Section
from skillopt.config.schema._training import (
    AppendixSource,
    GradientConfig,
    LrControlMode,
    LrScheduler,
    OptimizerConfig,
    PairPolicy,
    SkillUpdateMode,
    TrainConfig,
)
from skillopt.errors import ConfigError
from skillopt.logs import redact

__all__ = [
    "SECTIONS",
    "AppendixSource",
    "Config",
    "EnvConfig",
    "EvaluationConfig",
    "GateMetric",
    "GradientConfig",
    "LogLevel",
    "LrControlMode",
    "LrScheduler",
    "MlflowTracking",
    "ModelConfig",
    "ModelPrice",
    "OptimizerConfig",
    "PairPolicy",
    "ReasoningEffort",
    "RunConfig",
    "SandboxConfig",
    "Simulate",
    "SkillUpdateMode",
    "SplitMode",
    "TensorboardTracking",
    "TrackingConfig",
    "TrainConfig",
    "WandbMode",
    "WandbTracking",
]


#: Section name → section class, in the order of :class:`Config`'s fields.
SECTIONS: Mapping[str, type[_Section]] = MappingProxyType(
    {
        "model": ModelConfig,
        "train": TrainConfig,
        "gradient": GradientConfig,
        "optimizer": OptimizerConfig,
        "evaluation": EvaluationConfig,
        "env": EnvConfig,
        "sandbox": SandboxConfig,
        "run": RunConfig,
        "tracking": TrackingConfig,
    }
)


class Config(BaseModel):
    """A whole run configuration. Build it with :func:`skillopt.config.load_config`,
    :func:`skillopt.config.config_from_dict`, or directly from section objects; it is valid once
    it exists."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    model: ModelConfig = Field(default_factory=ModelConfig)
    """Models and providers."""
    train: TrainConfig = Field(default_factory=TrainConfig)
    """Epochs and batches."""
    gradient: GradientConfig = Field(default_factory=GradientConfig)
    """Reflection."""
    optimizer: OptimizerConfig = Field(default_factory=OptimizerConfig)
    """Edit budget, update mode, slow update, meta skill."""
    evaluation: EvaluationConfig = Field(default_factory=EvaluationConfig)
    """Gate and final evaluation."""
    env: EnvConfig
    """The benchmark environment (required: it has no default name)."""
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    """Where rollouts run."""
    run: RunConfig = Field(default_factory=RunConfig)
    """Output directory and presentation."""
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)
    """Experiment trackers (MLflow, W&B, TensorBoard)."""

    @model_validator(mode="before")
    @classmethod
    def _sections_are_built(cls, data: Any) -> Any:
        """Sections are given built (plain data goes through config_from_dict, which says where
        each value came from)."""
        for name, section in SECTIONS.items():
            value = data.get(name) if isinstance(data, Mapping) else None
            if value is not None and not isinstance(value, section):
                raise ConfigError(
                    f"Config.{name} must be a {section.__name__}, got {type(value).__name__}; "
                    "build from plain data with skillopt.config.config_from_dict"
                )
        return data

    @model_validator(mode="after")
    def _cost_budget_is_priced(self) -> Config:
        """A cost budget binds only through prices: refuse one with a model in use unpriced (its
        calls would cost 0 USD and the budget would silently never stop the run)."""
        budget = self.train.max_cost_usd
        if budget <= 0 or "*" in self.model.prices:
            return self
        roles: dict[str, list[str]] = {}
        for role in ("target", "optimizer"):
            name = getattr(self.model, role)
            if name not in self.model.prices:
                roles.setdefault(name, []).append(role)
        if roles:
            missing = ", ".join(f"{name!r} (the {' and '.join(r)})" for name, r in roles.items())
            first = next(iter(roles))
            raise FieldError(
                "train.max_cost_usd",
                f"is {budget:g} USD, but model.prices has no price for {missing}, so the budget "
                f"would never bind; set one, e.g. --set model.prices.{first}.input=1.25 --set "
                f"model.prices.{first}.output=10 (USD per million tokens; model.prices.* prices "
                "every other model), or set train.max_cost_usd=0 (no limit)",
            )
        return self

    def to_dict(self, *, redacted: bool = True) -> dict[str, Any]:
        """Plain nested data (``{section: {key: value}}``), suitable for JSON and
        :func:`~skillopt.config.config_from_dict`.

        With ``redacted`` (the default, for anything written or shown), values are passed
        through :func:`skillopt.logs.redact` field by field. No field holds a secret, so this
        only masks secret-shaped text (e.g. a key pasted into a model name). Model names in
        ``model.prices`` are not treated as keys, so a model called ``secret-7b`` keeps its price.
        """
        out: dict[str, Any] = {}
        for name in SECTIONS:
            data = getattr(self, name).to_dict()
            if redacted:
                data = {
                    k: ({m: redact(p) for m, p in v.items()} if k == "prices" else redact(v, k))
                    for k, v in data.items()
                }
            out[name] = data
        return out
