"""One rollout's access to the model gateway (:class:`GatewaySession`): its provider profile,
token budget, recorded exchanges and the provider's first failure."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from skillopt.errors import BudgetExceeded, ModelError
from skillopt.models.profiles import ProviderProfile
from skillopt.types import Usage

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
