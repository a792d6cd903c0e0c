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
"""

from __future__ import annotations

import contextlib
import enum
import math
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, Self, TypeAlias

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    model_validator,
)

from skillopt.config._fields import FieldError
from skillopt.config._keys import unknown_key_message
from skillopt.errors import ConfigError
from skillopt.gate.modes import GateMode
from skillopt.logs import redact
from skillopt.validation import Bounds, Canonical, Choices, Int, Words, problems, show

if TYPE_CHECKING:
    from skillopt.skill.package import PackageLimits

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

ReasoningEffort = Literal["", "none", "low", "medium", "high", "xhigh", "max"]
LrScheduler = Literal["constant", "linear", "cosine", "autonomous"]
LrControlMode = Literal["fixed", "autonomous", "none"]
SkillUpdateMode = Literal["patch", "rewrite_from_suggestions", "full_rewrite_minibatch"]
PairPolicy = Literal["mixed", "changed", "unchanged"]
AppendixSource = Literal["both", "failure_only"]
GateMetric = Literal["hard", "soft", "mixed"]
GateSpending = Literal["pocock", "obrien_fleming"]
GateFutility = Literal["binding", "non_binding"]
GateRoundItems = Literal["discordant", "fixed"]
SplitMode = Literal["split_file", "ratio"]
LogLevel = Literal["debug", "info", "warning", "error"]
Simulate = Literal["auto", "on", "off", "noisy"]
DigestPolicy = Literal["refuse", "warn"]
Isolation = Literal["", "gvisor"]
ModelCache = Literal["", "off", "record", "replay"]
WandbMode = Literal["auto", "online", "offline"]

#: Enum field → {alternative spelling: canonical value}, resolved when the section is built.
_OPTIMIZER_ALIASES: Mapping[str, Mapping[str, str]] = MappingProxyType(
    {
        "lr_control_mode": {
            "manual": "fixed",
            "scheduler": "fixed",
            "scheduled": "fixed",
            "auto": "autonomous",
            "optimizer": "autonomous",
            "off": "none",
            "no_lr": "none",
        },
        "skill_update_mode": {
            "edits": "patch",
            "rewrite": "rewrite_from_suggestions",
            "suggestions": "rewrite_from_suggestions",
            "rewrite_suggestions": "rewrite_from_suggestions",
            "full_rewrite": "full_rewrite_minibatch",
            "minibatch_full_rewrite": "full_rewrite_minibatch",
            "skill_rewrite_minibatch": "full_rewrite_minibatch",
        },
        "longitudinal_pair_policy": {
            "default": "mixed",
            "random": "mixed",
            "all": "mixed",
            "change": "changed",
            "delta": "changed",
            "10_01": "changed",
            "01_10": "changed",
            "stable": "unchanged",
            "same": "unchanged",
            "00_11": "unchanged",
        },
    }
)
_RUN_ALIASES: Mapping[str, Mapping[str, str]] = MappingProxyType(
    {
        "log_level": {"warn": "warning"},
        "simulate": {"true": "on", "yes": "on", "1": "on", "false": "off", "no": "off", "0": "off"},
    }
)

ReasoningEffortField: TypeAlias = Annotated[ReasoningEffort, Canonical()]
LrSchedulerField: TypeAlias = Annotated[LrScheduler, Canonical()]
LrControlModeField: TypeAlias = Annotated[LrControlMode, Canonical(_OPTIMIZER_ALIASES["lr_control_mode"])]
SkillUpdateModeField: TypeAlias = Annotated[
    SkillUpdateMode, Canonical(_OPTIMIZER_ALIASES["skill_update_mode"])
]
PairPolicyField: TypeAlias = Annotated[PairPolicy, Canonical(_OPTIMIZER_ALIASES["longitudinal_pair_policy"])]
AppendixSourceField: TypeAlias = Annotated[AppendixSource, Canonical()]
GateMetricField: TypeAlias = Annotated[GateMetric, Canonical()]
GateModeField: TypeAlias = Annotated[GateMode, Canonical()]
GateSpendingField: TypeAlias = Annotated[GateSpending, Canonical()]
GateFutilityField: TypeAlias = Annotated[GateFutility, Canonical()]
GateRoundItemsField: TypeAlias = Annotated[GateRoundItems, Canonical()]
SplitModeField: TypeAlias = Annotated[SplitMode, Canonical()]
LogLevelField: TypeAlias = Annotated[LogLevel, Canonical(_RUN_ALIASES["log_level"])]
SimulateField: TypeAlias = Annotated[Simulate, Canonical(_RUN_ALIASES["simulate"])]
DigestPolicyField: TypeAlias = Annotated[DigestPolicy, Canonical()]
WandbModeField: TypeAlias = Annotated[WandbMode, Canonical()]

DEFAULT_LEADING_WORDS = (
    "MUST",
    "ALWAYS",
    "NEVER",
    "ONLY",
    "CRITICAL",
    "IMPORTANT",
    "RESOLVE",
    "PREFER",
    "ENSURE",
    "STRICT",
    "VERIFY",
)


#: A URI with a user (and password) before its host: ``http://bob:pw@host``.
_USERINFO = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/@]+@")
_ENDPOINT = re.compile(r"^(?:dns:///)?(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.\-]+):([0-9]{1,5})$")


class _Section(BaseModel):
    """Base of the sections: pydantic coerces every field to its type and checks its declared
    bounds and choices, then :meth:`_validate` checks the rules between fields. Keyword-only and
    frozen: a changed section is a new one (:meth:`replace`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, use_attribute_docstrings=True)

    SECTION: ClassVar[str] = ""
    #: Enum field → {alternative spelling: canonical value} (also listed in error messages).
    ALIASES: ClassVar[Mapping[str, Mapping[str, str]]] = MappingProxyType({})

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise _field_error(type(self), exc) from None

    @model_validator(mode="after")
    def _checked(self) -> _Section:
        self._validate()
        return self

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The field names of this section, in declaration order."""
        return tuple(cls.model_fields)

    @classmethod
    def required_keys(cls) -> tuple[str, ...]:
        """Fields without a default (only ``env.name``)."""
        return tuple(name for name, f in cls.model_fields.items() if f.is_required())

    @classmethod
    def field_type(cls, name: str) -> Any:
        return cls.model_fields[name].annotation

    def replace(self, **changes: Any) -> Self:
        """A new section with ``changes`` over this one's values, built and checked like any
        other (unlike ``model_copy(update=...)``, which checks nothing).

        Raises:
            FieldError: a changed value is invalid.
        """
        return type(self)(**{**{name: getattr(self, name) for name in type(self).model_fields}, **changes})

    def _key(self, name: str) -> str:
        return f"{self.SECTION}.{name}"

    def _validate(self) -> None:
        """The rules between fields (and within a value) that no field type declares; raise
        :class:`FieldError` naming the key."""

    def _non_empty(self, name: str) -> None:
        if not getattr(self, name).strip():
            raise FieldError(self._key(name), "must not be empty")

    def to_dict(self) -> dict[str, Any]:
        """Plain data: tuples as lists, prices as mappings."""
        return {name: _plain(getattr(self, name)) for name in type(self).model_fields}


def _hints(model: type[BaseModel]) -> dict[str, Any]:
    """Field name → annotation with its declared metadata (bounds, choices' wording)."""
    return {name: f.rebuild_annotation() for name, f in model.model_fields.items()}


def _field_error(cls: type[_Section], exc: ValidationError) -> FieldError:
    """The first problem pydantic found, as our message."""
    key, problem = problems(exc, prefix=cls.SECTION, hints=_hints(cls), aliases=cls.ALIASES)[0]
    return FieldError(key, problem)


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, _Section):
        return value.to_dict()
    if isinstance(value, ModelPrice):
        return {"input": value.input, "output": value.output}
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


