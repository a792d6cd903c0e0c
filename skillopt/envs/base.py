"""The env contract: what a benchmark environment declares and provides.

An env is one folder ``skillopt/envs/<name>/`` plus one line in :mod:`skillopt.envs.registry`.
It declares an :class:`EnvSpec` (in a cheap ``spec.py``: config validation imports it, never the
env's heavy dependencies) and provides two sides:

* **service side** (:class:`Environment`, usually a :class:`ComposedEnv`): the agents it offers,
  composed from the env-independent building blocks of :mod:`skillopt.agents` with the env's
  prompts and its trusted evaluator; refuses malformed requests (``InvalidRequest``);
* **controller side** (:class:`EnvData`): splits of :class:`TaskItem` (the task payload the
  agent sees + the grading payload only the trusted evaluator sees), the initial skill, the
  per-category breakdown (``TaskItem.task_type``).

Per agent the spec says whether a rollout needs a container (:data:`SandboxKind`): ``none``
(the model is called from the service and no code runs: no container is leased), ``isolated``
(a container without network) or ``gateway`` (an agent CLI in a container that reaches models
only through the gateway). Env-specific options are a pydantic model (``extra="forbid"``), set
as ``env.options`` in a config and validated when the config is resolved
(:func:`skillopt.config.resolve_config`, which the loader runs).

Invariants an env keeps:

* a model or program failure on a task is a result row with ``fail_reason`` (never an
  exception);
* an infrastructure failure is raised as :class:`skillopt.errors.InfraError` and the service
  turns it into a typed ``infra_error`` row, never a score;
* gold material (``request.grading``) is only used by the evaluator on the trusted side and is
  never written into the sandbox or shown to the agent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError

from skillopt.agents.context import Agent, AgentContext, GatewayAccess, ProgressEvent, interrupted_info
from skillopt.errors import ConfigError, InvalidRequest
from skillopt.types import Grading, RolloutRequest, RolloutResult, Task
from skillopt.validation import problems

__all__ = [
    "EARLIER_ATTEMPT",
    "AgentContext",
    "AgentSpec",
    "ComposedEnv",
    "EnvData",
    "EnvOptions",
    "EnvSpec",
    "Environment",
    "GatewayAccess",
    "ProgressEvent",
    "SandboxKind",
    "TaskItem",
    "earlier_attempt",
    "interrupted_info",
    "options_error",
]

SandboxKind = Literal["none", "isolated", "gateway"]

#: Task attribute holding the agent's own earlier attempt at the task (deep-reflect re-runs):
#: the assistant messages of the earlier trace, never anything the grader wrote.
EARLIER_ATTEMPT = "earlier_attempt"


@dataclass(frozen=True, kw_only=True)
class AgentSpec:
    """One agent an env offers.

    Attributes:
        name: the agent kind (``env.agent`` in a config), e.g. ``qa`` or ``codex_exec``.
        sandbox: what a rollout of it needs (see :data:`SandboxKind`).
        api: the wire API its CLI speaks (``openai``/``anthropic``); ``""`` = any provider
            (the service makes the calls).
        summary: one line for ``--help`` and the README.
        image: the container image its rollouts need (e.g. one with a game engine); ``""`` =
            the host's runtime image. Only for ``isolated`` agents.
        preimport: modules the container's runner imports before work arrives (with
            ``image``; ``()`` = the host's default), so each execution forks a warm interpreter.
    """

    name: str
    sandbox: SandboxKind
    api: str = ""
    summary: str = ""
    image: str = ""
    preimport: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if (self.image or self.preimport) and self.sandbox != "isolated":
            raise ValueError(
                f"agent {self.name}: image/preimport need sandbox='isolated', not {self.sandbox!r}"
            )
        if self.preimport and not self.image:
            raise ValueError(f"agent {self.name}: preimport is only for an agent with its own image")


class EnvOptions(BaseModel):
    """Base of an env's options (``env.options``): typed, frozen, unknown keys refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def options_error(
    env: str,
    exc: ValidationError,
    *,
    model: type[BaseModel] | None = None,
    prefix: str = "env.options",
    allowed: tuple[str, ...] = (),
) -> str:
    """A readable message for invalid env options or payloads (of ``model``): every problem with
    its dotted key (and, for an unknown top-level key, the allowed ones), worded as the run
    config's (:func:`skillopt.validation.problems`, the one formatter both use)."""
    hints = {name: f.annotation for name, f in model.model_fields.items()} if model is not None else {}

    def unknown(key: str, depth: int) -> str:
        if depth > 1:
            return f"unknown option for env {env}"
        return f"unknown option for env {env}" + (
            f"; allowed: {', '.join(allowed)}" if allowed else " (it takes none)"
        )

    return "; ".join(
        f"{key}: {problem}" for key, problem in problems(exc, prefix=prefix, hints=hints, unknown=unknown)
    )


