"""RolloutService: one rollout from request to graded result, on the trusted side.

Takes domain objects (never protobuf): validate → lease a warm container → place SKILL.md →
let the env's agent work through the sandbox and the model → grade outside the container →
build the result. Infrastructure failures become a typed ``infra_error`` row; nothing here
turns them into a score.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field, replace

import structlog

from sandbox.gateway.core import Gateway, GatewayChatModel
from sandbox.runtime.docker_runtime import DockerRuntime
from sandbox.runtime.lease import LeasedSandbox
from sandbox.runtime.pool import PoolManager
from sandbox.runtime.spec import EXEC_SKILL_MOUNTS, ContainerSpec
from skillopt.envs.base import AgentContext, GatewayAccess, ProgressEvent, interrupted_info
from skillopt.envs.registry import get_env
from skillopt.errors import InfraError, InvalidRequest, ModelError
from skillopt.files import check_relative_name
from skillopt.models.base import ChatModel
from skillopt.models.profiles import ProviderProfile, build_model
from skillopt.types import InfraError as InfraErrorInfo
from skillopt.types import InfraErrorKind, Limits, RolloutRequest, RolloutResult

__all__ = ["DEFAULT_LIMITS", "MAX_LIMITS", "RolloutService", "ServiceConfig"]

log = structlog.get_logger("skillopt.sandbox.service")

MiB = 1024 * 1024
DEFAULT_LIMITS = Limits(
    wall_time_s=600.0,
    max_turns=30,
    exec_timeout_s=120.0,
    memory_bytes=1024 * MiB,
    cpus=1.0,
    output_bytes=64 * 1024,
)
MAX_LIMITS = Limits(
    wall_time_s=3 * 3600.0,
    max_turns=200,
    exec_timeout_s=1800.0,
    memory_bytes=16 * 1024 * MiB,
    cpus=8.0,
    output_bytes=4 * MiB,
)
_ROLLOUT_ID = re.compile(r"^[A-Za-z0-9._:/@+-]{1,200}$")


@dataclass(frozen=True, kw_only=True)
class ServiceConfig:
    """Host policy for rollouts."""

    host_id: str
    #: Maximum concurrent rollouts (further Runs get RESOURCE_EXHAUSTED).
    capacity: int = 4
    default_limits: Limits = DEFAULT_LIMITS
    max_limits: Limits = MAX_LIMITS
    #: Largest single input/gold file accepted.
    max_file_bytes: int = 32 * MiB
    #: Largest request accepted (all files together).
    max_request_bytes: int = 64 * MiB
    #: Largest skill accepted.
    max_skill_bytes: int = 1 * MiB
    #: Longest wait for a container before the rollout fails as infrastructure.
    acquire_timeout_s: float = 180.0
    base_spec: ContainerSpec = field(default_factory=ContainerSpec)


def _clamp(value: float | int | None, default: float | int | None, maximum: float | int | None):
    v = value if value else default
    if v is None:
        return None
    return min(v, maximum) if maximum else v


class RolloutService:
    """Runs rollouts on this host. Thread-safe; one instance per service process."""

    def __init__(
        self,
        config: ServiceConfig,
        runtime: DockerRuntime,
        pools: PoolManager,
        providers: dict[str, ProviderProfile],
        *,
        gateway: Gateway | None = None,
        gateway_url: str | None = None,
        exec_network: str = "none",
        exec_unavailable: str = "",
    ) -> None:
        self.config = config
        self.runtime = runtime
        self.pools = pools
        self.providers = providers
        self._models: dict[str, ChatModel] = {}
        self._models_lock = threading.Lock()
        self.gateway = gateway or Gateway(providers)
        #: The gateway's URL as exec-agent containers see it; None: exec agents unavailable.
        self.gateway_url = gateway_url
        self.exec_unavailable = exec_unavailable
        self.exec_spec = replace(
            config.base_spec,
            network_mode=exec_network,
            skill_mounts=EXEC_SKILL_MOUNTS,
            memory_bytes=max(config.base_spec.memory_bytes, 2048 * MiB),
            pids_limit=max(config.base_spec.pids_limit, 512),
            # gVisor as registered here runs with --network=none; exec agents need the gateway
            # network, so they use the engine's default runtime behind the firewalled bridge.
            runtime="",
        )

    # -- validation --------------------------------------------------------------------------

    def validate(self, request: RolloutRequest) -> None:
        """Refuse bad input before any resource is used.

        Raises:
            InvalidRequest: with a message naming the offending field.
        """
        if not _ROLLOUT_ID.match(request.rollout_id):
            raise InvalidRequest(
                f"rollout_id must be 1-200 characters of [A-Za-z0-9._:/@+-], got {request.rollout_id[:60]!r}"
            )
        env = get_env(request.env)
        if request.model_cache not in ("", "off", "record", "replay"):
            raise InvalidRequest(f"model_cache must be off, record or replay, got {request.model_cache!r}")
        if request.agent in env.agents and env.container(request.agent) == "gateway":
            if self.gateway_url is None:
                raise InvalidRequest(
                    f"agent {request.agent!r} needs the model gateway network, unavailable on host "
                    f"{self.config.host_id}: {self.exec_unavailable or 'not enabled'}"
                )
            wanted = getattr(env, "agent_apis", {}).get(request.agent)
            profile = self.providers.get(request.model.provider)
            if (
                wanted
                and profile is not None
                and ("anthropic" if profile.kind == "anthropic" else "openai") != wanted
            ):
                raise InvalidRequest(
                    f"agent {request.agent!r} speaks the {wanted} API but provider {profile.name!r} is {profile.kind!r}"
                )
        if request.agent not in env.agents:
            raise InvalidRequest(
                f"env {request.env!r} has no agent {request.agent!r}; available: {', '.join(env.agents)}"
            )
        total = 0
        for side, cases in (("task", request.task.cases), ("grading", request.grading.cases)):
            seen: set[str] = set()
            for case in cases:
                check_relative_name(case.name, what=f"{side} case name")
                if case.name in seen:
                    raise InvalidRequest(f"{side} case {case.name!r} appears twice")
                seen.add(case.name)
                names: set[str] = set()
                for f in case.files:
                    name = check_relative_name(f.name, what=f"{side} file name in case {case.name!r}")
                    if name in names:
                        raise InvalidRequest(f"{side} case {case.name!r}: file {name!r} appears twice")
                    names.add(name)
                    if len(f.content) > self.config.max_file_bytes:
                        raise InvalidRequest(
                            f"{side} file {case.name}/{name} is {len(f.content)} bytes; "
                            f"the limit is {self.config.max_file_bytes} bytes"
                        )
                    total += len(f.content)
        if total > self.config.max_request_bytes:
            raise InvalidRequest(
                f"request files total {total} bytes; the limit is {self.config.max_request_bytes} bytes"
            )
        skill = request.skill
        if len(skill.content.encode("utf-8")) > self.config.max_skill_bytes:
            raise InvalidRequest(f"skill is larger than {self.config.max_skill_bytes} bytes")
        check_relative_name(skill.name or "skillopt-target", what="skill name")
        if "/" in (skill.name or ""):
            raise InvalidRequest(f"skill name must be a single path component, got {skill.name!r}")
        if env.needs_model and request.model.provider not in self.providers:
            known = ", ".join(sorted(self.providers)) or "none configured"
            raise InvalidRequest(
                f"unknown model provider {request.model.provider!r} on host {self.config.host_id}; "
                f"configured: {known}"
            )
        env.validate(request)

    def effective_limits(self, limits: Limits) -> Limits:
        d, m = self.config.default_limits, self.config.max_limits
        return Limits(
            wall_time_s=_clamp(limits.wall_time_s, d.wall_time_s, m.wall_time_s),
            max_turns=_clamp(limits.max_turns, d.max_turns, m.max_turns),
            exec_timeout_s=_clamp(limits.exec_timeout_s, d.exec_timeout_s, m.exec_timeout_s),
            memory_bytes=_clamp(limits.memory_bytes, d.memory_bytes, m.memory_bytes),
            cpus=_clamp(limits.cpus, d.cpus, m.cpus),
            output_bytes=_clamp(limits.output_bytes, d.output_bytes, m.output_bytes),
            # The gateway ends the rollout's model conversation when it is used up.
            max_model_tokens=_clamp(limits.max_model_tokens, d.max_model_tokens, m.max_model_tokens),
        )

    def model_for(self, provider: str) -> ChatModel:
        with self._models_lock:
            model = self._models.get(provider)
            if model is None:
                model = self._models[provider] = build_model(self.providers[provider])
            return model

    # -- running -----------------------------------------------------------------------------

    def run(
        self,
        request: RolloutRequest,
        *,
        emit,
        cancel: threading.Event,
        deadline_s: float | None = None,
        set_killer=None,
    ) -> RolloutResult:
        """Run a validated request to a result. Never raises for infrastructure failures:
        those come back as a result with ``infra_error`` set.

        Args:
            emit: progress callback.
            cancel: set by another thread to cancel (the container is killed as well).
            deadline_s: the caller's remaining time (gRPC deadline); bounds the wall time.
            set_killer: receives a callable that kills this rollout's container.
        """
        with structlog.contextvars.bound_contextvars(
            rollout_id=request.rollout_id, host=self.config.host_id, env=request.env, agent=request.agent
        ):
            return self._run(request, emit=emit, cancel=cancel, deadline_s=deadline_s, set_killer=set_killer)

    def _run(self, request: RolloutRequest, *, emit, cancel, deadline_s, set_killer) -> RolloutResult:
        t_start = time.monotonic()
        limits = self.effective_limits(request.limits)
        wall = limits.wall_time_s or DEFAULT_LIMITS.wall_time_s
        if deadline_s is not None:
            wall = min(wall, max(0.0, deadline_s - 1.0))  # leave time to send the result
        deadline = t_start + wall
        timings: dict[str, float] = {}
        env = get_env(request.env)
        exec_agent = env.container(request.agent) == "gateway"
        base = self.exec_spec if exec_agent else self.config.base_spec
        memory = limits.memory_bytes
        if exec_agent and memory is not None:
            memory = max(memory, base.memory_bytes)  # an agent CLI needs its room (~200 MB each)
        spec = base.with_limits(memory_bytes=memory, cpus=limits.cpus)
        sandbox: LeasedSandbox | None = None
        handle = None
        session = None
        try:
            emit(ProgressEvent(phase="accepted", detail=f"host {self.config.host_id}"))
            # Agents that run no code (env declares sandbox "none", e.g. the QA agents) get no
            # container: the model is called from here and nothing untrusted executes.
            if env.container(request.agent) != "none":
                t0 = time.monotonic()
                handle = self.pools.acquire(
                    spec, timeout_s=min(self.config.acquire_timeout_s, max(0.1, deadline - t0)), cancel=cancel
                )
                timings["acquire"] = time.monotonic() - t0
                self.runtime.write_lease(handle, request.rollout_id)
                sandbox = LeasedSandbox(
                    self.runtime,
                    handle,
                    output_limit_bytes=int(limits.output_bytes or DEFAULT_LIMITS.output_bytes),
                    deadline=deadline,
                    cancel=cancel,
                )
                if set_killer is not None:
                    set_killer(sandbox.kill)
                if cancel.is_set():
                    sandbox.kill()
                render = getattr(env, "skill_file", None)
                sandbox.write_skill(
                    render(request.agent, request.skill.content) if render else request.skill.content
                )
                emit(
                    ProgressEvent(
                        phase="sandbox_ready",
                        detail=f"container {handle.name} in {timings['acquire'] * 1000:.1f} ms",
                    )
                )
            model = access = None
            if env.needs_model:
                session = self.gateway.open_session(
                    request.rollout_id,
                    provider=request.model.provider,
                    model=request.model.model,
                    budget_tokens=limits.max_model_tokens,
                    cache_mode=request.model_cache,
                )
                model = GatewayChatModel(self.gateway, session, self.model_for(request.model.provider))
                if exec_agent:
                    assert self.gateway_url is not None
                    access = GatewayAccess(
                        base_url=self.gateway_url,
                        token=session.token,
                        model=request.model.model,
                        api="anthropic" if session.profile.kind == "anthropic" else "openai",
                    )
            ctx = AgentContext(
                request=request,
                sandbox=sandbox,
                model=model,
                limits=limits,
                emit=emit,
                deadline=deadline,
                gateway=access,
            )
            result = env.run(request.agent, ctx)
            if session is not None:
                result = self._with_exchanges(result, session, full=exec_agent)
        except InfraError as exc:
            log.warning("rollout.infra_error", kind=exc.kind.value, error=exc.message)
            result = self._infra_row(request, exc.info())
        except ModelError as exc:
            # The SDK already retried; the model side is unavailable, not the skill's fault.
            log.warning("rollout.model_unavailable", error=exc.message)
            result = self._infra_row(
                request,
                InfraErrorInfo(kind=InfraErrorKind.MODEL_UNAVAILABLE, message=exc.message, retryable=True),
            )
        except InvalidRequest as exc:
            result = self._infra_row(
                request,
                InfraErrorInfo(
                    kind=InfraErrorKind.INTERNAL, message=f"invalid input: {exc.message}", retryable=False
                ),
            )
        except Exception as exc:  # a bug: report it as infrastructure, keep the service alive
            log.exception("rollout.crashed")
            result = self._infra_row(
                request,
                InfraErrorInfo(
                    kind=InfraErrorKind.INTERNAL,
                    message=f"internal error: {type(exc).__name__}: {exc}",
                    retryable=True,
                ),
            )
        finally:
            if session is not None:
                self.gateway.close_session(session)
            if handle is not None:
                self.pools.release(handle)
        if cancel.is_set() and (
            result.infra_error is None or result.infra_error.kind != InfraErrorKind.CANCELLED
        ):
            result = self._infra_row(
                request, InfraErrorInfo(kind=InfraErrorKind.CANCELLED, message="rollout cancelled")
            )
        timings = {**dict(result.timings_s), **timings, "total": time.monotonic() - t_start}
        emit(
            ProgressEvent(
                phase="done",
                detail=result.fail_reason
                or ("infra: " + result.infra_error.message if result.infra_error else "ok"),
            )
        )
        return replace(
            result,
            rollout_id=request.rollout_id,
            id=result.id or request.task.id,
            timings_s=timings,
            host=self.config.host_id,
            image_digest=handle.image_digest if handle is not None else self._digest_or_empty(spec.image),
        )

    @staticmethod
    def _with_exchanges(result: RolloutResult, session, *, full: bool) -> RolloutResult:
        """Attach the gateway's record of the rollout's model exchanges to its trace, and the
        gateway's own failure (replay miss, upstream down) as the typed infra error."""
        exchanges = (
            session.exchanges
            if full
            else [{k: v for k, v in e.items() if k not in ("request", "response")} for e in session.exchanges]
        )
        notes = {**dict(result.trace.notes), "model_exchanges": json.dumps(exchanges, ensure_ascii=False)}
        result = replace(result, trace=replace(result.trace, notes=notes))
        if result.infra_error is None and session.error is not None:
            info, reason = interrupted_info(session.error)
            if info is not None:
                result = replace(result, infra_error=info, fail_reason=result.fail_reason or reason)
        return result

    def _digest_or_empty(self, image: str) -> str:
        try:
            return self.runtime.image_digest(image)
        except InfraError:
            return ""

    @staticmethod
    def _infra_row(request: RolloutRequest, info: InfraErrorInfo) -> RolloutResult:
        return RolloutResult(
            id=request.task.id,
            rollout_id=request.rollout_id,
            phase="infra",
            fail_reason=f"infra-{info.kind.value}: {info.message}",
            infra_error=info,
        )