class ModelPrice(BaseModel):
    """Price of one model, for cost accounting."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, use_attribute_docstrings=True)

    input: Annotated[float, Bounds(ge=0)]
    """USD per million prompt (input) tokens."""
    output: Annotated[float, Bounds(ge=0)]
    """USD per million completion (output) tokens."""
    cached_input: Annotated[float, Bounds(ge=0)] | None = None
    """USD per million input tokens read from the provider's prompt cache (null = ``input``)."""
    cache_write: Annotated[float, Bounds(ge=0)] | None = None
    """USD per million input tokens written to the prompt cache (Anthropic; null = ``input``)."""

    @model_validator(mode="wrap")
    @classmethod
    def _worded(cls, data: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
        """A bad value as our message: keyed when :func:`_price` gives the key (the context),
        else ``price input: expected a number >= 0 ...`` (a price built in Python)."""
        try:
            return handler(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            if err["type"] == "extra_forbidden":
                raise
            key = (info.context or {}).get("key")
            if key:
                raise FieldError(*problems(exc, prefix=key, hints=_hints(cls))[0]) from None
            value = None if err["type"] == "missing" else err["input"]
            raise ConfigError(
                f"price {err['loc'][0]}: expected a number >= 0 (USD per million tokens), got {value!r}"
            ) from None


def _price(raw: Any, key: str) -> ModelPrice:
    """One ``model.prices`` entry from ``{input: x, output: y}``."""
    if isinstance(raw, ModelPrice):
        return raw
    if not isinstance(raw, Mapping):
        raise FieldError(
            key, f"expected a mapping {{input: USD, output: USD}} per million tokens, got {show(raw, key)}"
        )
    fields = ("input", "output", "cached_input", "cache_write")
    unknown = [k for k in raw if k not in fields]
    if unknown:
        raise ConfigError(unknown_key_message(f"{key}.{unknown[0]}", str(unknown[0]), fields))
    missing = [k for k in ("input", "output") if k not in raw]
    if missing:
        raise FieldError(key, f"missing {', '.join(missing)} (USD per million tokens)")
    values = {}
    for k in (f for f in fields if f in raw and raw[f] is not None):
        value = raw[k]
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                value = float(value.strip())
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise FieldError(f"{key}.{k}", f"expected a number, got {show(value, key)}")
        values[k] = value
    return ModelPrice.model_validate(values, context={"key": key})  # a bound's error names the key


def _prices(raw: Any) -> Any:
    """``model.prices``: null → {}; each entry ``{input, output}`` checked and typed."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        return raw  # refused by the field's type
    return {str(name): _price(entry, f"model.prices.{name}") for name, entry in raw.items()}


def _mapping(raw: Any) -> Any:
    return {} if raw is None else raw


class ModelConfig(_Section):
    """Which models play the optimizer and target roles, and how they are called."""

    SECTION: ClassVar[str] = "model"

    optimizer: str = "gpt-5.5"
    """Model name of the optimizer role (reflect, merge, rank, rewrite, slow update, meta skill)."""
    target: str = "gpt-5.5"
    """Model name of the target role: the agent whose skill is trained."""
    optimizer_provider: str = "openai"
    """Provider profile of the optimizer (a name from ``providers_file`` or ``openai``)."""
    target_provider: str = "openai"
    """Provider profile of the target."""
    reasoning_effort: ReasoningEffortField = "medium"
    """Reasoning effort sent with model calls; ``""`` = do not send the parameter."""
    rewrite_reasoning_effort: ReasoningEffortField = ""
    """Reasoning effort of the rewrite stage; ``""`` = use ``reasoning_effort``."""
    rewrite_max_completion_tokens: Annotated[int, Bounds(ge=1)] = 64000
    """Completion-token cap of the rewrite stage (tokens)."""
    optimizer_temperature: Annotated[float, Bounds(ge=0, le=2, unit=" or null")] | None = None
    """Sampling temperature of the optimizer; null = the provider's default."""
    target_temperature: Annotated[float, Bounds(ge=0, le=2, unit=" or null")] | None = None
    """Sampling temperature of the target; null = the provider's default."""
    max_completion_tokens: Annotated[int, Bounds(ge=1)] = 16384
    """Completion-token cap of every other call (tokens)."""
    prices: Annotated[Mapping[str, ModelPrice], BeforeValidator(_prices)] = Field(default_factory=dict)
    """Model name → ``{input, output}`` in USD per million tokens; ``"*"`` = any other model.
    Empty = costs are reported as 0."""
    prompt_caching: bool = True
    """Send prompt-caching hints: OpenAI requests carry a ``prompt_cache_key`` (run, role and
    skill hash), Anthropic requests ``cache_control`` breakpoints after the system prompt and
    the tools. The agent CLIs keep their own behaviour (Codex CLI sends its own
    ``prompt_cache_key``; Claude Code marks its own breakpoints)."""
    providers_file: str = ""
    """YAML file of provider profiles (see :mod:`skillopt.models.profiles`); ``""`` = only the
    environment (``OPENAI_API_KEY`` gives profile ``openai``). Must exist if set."""

    def _validate(self) -> None:
        for name in ("optimizer", "target", "optimizer_provider", "target_provider"):
            self._non_empty(name)

    def price_pairs(self) -> dict[str, tuple[float | None, ...]]:
        """Prices as ``{model: (input, output, cached_input, cache_write)}`` (``None``: the
        input price), the shape of :class:`skillopt.models.roles.PriceTable`."""
        return {name: (p.input, p.output, p.cached_input, p.cache_write) for name, p in self.prices.items()}


class TrainConfig(_Section):
    """The training loop: epochs and batches."""

    SECTION: ClassVar[str] = "train"

    num_epochs: Annotated[int, Bounds(ge=1)] = 4
    """Passes over the training split."""
    train_size: Annotated[int, Bounds(ge=0, note=" (0 = derive from the data)")] = 0
    """Training items used per epoch; 0 = all items of the train split."""
    batch_size: Annotated[int, Bounds(ge=1)] = 40
    """Items rolled out per batch (one optimizer step per ``accumulation`` batches)."""
    accumulation: Annotated[int, Bounds(ge=1)] = 1
    """Batches whose reflections are pooled into one optimizer step."""
    seed: Int = 42
    """Seed of batch sampling and minibatch composition."""
    max_tokens: Annotated[int, Bounds(ge=0, note=" (0 = no limit)")] = 0
    """Run budget: total model tokens (optimizer and target) after which the run stops at the
    next step boundary; 0 = no limit. ``--resume`` with a larger budget continues."""
    max_cost_usd: Annotated[float, Bounds(ge=0.0, note=" (0 = no limit)")] = 0.0
    """Run budget in USD (from ``model.prices``); 0 = no limit. Stops like ``max_tokens``."""

    @property
    def effective_batch_size(self) -> int:
        """Items per optimizer step (``batch_size * accumulation``)."""
        return self.batch_size * self.accumulation

    def steps_per_epoch(self, n_train: int) -> int:
        """Optimizer steps per epoch for ``n_train`` training items: ``ceil(n / effective batch)``."""
        return max(1, math.ceil(n_train / self.effective_batch_size)) if n_train > 0 else 0


_NEVER_SHRINKS = (
    ": merging groups of one patch never shrinks the pool (the reference looped forever, issue #194)"
)


class GradientConfig(_Section):
    """Reflection ("gradient"): analysts over minibatches of trajectories, then merges."""

    SECTION: ClassVar[str] = "gradient"

    minibatch_size: Annotated[int, Bounds(ge=1)] = 8
    """Trajectories per analyst call (M)."""
    merge_batch_size: Annotated[int, Bounds(ge=2, note=_NEVER_SHRINKS)] = 8
    """Patches merged per merge call, hierarchically until one remains (>= 2)."""
    analyst_workers: Annotated[int, Bounds(ge=1)] = 16
    """Concurrent analyst/merge calls to the optimizer."""
    failure_only: bool = False
    """Reflect on failed trajectories only (skip success minibatches)."""
    deep_reflect: bool = False
    """Probe selected trajectories with extra target calls before reflecting."""
    probe_failures: Annotated[int, Bounds(ge=0)] = 2
    """Failed trajectories probed per step when ``deep_reflect`` is on."""
    probe_successes: Annotated[int, Bounds(ge=0)] = 1
    """Successful trajectories probed per step when ``deep_reflect`` is on."""


class OptimizerConfig(_Section):
    """How reflections become a new skill: edit budget ("learning rate"), update mode, epochs' stages."""

    SECTION: ClassVar[str] = "optimizer"
    ALIASES: ClassVar[Mapping[str, Mapping[str, str]]] = _OPTIMIZER_ALIASES

    learning_rate: Annotated[int, Bounds(ge=1)] = 4
    """Edit budget: the most edits applied per step (also each analyst's cap)."""
    min_learning_rate: Annotated[int, Bounds(ge=1)] = 2
    """Floor of the scheduled edit budget."""
    lr_scheduler: LrSchedulerField = "cosine"
    """Schedule of the edit budget over the run's steps; ``autonomous`` = no clipping."""
    lr_control_mode: LrControlModeField = "fixed"
    """Who picks each step's budget: the scheduler (``fixed``), the optimizer model
    (``autonomous``) or nobody (``none``: no budget, every edit is applied)."""
    skill_update_mode: SkillUpdateModeField = "patch"
    """``patch`` applies ranked edits; ``rewrite_from_suggestions`` rewrites the skill from ranked
    suggestions; ``full_rewrite_minibatch`` takes the merged whole-skill candidate."""
    use_slow_update: bool = True
    """Run the end-of-epoch slow update (compare previous and current skill)."""
    slow_update_samples: Annotated[int, Bounds(ge=1)] = 20
    """Training items rolled out with both skills for the slow update and the meta skill."""
    slow_update_gate_with_selection: bool = True
    """Gate the slow-update candidate with the run's gate (``evaluation.gate_mode``) like a
    step's candidate. On by default so that nothing becomes current or best that the run's
    gate did not accept (a ``paired`` run gets no untested skill). ``false`` is the
    reference's default, for parity runs: the candidate is forced into the current skill (its
    score re-measured) and never made the best skill on its own."""
    longitudinal_pair_policy: PairPolicyField = "mixed"
    """Which previous/current pairs the slow update sees: all, outcome-changed or unchanged."""
    use_meta_skill: bool = True
    """Maintain the optimizer-facing meta skill across epochs."""
    use_skill_aware_reflection: bool = False
    """Let analysts write to the skill-aware appendix."""
    skill_aware_appendix_source: AppendixSourceField = "both"
    """Trajectories that feed the appendix: ``both`` or ``failure_only``."""
    skill_aware_consolidate_threshold: Annotated[int, Bounds(ge=0, note=" (0 = never)")] = 0
    """Appendix notes that trigger a consolidation call; 0 = never consolidate."""
    whitespace_tolerant_edits: bool = False
    """Match edit targets ignoring whitespace differences (reference: exact substring only)."""
    script_self_test_timeout_s: Annotated[float, Bounds(gt=0)] = 10.0
    """Time limit of a script's own self-test (``--self-test``) when a script the optimizer
    created or changed is checked in a sandbox container before its candidate is evaluated."""

    def _validate(self) -> None:
        if self.min_learning_rate > self.learning_rate:
            raise FieldError(
                self._key("min_learning_rate"),
                f"must be <= optimizer.learning_rate ({self.learning_rate}), got {self.min_learning_rate}",
            )


class EvaluationConfig(_Section):
    """The validation gate and the final evaluation."""

    SECTION: ClassVar[str] = "evaluation"

    use_gate: bool = True
    """Accept a candidate only if it beats the current skill on the selection split."""
    gate_metric: GateMetricField = "hard"
    """Score the gate compares: hard accuracy, soft score, or a weighted mix."""
    gate_mode: GateModeField = GateMode.STRICT
    """How the gate decides: ``strict`` = the candidate's mean is strictly above the current
    skill's (the reference's rule); ``paired`` = a one-sided paired test over the selection
    items is significant at ``gate_alpha`` (exact sign/McNemar test on pass/fail scores, paired
    bootstrap otherwise); ``repeat`` = every selection item is rolled out ``gate_repeats``
    times per skill, the scores averaged, then ``paired``; ``sequential`` = both skills are
    measured on the selection items in rounds and a group-sequential paired test (alpha spent
    by ``gate_spending`` over ``gate_max_rounds`` looks) accepts, rejects, or asks for another
    round, keeping the false accepts at ``gate_alpha`` over all the looks. See docs/gate.md."""
    gate_alpha: Annotated[float, Bounds(gt=0, lt=1)] = 0.05
    """Significance level of the ``paired``, ``repeat`` and ``sequential`` gates (the
    false-accept rate they allow when a candidate is no better)."""
    gate_min_effect: Annotated[float, Bounds(ge=0.0)] = 0.0
    """``paired``/``repeat``/``sequential``: also require the mean improvement over the selection items to be
    at least this (in gate-metric units, e.g. 0.05 = five points)."""
    gate_repeats: Annotated[int, Bounds(ge=1)] = 3
    """Rollouts per selection item and skill in the ``repeat`` gate (at least 2)."""
    gate_max_rounds: Annotated[int, Bounds(ge=1, le=20)] = 7
    """``sequential``: the round budget, the most rounds (looks) a decision may take; a
    candidate that crosses no boundary by the last round is rejected (reason
    ``round_budget``)."""
    gate_spending: GateSpendingField = "pocock"
    """``sequential``: how ``gate_alpha`` is spent over the rounds (Lan-DeMets): ``pocock``
    spends evenly (clear candidates stop at the first round: fewer rollouts), ``obrien_fleming``
    keeps it for the last round (the most power when every round is usually run)."""
    gate_futility: GateFutilityField = "binding"
    """``sequential``: ``binding`` = the futility stop (no observed improvement) always stops,
    so the acceptance bounds are computed with it (exactly, on pass/fail pairs: the sign
    walk's thresholds) and are lower for the same ``gate_alpha``; ``non_binding`` = the bounds
    ignore it (the normal approximation of the first release)."""
    gate_round_fraction: Annotated[float, Bounds(gt=0, le=1)] = 0.33
    """``sequential``: each round after the first measures this share of the selection items
    (at least one; 1 = all of them); which ones: ``gate_round_items``."""
    gate_round_items: GateRoundItemsField = "discordant"
    """``sequential``: which items a later round measures. ``discordant`` = the items where the
    two skills have disagreed most often so far in this decision (pass on one side, fail on the
    other: the only pairs the sign test counts), then items not yet measured, then the rest;
    chosen from where the skills disagreed, never from who won, so the test stays exact.
    ``fixed`` = the same items for every decision (the split's unused items first, then the
    selection items over and over, in an order fixed by ``train.seed``)."""
    gate_mixed_weight: Annotated[float, Bounds(ge=0, le=1)] = 0.5
    """``w`` of the ``mixed`` gate metric, ``(1 - w) * hard + w * soft`` (in [0, 1]): the weight of
    the soft score."""
    use_semantic_density: bool = False
    """Add a bonus for leading directive words to the gate score."""
    semantic_density_weight: Annotated[float, Bounds(ge=0.0)] = 0.05
    """Weight of the semantic-density bonus."""
    leading_words: Words = DEFAULT_LEADING_WORDS
    """Directive words counted by semantic density (YAML list or comma-separated string)."""
    sel_env_num: Annotated[int, Bounds(ge=0, note=" (0 = whole split)")] = 0
    """Selection items per gate evaluation; 0 = the whole selection split."""
    test_env_num: Annotated[int, Bounds(ge=0, note=" (0 = whole split)")] = 0
    """Test items in the final evaluation; 0 = the whole test split."""
    eval_test: bool = True
    """After training, evaluate the initial, best and final skills on the test split."""
    max_regressions: Annotated[int, Bounds(ge=0, note=" (null = off)")] | None = None
    """Per-item no-regression gate: reject a candidate that turns more than this many
    selection items from pass to fail; null = off (aggregate gate only)."""
    max_infra_fraction: Annotated[float, Bounds(ge=0, le=1)] = 0.2
    """Largest fraction of an evaluation's rows that may fail on infrastructure (never scored):
    above it the gate rejects the candidate, the baseline stops the run (resume reruns those
    rows) and ``skillopt eval`` exits 1."""

    def _validate(self) -> None:
        for i, word in enumerate(self.leading_words):
            if not word:
                raise FieldError(f"{self._key('leading_words')}[{i}]", "must not be empty")
        if self.gate_mode is GateMode.REPEAT and self.gate_repeats < 2:
            raise FieldError(
                self._key("gate_repeats"),
                f"must be >= 2 with gate_mode: repeat, got {self.gate_repeats} (one rollout per item is "
                "gate_mode: paired)",
            )


class EnvConfig(_Section):
    """The benchmark environment: data, splits, agent and per-rollout limits."""

    SECTION: ClassVar[str] = "env"

    name: str
    """Env name (required), e.g. ``spreadsheetbench``; see :mod:`skillopt.envs.registry`."""
    skill_init: str = ""
    """Initial skill: a SKILL.md file or an Agent Skills package folder (SKILL.md with front
    matter, plus ``scripts/``, ``references/``, ``assets/``); ``""`` = the env's shipped initial
    skill. Must exist if set; checked when the config is loaded."""
    skill_max_files: Annotated[int, Bounds(ge=1)] = 200
    """Most files a skill package may hold (SKILL.md included)."""
    skill_max_mb: Annotated[float, Bounds(gt=0, unit=" MiB")] = 8
    """Most bytes a skill package may hold, in MiB (all its files together)."""
    split_mode: SplitModeField = "split_file"
    """``split_file`` = the data root's ``splits.json``; ``ratio`` = split by ``split_ratio``."""
    split_ratio: str = "2:1:7"
    """``train:selection:test`` proportions for ``split_mode: ratio`` (quote it in YAML)."""
    split_seed: Int = 42
    """Seed of the ratio split."""
    data_root: str = ""
    """Dataset directory; ``""`` = the env's vendored sample (layouts: docs/data.md; check one
    with ``skillopt data check``)."""
    allow_sample: bool = False
    """Let a run with real models use the env's vendored sample (a few items: it measures
    little and still costs money). Off: such a run is refused at startup; the offline
    simulation and the ``*_demo`` configs (which set it) are not affected."""
    agent: str = ""
    """Agent kind; ``""`` = the env's default (spreadsheetbench: ``codegen_multi``)."""
    options: Annotated[Mapping[str, Any], BeforeValidator(_mapping)] = Field(default_factory=dict)
    """Env-specific options (e.g. ``searchqa``: ``context_chars``), validated by the env's
    options model: unknown keys and bad values are errors naming ``env.options.<key>``. Stored
    with every default filled in, so config.json records them all."""
    max_turns: Annotated[int, Bounds(ge=1)] = 30
    """Model turns per rollout."""
    exec_timeout: Annotated[float, Bounds(gt=0, unit=" seconds")] = 120
    """Seconds per code execution inside the sandbox."""
    task_timeout: Annotated[float, Bounds(gt=0, unit=" seconds")] = 600
    """Seconds of wall time for a whole rollout."""
    workers: Annotated[int, Bounds(ge=1)] = 24
    """Concurrent rollouts."""
    memory_mb: Annotated[int, Bounds(ge=16)] = 1024
    """Memory limit of a rollout container (MiB, memory + swap)."""
    cpus: Annotated[float, Bounds(gt=0)] = 1.0
    """CPU limit of a rollout container (cores)."""
    max_model_tokens: Annotated[int, Bounds(ge=0, note=" (0 = no limit)")] = 0
    """Per-rollout model token budget (prompt + completion, enforced by the sandbox host's
    gateway; a rollout that uses it up fails as ``budget-exceeded``); 0 = no limit."""

    def _validate(self) -> None:
        self.split_fractions  # noqa: B018 - validates split_ratio
        if self.exec_timeout > self.task_timeout:
            raise FieldError(
                self._key("exec_timeout"),
                f"{self.exec_timeout} s exceeds env.task_timeout ({self.task_timeout} s), the whole rollout's budget",
            )

    @property
    def skill_limits(self) -> PackageLimits:
        """``skill_max_files`` and ``skill_max_mb`` as package limits."""
        from skillopt.skill.package import PackageLimits

        return PackageLimits(max_files=self.skill_max_files, max_bytes=int(self.skill_max_mb * 1024 * 1024))

    @property
    def split_fractions(self) -> tuple[float, float, float]:
        """``split_ratio`` as fractions (train, selection, test) summing to 1."""
        parts = self.split_ratio.split(":")
        try:
            numbers = [float(p) for p in parts]
        except ValueError:
            numbers = []
        if len(numbers) != 3 or any(not math.isfinite(n) or n < 0 for n in numbers) or sum(numbers) <= 0:
            raise FieldError(
                self._key("split_ratio"),
                f'expected "train:selection:test" with three numbers >= 0 (e.g. "2:1:7"), got {show(self.split_ratio, "split_ratio")}',
            )
        total = sum(numbers)
        return (numbers[0] / total, numbers[1] / total, numbers[2] / total)


class SandboxConfig(_Section):
    """Where rollouts run: remote sandbox services over gRPC, or an embedded local one."""

    SECTION: ClassVar[str] = "sandbox"

    endpoints: Words = ()
    """Sandbox services as ``host:port`` (or ``unix:/path``), or ``dns:///NAME:PORT`` for every
    address NAME resolves to (re-resolved during the run, e.g. a Kubernetes headless Service);
    empty = start an embedded local service for the run and stop it afterwards."""
    token_file: str = ""
    """File holding the bearer token sent to the services; ``""`` = no token."""
    tls_ca_file: str = ""
    """PEM bundle to verify the services' certificates; ``""`` = plaintext unless a cert is set."""
    tls_cert_file: str = ""
    """Client certificate (PEM) for mutual TLS; needs ``tls_key_file``."""
    tls_key_file: str = ""
    """Client private key (PEM) for mutual TLS; needs ``tls_cert_file``."""
    embedded_capacity: Annotated[int, Bounds(ge=0, note=" (0 = auto)")] = 0
    """Concurrent rollouts of the embedded service; 0 = derived from the host's cores and memory."""
    embedded_pool_size: Annotated[int, Bounds(ge=0, note=" (0 = auto)")] = 0
    """Pre-started idle containers of the embedded service; 0 = derived from the capacity (twice
    the capacity under gVisor, whose containers start slower)."""
    image: str = "skillopt-runtime:latest"
    """Rollout runtime image."""
    runtime: str = ""
    """Docker runtime of rollout containers; ``""`` = the engine's default, ``runsc`` = gVisor."""
    isolation: Annotated[Isolation, Choices('"" or gvisor')] = ""
    """Isolation the run requires of every container it runs in: ``gvisor`` = each host must run
    this run's agent under gVisor (``skillopt serve --runtime runsc``; exec agents under
    ``runsc-net``), or the run stops before any rollout with the hosts and what they offer; the
    embedded service then uses ``runsc`` unless ``sandbox.runtime`` says otherwise; ``""`` = any."""
    rpc_timeout_slack_s: Annotated[float, Bounds(ge=0.0)] = 60
    """Seconds added to a rollout's wall time for the RPC deadline (queueing, container start)."""
    model_cache: Annotated[ModelCache, Choices("off, record or replay")] = ""
    """Model exchange cache of the rollouts: ``off``, ``record``, ``replay`` (a miss is an error);
    ``""`` = the sandbox host's default."""
    model_cache_dir: str = ""
    """The embedded sandbox's record/replay store (created if missing); ``""`` = none."""
    host_down_timeout_s: Annotated[float, Bounds(gt=0, unit=" seconds")] = 300
    """Stop the run (resumable) when no sandbox host has been reachable this long; a host that
    is down is left at once and taken back when its health check serves again."""
    image_digest_policy: DigestPolicyField = "refuse"
    """A run is pinned to the runtime image digest it started on (kept by ``--resume``):
    ``refuse`` = never place rollouts on a host running another image (and refuse a fleet whose
    hosts differ), ``warn`` = use such hosts and say so."""

    def _validate(self) -> None:
        if self.model_cache in ("record", "replay") and not self.endpoints and not self.model_cache_dir:
            raise FieldError(
                self._key("model_cache"),
                "record/replay on the embedded sandbox needs sandbox.model_cache_dir",
            )
        seen: set[str] = set()
        for i, endpoint in enumerate(self.endpoints):
            key = f"{self._key('endpoints')}[{i}]"
            if endpoint in seen:
                raise FieldError(key, f"{endpoint!r} is listed twice")
            seen.add(endpoint)
            if endpoint.startswith("unix:") and len(endpoint) > len("unix:"):
                continue
            match = _ENDPOINT.match(endpoint)
            if not match or not 1 <= int(match.group(1)) <= 65535:
                raise FieldError(
                    key,
                    f'expected "host:port" (port 1-65535), "dns:///name:port" or "unix:/path", got {endpoint!r}',
                )
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            raise FieldError(
                self._key("tls_cert_file" if self.tls_key_file else "tls_key_file"),
                "sandbox.tls_cert_file and sandbox.tls_key_file must be set together (mutual TLS)",
            )
        self._non_empty("image")
        if self.runtime != self.runtime.strip() or " " in self.runtime:
            raise FieldError(
                self._key("runtime"), f"must be a runtime name such as runsc, got {self.runtime!r}"
            )


class RunConfig(_Section):
    """The run itself: output directory, resume, logging and presentation."""

    SECTION: ClassVar[str] = "run"
    ALIASES: ClassVar[Mapping[str, Mapping[str, str]]] = _RUN_ALIASES

    out_root: str = ""
    """Run directory; ``""`` = chosen by the CLI (``outputs/skillopt_<env>_<model>_<time>``)."""
    resume: bool = False
    """Continue the run found in ``out_root`` instead of refusing a non-empty directory."""
    log_level: LogLevelField = "info"
    """Threshold of the structured logs."""
    progress: bool = True
    """Show live progress on the terminal."""
    plot: bool = True
    """Render training curves to PNG at the end of each epoch."""
    simulate: SimulateField = "off"
    """Offline simulation with a scripted model server: ``off`` = never (a run without a usable
    provider stops with what to set), ``on`` = always, ``auto`` = when no provider key is
    configured (only the ``*_demo`` configs use it), ``noisy`` = always, with a stochastic
    target (each task passes with a probability; its exact expected scores are recorded in
    ``simulation_truth.json``) and an optimizer that also proposes decoy and harmful edits."""


def _subsection(cls: type[_Section]) -> Any:
    """The before-validator of a group of keys inside a section (``tracking.mlflow``): a mapping
    is built into ``cls`` (its keys checked and its errors named in full, e.g.
    ``tracking.mlflow.enabled``); null is the defaults."""

    def build(raw: Any) -> Any:
        if raw is None:
            return cls()
        if isinstance(raw, cls):
            return raw
        if not isinstance(raw, Mapping):
            raise FieldError(
                cls.SECTION,
                f"expected a mapping of keys ({', '.join(cls.field_names())}), got {show(raw, cls.SECTION)}",
            )
        for name in raw:
            if name not in cls.field_names():
                raise ConfigError(unknown_key_message(f"{cls.SECTION}.{name}", str(name), cls.field_names()))
        return cls(**raw)

    return BeforeValidator(build)


class MlflowTracking(_Section):
    """Log the run to MLflow (``pip install 'skillopt[mlflow]'``; docs/observability.md)."""

    SECTION: ClassVar[str] = "tracking.mlflow"

    enabled: bool = False
    """Log the run to MLflow."""
    tracking_uri: str = ""
    """MLflow tracking server or store (``http://host:5000``, ``sqlite:///path/mlflow.db``);
    ``""`` = ``MLFLOW_TRACKING_URI`` when set, else a local store beside the run directory
    (``mlflow.db`` and ``mlartifacts/`` in its parent folder, shared by the runs there)."""
    experiment: str = "skillopt"
    """MLflow experiment the run is logged under (created if missing)."""
    run_name: str = ""
    """Name of the MLflow run; ``""`` = the run directory's name."""

    def _validate(self) -> None:
        self._non_empty("experiment")
        if _USERINFO.match(self.tracking_uri):
            raise FieldError(
                self._key("tracking_uri"),
                "must not hold a user or password (the config is saved with the run); give them to "
                "MLflow as MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (or MLFLOW_TRACKING_TOKEN)",
            )


class WandbTracking(_Section):
    """Log the run to Weights & Biases (``pip install 'skillopt[wandb]'``)."""

    SECTION: ClassVar[str] = "tracking.wandb"

    enabled: bool = False
    """Log the run to W&B."""
    project: str = "skillopt"
    """W&B project of the run."""
    entity: str = ""
    """W&B entity (user or team); ``""`` = the key's default entity."""
    mode: WandbModeField = "auto"
    """``online`` = send as it runs (needs a W&B API key), ``offline`` = write the run under
    ``dir`` only (upload later with ``wandb sync``), ``auto`` = online when a key is configured
    (``WANDB_API_KEY`` or ``wandb login``), else offline; ``WANDB_MODE``, when set, decides."""
    dir: str = ""
    """Folder W&B writes its ``wandb/`` files into; ``""`` = the run directory."""

    def _validate(self) -> None:
        self._non_empty("project")


class TensorboardTracking(_Section):
    """Write TensorBoard event files (``pip install 'skillopt[tensorboard]'``)."""

    SECTION: ClassVar[str] = "tracking.tensorboard"

    enabled: bool = False
    """Write the run's TensorBoard event files."""
    log_dir: str = ""
    """Folder of the event files; ``""`` = ``tensorboard/`` in the run directory (so
    ``tensorboard --logdir runs`` shows every run under ``runs``)."""


class TrackingConfig(_Section):
    """Experiment trackers the run also logs to (none by default). A tracker that fails says so
    once and the run goes on without it; ``--resume`` continues the same tracker run."""

    SECTION: ClassVar[str] = "tracking"

    mlflow: Annotated[MlflowTracking, _subsection(MlflowTracking)] = Field(default_factory=MlflowTracking)
    """MLflow: ``tracking.mlflow.enabled``, ``tracking_uri``, ``experiment``, ``run_name``."""
    wandb: Annotated[WandbTracking, _subsection(WandbTracking)] = Field(default_factory=WandbTracking)
    """Weights & Biases: ``tracking.wandb.enabled``, ``project``, ``entity``, ``mode``, ``dir``."""
    tensorboard: Annotated[TensorboardTracking, _subsection(TensorboardTracking)] = Field(
        default_factory=TensorboardTracking
    )
    """TensorBoard: ``tracking.tensorboard.enabled``, ``log_dir``."""
    flush_timeout_s: Annotated[float, Bounds(ge=0, unit=" seconds")] = 30
    """At the end of the run, the longest wait for trackers still sending what the run logged
    (a slow or unreachable backend); then the run ends without them."""

    @property
    def enabled(self) -> tuple[str, ...]:
        """The names of the enabled trackers (``mlflow``, ``wandb``, ``tensorboard``)."""
        return tuple(n for n in ("mlflow", "wandb", "tensorboard") if getattr(self, n).enabled)


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