@dataclass(frozen=True, kw_only=True)
class EnvSpec:
    """What an env declares. Cheap to import: no dependency beyond pydantic.

    Attributes:
        name: the env name (``env.name``), also its folder under ``skillopt/envs/``.
        summary: one line for messages and the README.
        agents: the agents it offers.
        default_agent: the agent a config gets when ``env.agent`` is ``""``.
        environment: ``"module:attr"`` of the service-side :class:`Environment` (a class or a
            zero-argument factory).
        data: ``"module:attr"`` of the controller-side :class:`EnvData` class.
        options: the env's options model (``env.options``).
        raw_item: ``"module:attr"`` of the env's one function from a raw item, exactly as in
            the data files, to a :class:`TaskItem`: ``(raw, *, options, position, source)``;
            the loader, ``skillopt score`` and the tests use it. ``""`` = none (SpreadsheetBench
            items are folders of workbooks).
        score_options: options ``skillopt score`` grades with (e.g. no choice shuffling, so
            labels mean what they mean in the file).
        score_problems: the problems ``skillopt score --samples`` grades against by default, a
            file relative to the env's folder shipped with its licence beside it (e.g. the full
            ``data/full/HumanEval.jsonl.gz``); ``""`` = the vendored sample.
        data_root_problem: says what is wrong with a data root for a split mode (``""`` = ok);
            checked when the config is resolved.
        grader_modules: modules holding the functions the env's agents run in the host's
            grader processes (:meth:`AgentContext.run_grader`); the workers import them before
            work arrives.
    """

    name: str
    summary: str
    agents: tuple[AgentSpec, ...]
    default_agent: str
    environment: str
    data: str
    options: type[EnvOptions] = EnvOptions
    raw_item: str = ""
    score_options: Mapping[str, Any] = field(default_factory=dict)
    score_problems: str = ""
    data_root_problem: Callable[[Path, str], str] | None = field(default=None, compare=False)
    grader_modules: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        names = [a.name for a in self.agents]
        if len(set(names)) != len(names):
            raise ValueError(f"env {self.name}: duplicate agent names {names}")
        if self.default_agent not in names:
            raise ValueError(f"env {self.name}: default agent {self.default_agent!r} is not one of {names}")

    @property
    def agent_names(self) -> tuple[str, ...]:
        """The agent kinds, in declaration order."""
        return tuple(a.name for a in self.agents)

    def agent(self, name: str) -> AgentSpec:
        """The spec of agent ``name``.

        Raises:
            InvalidRequest: no such agent (the message lists the available ones).
        """
        for a in self.agents:
            if a.name == name:
                return a
        raise InvalidRequest(
            f"env {self.name!r} has no agent {name!r}; available: {', '.join(self.agent_names)}"
        )

    def parse_options(self, raw: Mapping[str, Any] | EnvOptions | None) -> EnvOptions:
        """The validated options (defaults filled in).

        Raises:
            ConfigError: a bad value or an unknown key; the message names ``env.options.<key>``.
        """
        if isinstance(raw, self.options):
            return raw
        try:
            return self.options.model_validate(dict(raw or {}))
        except ValidationError as exc:
            raise ConfigError(
                options_error(self.name, exc, model=self.options, allowed=tuple(self.options.model_fields))
            ) from None


class Environment(Protocol):
    """A benchmark environment as the sandbox service sees it."""

    name: str
    #: Agent kinds this env can run (e.g. ``codegen_single``).
    agents: tuple[str, ...]
    #: Whether rollouts call a model (false only for test envs with fixed-script agents).
    needs_model: bool
    #: Agent → the wire API its CLI speaks (the service checks the provider matches).
    agent_apis: Mapping[str, str]

    def container(self, agent: str) -> SandboxKind:
        """What a rollout of ``agent`` runs in (see :data:`SandboxKind`)."""
        ...

    def container_image(self, agent: str) -> tuple[str, tuple[str, ...]]:
        """``(image, preimport)`` a rollout of ``agent`` needs; ``("", ())`` = the host's
        runtime image and its default preimports (see :attr:`AgentSpec.image`)."""
        ...

    def skill_file(self, agent: str, content: str) -> str:
        """SKILL.md as mounted for ``agent`` (CLIs need front matter; others read the body)."""
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


