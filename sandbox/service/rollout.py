"""RolloutService: one rollout from request to graded result, on the trusted side.

Takes domain objects (never protobuf): validate → lease a warm container → place the skill
package → let the env's agent work through the sandbox and the model → grade outside the
container → build the result. Infrastructure failures become a typed ``infra_error`` row; nothing here
turns them into a score.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

import structlog

from sandbox.gateway.core import Gateway, GatewayChatModel
from sandbox.gateway.session import GatewaySession
from sandbox.runtime.base import SandboxRuntime
from sandbox.runtime.lease import LeasedSandbox
from sandbox.runtime.pool import PoolManager
from sandbox.runtime.spec import EXEC_SKILLS_ROOTS, ContainerSpec, exec_runtime_choice, net_sibling_of
from sandbox.service.config import DEFAULT_LIMITS, ServiceConfig
from sandbox.service.isolation import check_rollout_isolation
from sandbox.service.validation import (
    CheckedPackages,
    check_model_provider,
    check_skill,
    effective_limits,
    validate_request,
)
from skillopt.envs.base import AgentContext, Environment, GatewayAccess, ProgressEvent
from skillopt.envs.registry import available_envs, get_env
from skillopt.errors import (
    DeadlineExceeded,
    InfraError,
    InvalidRequest,
    ModelError,
    RolloutTimeout,
    failure_of,
)
from skillopt.files import shorten
from skillopt.grader_pool import GraderPool
from skillopt.models.base import ChatModel
from skillopt.models.profiles import ProviderProfile, build_model
from skillopt.observability import tracing
from skillopt.types import InfraErrorKind, InfraFailure, Limits, RolloutRequest, RolloutResult, SkillVersion
from skillopt.units import MiB

__all__ = ["RolloutService"]

log = structlog.get_logger("skillopt.sandbox.service")


@dataclass(kw_only=True)
class _Rollout:
    """One rollout while it runs here: what the parts of :meth:`RolloutService._run` share."""

    request: RolloutRequest
    env: Environment
    limits: Limits
    exec_agent: bool
    spec: ContainerSpec  # of its own container
    t_start: float
    #: ``time.monotonic()`` when its wall time (or the caller's deadline, less 1 s) runs out.
    deadline: float
    #: The caller's deadline, not the wall time, bounds it.
    deadline_bound: bool
    emit: Callable[[ProgressEvent], None]
    cancel: threading.Event
    timings: dict[str, float] = field(default_factory=dict)
    sandbox: LeasedSandbox | None = None
    session: GatewaySession | None = None
    #: Every container it holds (its own, its fresh grading ones): cancelling kills them all.
    live: list[LeasedSandbox] = field(default_factory=list)
    #: The grading container announced to the pool ahead and not taken yet.
    expected: ContainerSpec | None = None
    #: The tree hash its skill package was verified against on the wire ("" = none known).
    skill_tree: str = ""
    #: Who asked (a hash of the caller's token): its containers are reused for it alone.
    tenant: str = ""


def _logged_failure(exc: BaseException) -> InfraFailure:
    """The typed row failure of ``exc`` (:func:`~skillopt.errors.failure_of`), logged."""
    info = failure_of(exc)
    if isinstance(exc, InfraError):
        log.warning("rollout.infra_error", kind=exc.kind.value, error=exc.message)
    elif isinstance(exc, ModelError):  # the SDK already retried: not the skill's fault
        log.warning("rollout.model_error", kind=exc.kind.value, error=exc.message)
    elif not isinstance(exc, InvalidRequest):  # a bug
        log.error("rollout.crashed", exc_info=exc)
    return info


class RolloutService:
    """Runs rollouts on this host. Thread-safe; one instance per service process."""

    def __init__(
        self,
        config: ServiceConfig,
        runtime: SandboxRuntime,
        pools: PoolManager,
        providers: dict[str, ProviderProfile],
        *,
        gateway: Gateway | None = None,
        gateway_url: str | None = None,
        exec_network: str = "none",
        exec_unavailable: str = "",
        grader: GraderPool | None = None,
    ) -> None:
        self.config = config
        self.runtime = runtime
        self.pools = pools
        self.providers = providers
        self._models: dict[str, ChatModel] = {}
        self._models_lock = threading.Lock()
        self._packages = CheckedPackages(config.package_limits)
        self.gateway = gateway or Gateway(providers)
        #: The gateway's URL as exec-agent containers see it; None: exec agents unavailable.
        self.gateway_url = gateway_url
        self.exec_unavailable = exec_unavailable
        #: Grading off the rollout threads (None: in them).
        self.grader = grader
        base_runtime = config.base_spec.runtime
        runtime.check_runtime(base_runtime)
        sibling = net_sibling_of(base_runtime, runtime.available_runtimes())
        self.exec_runtime, self.exec_runtime_refusal = exec_runtime_choice(
            base_runtime,
            has_network=runtime.runtime_has_network(base_runtime),
            required=config.require_runtime,
            net_sibling=sibling if sibling and runtime.runtime_has_network(sibling) else "",
        )
        self.exec_spec = replace(
            config.base_spec,
            network_mode=exec_network,
            skills_roots=EXEC_SKILLS_ROOTS,
            memory_bytes=max(config.base_spec.memory_bytes, 2048 * MiB),
            pids_limit=max(config.base_spec.pids_limit, 512),
            runtime=self.exec_runtime,
        )

    # -- validation --------------------------------------------------------------------------

    def validate(self, request: RolloutRequest, *, skill_tree: str = "") -> None:
        """Refuse bad input before any resource is used.

        Args:
            skill_tree: the tree hash the request's skill package was verified against on the
                wire (``convert`` checked it): a version checked once is not parsed again.

        Raises:
            InvalidRequest: with a message naming the offending field (echoes are shortened).
            SkillPackageRefused: the skill is a package that breaks a rule (file and rule named).
        """
        validate_request(request, self.config, envs=available_envs())
        self.check_package(request.skill, skill_tree=skill_tree)
        env = get_env(request.env)
        if request.agent not in env.agents:
            raise InvalidRequest(
                f"env {request.env!r} has no agent {shorten(request.agent)}; available: {', '.join(env.agents)}"
            )
        refusal = self.agent_refusal(request.env, request.agent)
        if refusal:
            raise InvalidRequest(refusal)
        check_model_provider(request, env, self.providers, host_id=self.config.host_id)
        env.validate(request)
        check_rollout_isolation(request, runtime=self.runtime, config=self.config, exec_spec=self.exec_spec)

    def check_skill(self, skill: SkillVersion, *, skill_tree: str = "") -> None:
        """Refuse a skill (a session's) this host would refuse in a rollout: SKILL.md too
        large, a name that is not one folder name, a package that breaks a rule.

        Raises:
            InvalidRequest, SkillPackageRefused: as :meth:`validate`.
        """
        check_skill(skill, self.config)
        self.check_package(skill, skill_tree=skill_tree)

    def check_package(self, skill: SkillVersion, *, skill_tree: str = "") -> None:
        """Refuse a skill package that breaks a rule under this host's limits (see
        :class:`~sandbox.service.validation.CheckedPackages`).

        Raises:
            SkillPackageRefused: every problem, each naming its file and rule.
        """
        self._packages.check(skill, skill_tree=skill_tree)

    def agent_refusal(self, env_name: str, agent: str) -> str:
        """Why this host cannot run ``agent`` of ``env_name`` ("" when it can)."""
        env = get_env(env_name)
        if env.container(agent) != "gateway":
            return ""
        if self.gateway_url is None:
            return (
                f"agent {agent!r} needs the model gateway network, unavailable on host "
                f"{self.config.host_id}: {self.exec_unavailable or 'not enabled'}"
            )
        if self.exec_runtime_refusal:
            return f"host {self.config.host_id}: agent {agent!r} {self.exec_runtime_refusal}"
        return ""

    def agent_spec(self, env: Environment, agent: str) -> ContainerSpec:
        """The container spec of an in-service (``isolated``) agent: the host's base spec, with
        the image (and runner preimports) the env declares for the agent when it has its own.
        Pools are keyed by spec, so such an agent gets its own warm pool."""
        image, preimport = env.container_image(agent)
        if not image:
            return self.config.base_spec
        return replace(
            self.config.base_spec, image=image, preimport=tuple(preimport) or self.config.base_spec.preimport
        )

    def effective_limits(self, limits: Limits) -> Limits:
        """Defaults filled in, every value clamped to this host's maximum."""
        return effective_limits(limits, default=self.config.default_limits, maximum=self.config.max_limits)

    def check_deadline(self, remaining_s: float | None) -> None:
        """Refuse a rollout whose caller left it too little time to do anything.

        Raises:
            DeadlineExceeded: fewer than ``min_deadline_s`` seconds remain.
        """
        if remaining_s is not None and remaining_s < self.config.min_deadline_s:
            raise DeadlineExceeded(
                f"the caller's deadline leaves {max(0.0, remaining_s):.2f}s; a rollout needs at least "
                f"{self.config.min_deadline_s:g}s"
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
        skill_tree: str = "",
        tenant: str = "",
    ) -> RolloutResult:
        """Run a validated request to a result. Never raises for infrastructure failures:
        those come back as a result with ``infra_error`` set.

        Args:
            emit: progress callback.
            cancel: set by another thread to cancel (the container is killed as well).
            deadline_s: the caller's remaining time (gRPC deadline); bounds the wall time.
            set_killer: receives a callable that kills this rollout's container.
            skill_tree: the tree hash the skill package was verified against on the wire: the
                runtime places a version it placed before by reference (hard links).
            tenant: the caller's tenant id: the rollout's containers are recycled for it alone
                (``docs/recycling.md``); "" = never reused.
        """
        with structlog.contextvars.bound_contextvars(
            rollout_id=request.rollout_id, host=self.config.host_id, env=request.env, agent=request.agent
        ):
            return self._run(
                request,
                emit=emit,
                cancel=cancel,
                deadline_s=deadline_s,
                set_killer=set_killer,
                skill_tree=skill_tree,
                tenant=tenant,
            )

    def _run(
        self, request: RolloutRequest, *, emit, cancel, deadline_s, set_killer, skill_tree: str, tenant: str
    ) -> RolloutResult:
        ro = self._plan(request, emit=emit, cancel=cancel, deadline_s=deadline_s)
        ro.skill_tree, ro.tenant = skill_tree, tenant
        if set_killer is not None:

            def kill_all() -> None:
                for box in list(ro.live):
                    box.kill()

            set_killer(kill_all)
        try:
            emit(ProgressEvent(phase="accepted", detail=f"host {self.config.host_id}"))
            result = self._work(ro)
        except Exception as exc:  # whatever it was, the row says so, typed; the service lives on
            result = RolloutResult.of_infra(request, _logged_failure(exc))
        finally:
            self._release(ro)
        return self._finish(ro, result)

    def _plan(self, request: RolloutRequest, *, emit, cancel, deadline_s: float | None) -> _Rollout:
        """The rollout's limits, deadline and container spec (nothing is acquired yet)."""
        t_start = time.monotonic()
        limits = self.effective_limits(request.limits)
        wall = float(limits.wall_time_s or DEFAULT_LIMITS.wall_time_s or 0.0)  # filled in: never 0
        deadline_bound = deadline_s is not None and deadline_s - 1.0 < wall
        if deadline_s is not None:
            wall = min(wall, max(0.0, deadline_s - 1.0))  # leave time to send the result
        env = get_env(request.env)
        exec_agent = env.container(request.agent) == "gateway"
        base = self.exec_spec if exec_agent else self.agent_spec(env, request.agent)
        memory = limits.memory_bytes
        if exec_agent and memory is not None:
            memory = max(memory, base.memory_bytes)  # an agent CLI needs its room (~200 MB each)
        return _Rollout(
            request=request,
            env=env,
            limits=limits,
            exec_agent=exec_agent,
            spec=base.with_limits(memory_bytes=memory, cpus=limits.cpus),
            t_start=t_start,
            deadline=t_start + wall,
            deadline_bound=deadline_bound,
            emit=emit,
            cancel=cancel,
        )

    def _work(self, ro: _Rollout) -> RolloutResult:
        """Lease the container, open the model, let the env's agent work and grade."""
        request = ro.request
        # Agents that run no code (env declares sandbox "none", e.g. the QA agents) get no
        # container: the model is called from here and nothing untrusted executes.
        if ro.env.container(request.agent) != "none":
            self._acquire(ro)
        model, access = self._open_model(ro)
        ctx = AgentContext(
            request=request,
            sandbox=ro.sandbox,
            model=model,
            limits=ro.limits,
            emit=ro.emit,
            deadline=ro.deadline,
            gateway=access,
            grading_sandbox=self._grading_factory(ro),
            grader=self.grader.call if self.grader is not None else None,
        )
        result = ro.env.run(request.agent, ctx)
        if ro.session is not None:
            result = ro.session.attach_to(result, full=ro.exec_agent)
        return result

    def _acquire(self, ro: _Rollout) -> None:
        """Lease the rollout's container and place its skill package.

        Raises:
            DeadlineExceeded: the caller's deadline expired before a container was ready.
            RolloutTimeout, ContainerStartFailed, ImageMissing, Cancelled: from the pool.
        """
        t0 = time.monotonic()
        wait = min(self.config.acquire_timeout_s, max(0.1, ro.deadline - t0))
        try:
            with tracing.span("sandbox.container.acquire", {"container.image.name": ro.spec.image}) as span:
                handle = self.pools.acquire(ro.spec, timeout_s=wait, cancel=ro.cancel, tenant=ro.tenant)
                span.set_attribute("skillopt.container.executions", handle.executions)  # 1: a fresh one
        except RolloutTimeout as exc:
            if ro.deadline_bound and wait < self.config.acquire_timeout_s:
                raise DeadlineExceeded(
                    f"the caller's deadline expired before a container was ready ({exc.message})"
                ) from exc
            raise
        ro.timings["acquire"] = time.monotonic() - t0
        try:
            ro.sandbox = self._lease(ro, handle, ro.request.rollout_id)
        except BaseException:
            self.pools.release(handle)  # not leased: _release would not know it
            raise
        # The package as mounted: SKILL.md as the env renders it for this agent (front matter
        # for the CLIs), every other file as sent.
        request = ro.request
        skill = replace(request.skill, content=ro.env.skill_file(request.agent, request.skill.content))
        # The version placed: the files (the tree hash) with SKILL.md as mounted.
        version = ""
        if ro.skill_tree and skill.files:
            version = f"{ro.skill_tree[:32]}-{hashlib.sha256(skill.content.encode('utf-8')).hexdigest()[:32]}"
        ro.sandbox.place_skill(skill, version=version)  # while the agent's first model call runs
        reused = f", execution {handle.executions}" if handle.executions > 1 else ""
        detail = f"container {handle.name} in {ro.timings['acquire'] * 1000:.1f} ms{reused}"
        ro.emit(ProgressEvent(phase="sandbox_ready", detail=detail))

    def _lease(self, ro: _Rollout, handle, holder: str) -> LeasedSandbox:
        """``handle`` leased to ``holder`` for the rollout: killed with it when it is cancelled."""
        box = LeasedSandbox(
            self.runtime,
            handle,
            rollout_id=holder,
            output_limit_bytes=int(ro.limits.output_bytes or DEFAULT_LIMITS.output_bytes or 0),
            deadline=ro.deadline,
            cancel=ro.cancel,
        )
        ro.live.append(box)
        if ro.cancel.is_set():
            box.kill()
        return box

    def _open_model(self, ro: _Rollout) -> tuple[ChatModel | None, GatewayAccess | None]:
        """The rollout's gateway session: the model in-service agents call, and for exec agents
        the gateway's address and the session's token (None, None: the env calls no model)."""
        if not ro.env.needs_model:
            return None, None
        request = ro.request
        session = ro.session = self.gateway.open_session(
            request.rollout_id,
            provider=request.model.provider,
            model=request.model.model,
            budget_tokens=ro.limits.max_model_tokens,
            cache_mode=request.model_cache,
            seed=request.seed,
        )
        model = GatewayChatModel(self.gateway, session, self.model_for(request.model.provider))
        if not ro.exec_agent:
            return model, None
        assert self.gateway_url is not None
        return model, GatewayAccess(
            base_url=self.gateway_url,
            token=session.token,
            model=request.model.model,
            api="anthropic" if session.profile.kind == "anthropic" else "openai",
            provider_error=session.provider_error,
        )

    def _release(self, ro: _Rollout) -> None:
        """Close the rollout's gateway session and give its container back (reset for the
        tenant's next rollout, or destroyed: the pool's policy)."""
        if ro.session is not None:
            self.gateway.close_session(ro.session)
        if ro.sandbox is not None:
            try:
                ro.sandbox.settle()  # its folders go with it: never while the package is placed
            except Exception as exc:  # nothing used the package (the agent ended first)
                log.warning("rollout.skill_unplaced", error=str(exc)[:300])
            ro.timings["skill"] = ro.sandbox.place_s
            self.pools.release(ro.sandbox.handle)
        if ro.expected is not None:  # it ended before its grading: withdraw the announcement
            self.pools.expect(ro.expected, -1)

    def _finish(self, ro: _Rollout, result: RolloutResult) -> RolloutResult:
        """The row as it leaves the host: cancellation said as such, timings, provenance."""
        request, handle = ro.request, ro.sandbox.handle if ro.sandbox is not None else None
        if ro.cancel.is_set() and (
            result.infra_error is None or result.infra_error.kind != InfraErrorKind.CANCELLED
        ):
            result = RolloutResult.of_infra(
                request, InfraFailure(kind=InfraErrorKind.CANCELLED, message="rollout cancelled")
            )
        timings = {**dict(result.timings_s), **ro.timings, "total": time.monotonic() - ro.t_start}
        done = result.fail_reason or ("infra: " + result.infra_error.message if result.infra_error else "ok")
        ro.emit(ProgressEvent(phase="done", detail=done))
        return replace(
            result,
            rollout_id=request.rollout_id,
            id=result.id or request.task.id,
            timings_s=timings,
            host=self.config.host_id,
            image_digest=handle.image_digest if handle is not None else self._digest_or_empty(ro.spec.image),
            container_runtime=self.runtime.runtime_name(handle.spec) if handle is not None else "",
        )

    def grading_spec(self, env: Environment, agent: str, limits: Limits) -> ContainerSpec:
        """The spec of a rollout's fresh grading containers: the agent's own image when it has
        one (a game engine), else the host's runtime image; never a network (not even the exec
        agents' gateway one)."""
        base = self.config.base_spec if env.container(agent) == "gateway" else self.agent_spec(env, agent)
        return replace(base, network_mode="none").with_limits(
            memory_bytes=limits.memory_bytes, cpus=limits.cpus
        )

    def _grading_factory(self, ro: _Rollout):
        """``ctx.grading_sandbox``: leases a container of :meth:`grading_spec` in a clean
        state (fresh, or reset and verified for this tenant), used for one grading run and
        released afterwards.

        An agent with its own image grades in a fresh container of it when its episode ends
        (TextWorld's trusted replay): a second container of the pool's spec per rollout, which
        a warm target sized for one per rollout does not cover. The pool is told when the
        episode begins, so it makes that one while the game is played."""
        request, spec = ro.request, self.grading_spec(ro.env, ro.request.agent, ro.limits)
        if spec.image != self.config.base_spec.image:
            self.pools.expect(spec)
            ro.expected = spec

        @contextlib.contextmanager
        def fresh() -> Iterator[LeasedSandbox]:
            wait = min(self.config.acquire_timeout_s, max(0.1, ro.deadline - time.monotonic()))
            announced, ro.expected = ro.expected is not None, None
            handle = self.pools.acquire(
                spec, timeout_s=wait, cancel=ro.cancel, expected=announced, tenant=ro.tenant
            )
            try:
                box = self._lease(ro, handle, f"{request.rollout_id}#grading")
                try:
                    yield box
                finally:
                    ro.live.remove(box)
            finally:
                self.pools.release(handle)

        return fresh

    def _digest_or_empty(self, image: str) -> str:
        try:
            return self.runtime.image_digest(image)
        except InfraError:
            return ""
