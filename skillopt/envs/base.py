"""The env contract: what a benchmark environment provides to the sandbox service.

An env owns its data loader, prompts, agents and trusted evaluator. The sandbox service calls
:meth:`Environment.validate` on every incoming request (bad input → ``InvalidRequest``) and then
:meth:`Environment.run` with an :class:`AgentContext` holding the leased sandbox and the model.

Invariants an env keeps:

* a model or program failure on a task is a result row with ``fail_reason`` (never an
  exception);
* an infrastructure failure is raised as :class:`skillopt.errors.InfraError` and the service
  turns it into a typed ``infra_error`` row, never a score;
* gold material (``request.grading``) is only used by the evaluator on the trusted side and is
  never written into the sandbox.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from skillopt.executor import Sandbox
from skillopt.models.base import ChatModel
from skillopt.types import Grading, Limits, RolloutRequest, RolloutResult, Task

__all__ = [
    "AgentContext",
    "EnvData",
    "Environment",
    "GatewayAccess",
    "ProgressEvent",
    "TaskItem",
    "interrupted_info",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class ProgressEvent:
    """Progress of a rollout, streamed to the client. ``phase``: see the proto's Progress."""

    phase: str
    turn: int = 0
    detail: str = ""


@dataclass(frozen=True, kw_only=True)
class GatewayAccess:
    """How an exec agent inside its container reaches models: the gateway's URL on the
    sandbox network and this rollout's token (not a provider key: it only works at the
    gateway, only for this rollout, only while it runs)."""

    base_url: str
    token: str
    model: str
    #: Wire protocol of the provider behind the gateway: ``openai`` or ``anthropic``.
    api: str
    #: The provider's failure seen by the gateway for this rollout (auth, rate limit, bad
    #: request, unavailable: a :class:`skillopt.errors.ModelError`), or ``None``. An exec agent
    #: raises it instead of grading whatever the CLI made of the error.
    provider_error: Callable[[], Exception | None] = lambda: None


@dataclass(frozen=True, kw_only=True)
class AgentContext:
    """Everything an agent may use for one rollout.

    Attributes:
        request: the rollout request (task, skill, model spec, limits).
        sandbox: the isolated workspace; every untrusted execution goes through it.
        model: the target model (already resolved from ``request.model.provider``).
        limits: the effective limits (request values clamped to the host's, defaults filled).
        emit: progress callback (cheap; never raises).
        deadline: ``time.monotonic()`` after which the rollout is out of time.
        gateway: for exec agents (their container reaches models only through it).
    """

    request: RolloutRequest
    sandbox: Sandbox
    model: ChatModel | None
    limits: Limits
    emit: Callable[[ProgressEvent], None]
    deadline: float
    gateway: GatewayAccess | None = None

    def remaining_s(self) -> float:
        return self.deadline - time.monotonic()


class Environment(Protocol):
    """A benchmark environment as the sandbox service sees it."""

    name: str
    #: Agent kinds this env can run (e.g. ``codegen_single``).
    agents: tuple[str, ...]
    #: Agents that need no model (e.g. a fixed-script agent for tests); empty for most envs.
    needs_model: bool

    def container(self, agent: str) -> str:
        """Which container an agent runs in: ``isolated`` (no network at all; the model is
        called from the service) or ``gateway`` (an agent CLI in the container calls models
        through the gateway network)."""
        ...

    def validate(self, request: RolloutRequest) -> None:
        """Refuse malformed or unsafe requests.

        Raises:
            InvalidRequest: with a message that says what is wrong and what to send instead.
        """
        ...

    def run(self, agent: str, ctx: AgentContext) -> RolloutResult:
        """Run one rollout and grade it on the trusted side.

        Raises:
            InfraError: the environment failed (container died, OOM of the runner, timeout).
        """
        ...


@dataclass(frozen=True, kw_only=True)
class TaskItem:
    """One task of a split as the trainer sees it: what the agent gets and what grades it."""

    task: Task
    grading: Grading
    task_type: str = "other"

    @property
    def id(self) -> str:
        return self.task.id


class EnvData(Protocol):
    """An env's data on the controller side: splits of task items."""

    def split(self, name: str) -> list[TaskItem]:
        """Items of a split (train, val/selection/valid_seen, test/valid_unseen), stable order.

        Raises:
            ConfigError: unknown split (the message lists the available ones).
        """
        ...

    def task_types(self) -> list[str]: ...

    def describe(self) -> dict:
        """Where the data came from and the split sizes (for config.json and summaries)."""
        ...


def interrupted_info(exc: BaseException):
    """The typed infrastructure error for a failure that interrupted an agent, or ``None``
    when it is the agent's own failure (a used-up token budget is: it scores as a failure).

    Returns:
        ``(InfraError | None, fail_reason)``.
    """
    from skillopt.errors import BudgetExceeded, InfraError, ModelError

    if isinstance(exc, InfraError):
        info = exc.info()
    elif isinstance(exc, BudgetExceeded):
        return None, f"budget-exceeded: {exc.message}"
    elif isinstance(exc, ModelError):
        # The SDK already retried: a typed model failure (auth, rate limit, bad request,
        # unavailable, replay miss), not the skill's fault.
        info = exc.info()
    else:
        raise TypeError(f"not an interruption: {exc!r}") from exc
    return info, info.fail_reason