class ComposedEnv:
    """An :class:`Environment` made of agents: the spec says which, :meth:`build_agents`
    composes them, :meth:`check_request` checks the env's payload.

    Subclasses set :attr:`spec` and implement the two methods.
    """

    spec: ClassVar[EnvSpec]
    needs_model: ClassVar[bool] = True

    def __init__(self) -> None:
        built = dict(self.build_agents())
        if set(built) != set(self.spec.agent_names):
            raise ValueError(
                f"env {self.spec.name}: agents built {sorted(built)} differ from the spec's {sorted(self.spec.agent_names)}"
            )
        self._agents: dict[str, Agent] = built

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def agents(self) -> tuple[str, ...]:
        return self.spec.agent_names

    @property
    def agent_apis(self) -> dict[str, str]:
        return {a.name: a.api for a in self.spec.agents if a.api}

    def container(self, agent: str) -> SandboxKind:
        return self.spec.agent(agent).sandbox

    def container_image(self, agent: str) -> tuple[str, tuple[str, ...]]:
        a = self.spec.agent(agent)
        return a.image, a.preimport

    def skill_file(self, agent: str, content: str) -> str:
        return self._agents[agent].skill_file(content)

    def build_agents(self) -> Mapping[str, Agent]:
        """Agent name → agent, one per :attr:`EnvSpec.agents`."""
        raise NotImplementedError

    def check_request(self, request: RolloutRequest) -> None:
        """Refuse a malformed task or grading payload.

        Raises:
            InvalidRequest: naming the field.
        """
        raise NotImplementedError

    def validate(self, request: RolloutRequest) -> None:
        self.spec.agent(request.agent)
        self.check_request(request)

    def run(self, agent: str, ctx: AgentContext) -> RolloutResult:
        if agent not in self._agents:
            raise InvalidRequest(f"{self.name} has no agent {agent!r}")
        return self._agents[agent].run(ctx)


@dataclass(frozen=True, kw_only=True)
class TaskItem:
    """One task of a split as the trainer sees it: what the agent gets and what grades it.

    ``task_type`` is the item's category for the per-category breakdowns (``by_task_type`` in
    summaries).
    """

    task: Task
    grading: Grading
    task_type: str = "other"

    @property
    def id(self) -> str:
        return self.task.id

    def with_earlier_attempt(self, text: str) -> TaskItem:
        """A copy whose task carries the agent's own earlier attempt (see :data:`EARLIER_ATTEMPT`)."""
        attrs = {**dict(self.task.attributes), EARLIER_ATTEMPT: text}
        return replace(self, task=replace(self.task, attributes=attrs))


def earlier_attempt(row: RolloutResult, *, max_chars: int = 8000) -> str:
    """The agent's own side of an earlier rollout (its assistant messages, the last
    ``max_chars`` characters), for a deep-reflect re-run. Never the verification or evaluation
    messages: those hold gold answers and the agent must not see them."""
    parts = [m.content.strip() for m in row.trace.messages if m.role == "assistant" and m.content.strip()]
    return "\n\n".join(parts)[-max_chars:]


class EnvData(Protocol):
    """An env's data on the controller side: splits of task items.

    Constructed as ``cls(data_root, *, split_mode, split_ratio, split_seed, options)``.
    """

    def split(self, name: str) -> list[TaskItem]:
        """Items of a split (train, val/selection/valid_seen, test/valid_unseen), stable order.

        Raises:
            ConfigError: unknown split (the message lists the available ones).
        """
        ...

    def task_types(self) -> list[str]:
        """Every category an item can have (the rows of the per-category breakdown)."""
        ...

    def describe(self) -> dict:
        """Where the data came from and the split sizes (for config.json and summaries)."""
        ...

    def initial_skill(self) -> str:
        """The env's shipped initial skill (``skills/initial.md``)."""
        ...
