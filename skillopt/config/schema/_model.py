"""The ``model`` section: which models play the optimizer and the target, how they are called,
and what they cost (``model.prices``)."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal, TypeAlias

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
from skillopt.config.schema._section import _hints, _Section
from skillopt.errors import ConfigError
from skillopt.validation import Bounds, Canonical, problems, show

__all__ = ["ModelConfig", "ModelPrice", "ReasoningEffort"]

ReasoningEffort = Literal["", "none", "low", "medium", "high", "xhigh", "max"]
ReasoningEffortField: TypeAlias = Annotated[ReasoningEffort, Canonical()]


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

    def to_dict(self) -> dict[str, Any]:
        """Plain data, each price as ``{input, output}`` only: ``cached_input`` and
        ``cache_write`` are not written (so a run directory's ``config.json`` does not keep
        them)."""
        data = super().to_dict()
        data["prices"] = {name: {"input": p.input, "output": p.output} for name, p in self.prices.items()}
        return data

    def price_pairs(self) -> dict[str, tuple[float | None, ...]]:
        """Prices as ``{model: (input, output, cached_input, cache_write)}`` (``None``: the
        input price), the shape of :class:`skillopt.models.roles.PriceTable`."""
        return {name: (p.input, p.output, p.cached_input, p.cache_write) for name, p in self.prices.items()}
