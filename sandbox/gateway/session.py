"""One rollout's access to the model gateway (:class:`GatewaySession`): its provider profile,
token budget, recorded exchanges and the provider's first failure."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field, replace
from typing import Any

from skillopt.agents.context import interrupted_info
from skillopt.errors import BudgetExceeded, ModelError
from skillopt.models.profiles import ProviderProfile
from skillopt.observability import tracing
from skillopt.types import InfraErrorKind, RolloutResult, Usage

__all__ = ["GatewaySession"]

_MAX_EXCHANGES = 200


@dataclass
class GatewaySession:
    """One rollout's access to one provider profile."""

    token: str
    rollout_id: str
    profile: ProviderProfile
    model: str
    budget_tokens: int | None
    cache_mode: str
    #: The rollout's sampling seed (0 = none), sent upstream as the ``X-Skillopt-Seed`` header.
    seed: int = 0
    used: Usage = field(default_factory=Usage)
    exchanges: list[dict[str, Any]] = field(default_factory=list)
    error: Exception | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: The trace context the session was opened in, on its rollout's thread (its model calls'
    #: spans nest under it); None while tracing is off.
    trace_parent: Any = field(default_factory=tracing.current)

    def add(self, exchange: dict[str, Any], usage: Usage) -> None:
        with self.lock:
            self.used = self.used + usage
            if len(self.exchanges) < _MAX_EXCHANGES:
                self.exchanges.append(exchange)

    def fail(self, error: ModelError) -> None:
        """Record a provider failure: the first one types the rollout's failure."""
        with self.lock:
            if self.error is None:
                self.error = error

    def provider_error(self) -> ModelError | None:
        """The provider's failure recorded for this session (not a used-up budget), if any."""
        error = self.error
        return error if isinstance(error, ModelError) and not isinstance(error, BudgetExceeded) else None

    def check_failed(self) -> None:
        """Answer later calls of a session whose provider already failed with that failure, at
        once: retrying a refused credential or request only burns time (and the provider's
        patience); a rate limit or outage already got the gateway's retries.

        Raises:
            ModelError: the recorded failure.
        """
        error = self.provider_error()
        if error is not None:
            raise error

    def check_budget(self) -> None:
        if self.budget_tokens is not None and self.used.total_tokens >= self.budget_tokens:
            err = BudgetExceeded(
                f"model token budget of {self.budget_tokens} used up ({self.used.total_tokens} tokens)",
                rollout_id=self.rollout_id,
            )
            self.error = self.error or err
            raise err

    def attach_to(self, result: RolloutResult, *, full: bool) -> RolloutResult:
        """Attach the gateway's record of the rollout's model exchanges (and, for exec agents,
        their usage) to its row, and the gateway's own failure (replay miss, upstream down) as
        the typed infra error."""
        exchanges = (
            self.exchanges
            if full
            else [{k: v for k, v in e.items() if k not in ("request", "response")} for e in self.exchanges]
        )
        notes = {**dict(result.trace.notes), "model_exchanges": json.dumps(exchanges, ensure_ascii=False)}
        result = replace(result, trace=replace(result.trace, notes=notes))
        if not result.usage.calls and self.used.calls:
            # An exec agent's calls are seen only here (the CLI talks to the gateway): its row
            # carries what the gateway counted, so cost and budgets include it.
            result = replace(result, usage=self.used)
        error = self.error
        if result.infra_error is not None or error is None:
            return result
        info, reason = interrupted_info(error)
        if info is None:
            return result  # a used-up budget: the agent's own failure, scored
        if info.kind != InfraErrorKind.REPLAY_MISS and not result.fail_reason and result.hard >= 1.0:
            return result  # the provider failed once but the agent recovered and solved the task
        # The provider refused or failed for this rollout: whatever the agent made of that (an
        # exec agent may even have run the error text as code) is not the skill's result.
        metrics = {**dict(result.metrics), "agent_fail_reason": result.fail_reason}
        return replace(result, infra_error=info, fail_reason=reason, metrics=metrics)
