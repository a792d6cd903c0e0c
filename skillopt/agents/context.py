"""What an agent receives for one rollout, and the one protocol every agent implements.

The sandbox service builds an :class:`AgentContext` per rollout (the leased sandbox when the
agent needs one, the target model, the effective limits) and calls :meth:`Agent.run`. Agents
never touch Docker or gRPC: untrusted code only ever runs through ``ctx.sandbox``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from skillopt.agents.sandbox import Sandbox
from skillopt.models.base import ChatModel
from skillopt.types import InfraFailure, Limits, RolloutRequest, RolloutResult

__all__ = ["Agent", "AgentContext", "GatewayAccess", "ProgressEvent", "interrupted_info"]

T = TypeVar("T")


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
        sandbox: the isolated workspace; every untrusted execution goes through it. ``None``
            for agents declared with ``sandbox="none"`` (they run no code: no container is
            leased for them).
        model: the target model (already resolved from ``request.model.provider``).
        limits: the effective limits (request values clamped to the host's, defaults filled).
        emit: progress callback (cheap; never raises).
        deadline: ``time.monotonic()`` after which the rollout is out of time.
        gateway: for exec agents (their container reaches models only through it).
        grading_sandbox: leases a **fresh** container without network for trusted grading
            runs (``with ctx.grading_sandbox() as box: ...``): it never held the agent's work,
            each call gives a new one, released when the block ends. Envs whose tests must
            run code (HumanEval, MBPP) execute the candidate there, never in the agent's own
            container, so nothing the agent left behind can touch the grading. ``None`` where
            the host offers none.
        grader: runs a trusted grading function in the host's grader processes, off the
            service's threads (``grader(fn, *args, **kwargs)``, a
            :meth:`skillopt.grader_pool.GraderPool.call`); ``None`` = in this thread. Use
            :meth:`run_grader`.
    """

    request: RolloutRequest
    sandbox: Sandbox | None
    model: ChatModel | None
    limits: Limits
    emit: Callable[[ProgressEvent], None]
    deadline: float
    gateway: GatewayAccess | None = None
    grading_sandbox: Callable[[], AbstractContextManager[Sandbox]] | None = None
    grader: Callable[..., Any] | None = None

    def remaining_s(self) -> float:
        """Seconds left of the rollout's wall time (negative when it is over)."""
        return self.deadline - time.monotonic()

    def require_sandbox(self) -> Sandbox:
        """The sandbox, for agents that run code.

        Raises:
            RuntimeError: the agent was declared ``sandbox="none"`` but needs one (a bug in
                the env's declaration, caught by the conformance test).
        """
        if self.sandbox is None:
            raise RuntimeError("this agent needs a sandbox but its env declared sandbox='none'")
        return self.sandbox

    def run_grader(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` in the host's grader processes when it has them (else here).
        ``fn`` and its arguments must be picklable (a module-level function, plain data); the
        call may take at most what is left of the rollout's time.

        Raises:
            GraderFailed: the grader's worker died or overran its time (infrastructure).
            Exception: whatever ``fn`` raised.
        """
        if self.grader is None:
            return fn(*args, **kwargs)
        return self.grader(fn, *args, timeout_s=max(1.0, self.remaining_s()), **kwargs)

    def fresh_grading_sandbox(self) -> AbstractContextManager[Sandbox]:
        """A fresh no-network container for a grading run (see :attr:`grading_sandbox`).

        Raises:
            SandboxUnavailable: the host offers no grading sandboxes (an infrastructure
                failure: the row is never scored).
        """
        if self.grading_sandbox is None:
            from skillopt.errors import SandboxUnavailable

            raise SandboxUnavailable("this host offers no fresh grading sandbox")
        return self.grading_sandbox()


class Agent(Protocol):
    """An env-independent agent, composed by an env with env-specific prompts and grading.

    Invariants: a model or program failure on the task is a row with ``fail_reason`` (never an
    exception); an infrastructure failure is raised as :class:`skillopt.errors.InfraError` (or
    kept on the row as ``infra_error``); gold material is only read by the grading hooks the
    env supplies, on the trusted side, and never written into the sandbox.
    """

    def run(self, ctx: AgentContext) -> RolloutResult:
        """Run one rollout and grade it on the trusted side."""
        ...

    def skill_file(self, content: str) -> str:
        """The SKILL.md text as mounted for this agent (front matter for agent CLIs)."""
        ...


def interrupted_info(exc: BaseException) -> tuple[InfraFailure | None, str]:
    """The typed infrastructure error for a failure that interrupted an agent, or ``None``
    when it is the agent's own failure (a used-up token budget is: it scores as a failure).

    Returns:
        ``(InfraError | None, fail_reason)``.

    Raises:
        TypeError: ``exc`` is neither an infrastructure nor a model error.
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
