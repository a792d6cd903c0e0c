"""Domain ↔ protobuf conversion: with its skill part (:mod:`sandbox.api.convert_skill`), the
only place that sees both ``skillopt.types`` and the generated messages. JSON-typed proto fields are decoded here, with errors that say which field
is malformed."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sandbox.api.blobs import (
    can_elide,
    elide,
    restore,
    sha256_hex,
)
from sandbox.api.convert_skill import skill_from_proto, skill_to_proto
from sandbox.api.v1 import sandbox_pb2 as pb
from skillopt.envs.base import ProgressEvent
from skillopt.errors import InvalidRequest
from skillopt.types import (
    CaseResult,
    ExecRecord,
    File,
    Grading,
    HostDescription,
    InfraErrorKind,
    InfraFailure,
    Limits,
    Message,
    ModelSpec,
    RolloutRequest,
    RolloutResult,
    Task,
    TestCase,
    Trace,
    Usage,
    WorkOutcome,
)

if TYPE_CHECKING:
    from sandbox.service.blobs import BlobResolver

__all__ = [
    "description_to_proto",
    "event_to_proto",
    "outcome_from_proto",
    "outcome_to_proto",
    "request_from_proto",
    "request_to_proto",
    "result_from_proto",
    "result_to_proto",
    "skill_from_proto",
    "skill_to_proto",
]


_KIND_TO_PROTO = {
    InfraErrorKind.OOM_KILLED: pb.InfraError.OOM_KILLED,
    InfraErrorKind.TIMEOUT: pb.InfraError.TIMEOUT,
    InfraErrorKind.CONTAINER_START_FAILED: pb.InfraError.CONTAINER_START_FAILED,
    InfraErrorKind.SANDBOX_UNAVAILABLE: pb.InfraError.SANDBOX_UNAVAILABLE,
    InfraErrorKind.IMAGE_MISSING: pb.InfraError.IMAGE_MISSING,
    InfraErrorKind.GATEWAY_ERROR: pb.InfraError.GATEWAY_ERROR,
    InfraErrorKind.MODEL_UNAVAILABLE: pb.InfraError.MODEL_UNAVAILABLE,
    InfraErrorKind.CANCELLED: pb.InfraError.CANCELLED,
    InfraErrorKind.INTERNAL: pb.InfraError.INTERNAL,
    InfraErrorKind.REPLAY_MISS: pb.InfraError.REPLAY_MISS,
    InfraErrorKind.MODEL_AUTH: pb.InfraError.MODEL_AUTH,
    InfraErrorKind.MODEL_RATE_LIMITED: pb.InfraError.MODEL_RATE_LIMITED,
    InfraErrorKind.MODEL_BAD_REQUEST: pb.InfraError.MODEL_BAD_REQUEST,
}
_KIND_FROM_PROTO = {v: k for k, v in _KIND_TO_PROTO.items()}
_OUTCOME_TO_PROTO = {
    WorkOutcome.NOT_STARTED: pb.WORK_OUTCOME_NOT_STARTED,
    WorkOutcome.LOST: pb.WORK_OUTCOME_LOST,
    WorkOutcome.FINAL: pb.WORK_OUTCOME_FINAL,
}
_OUTCOME_FROM_PROTO: dict[int, WorkOutcome] = {v: k for k, v in _OUTCOME_TO_PROTO.items()}


def outcome_to_proto(outcome: WorkOutcome) -> pb.WorkOutcome:
    """The wire form of ``outcome`` (sent beside ``retryable``, which older clients read)."""
    return _OUTCOME_TO_PROTO[outcome]


def outcome_from_proto(
    value: int, *, retryable: bool, default: WorkOutcome = WorkOutcome.LOST
) -> WorkOutcome:
    """The outcome a peer sent. One that predates outcomes sends only ``retryable``: then
    ``default`` (what its error or row otherwise means) when true, ``FINAL`` when false."""
    return _OUTCOME_FROM_PROTO.get(value) or (default if retryable else WorkOutcome.FINAL)


def _json_obj(text: str, field: str) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidRequest(f"{field} is not valid JSON: {str(exc)[:200]}") from exc
    except RecursionError as exc:  # deeply nested input: refuse it, do not crash on it
        raise InvalidRequest(f"{field} is nested too deeply") from exc
    if not isinstance(value, dict):
        raise InvalidRequest(f"{field} must be a JSON object")
    return value


def _dump(obj: Mapping[str, Any]) -> str:
    return json.dumps(dict(obj), sort_keys=True, default=str) if obj else ""


def _cases_from(cases, blobs: BlobResolver | None, side: str) -> tuple[TestCase, ...]:
    def content(f, case: str) -> bytes:
        if not f.sha256:
            return f.content
        if blobs is None:
            raise InvalidRequest(
                f"{side} file {case}/{f.name}: content-addressed files are not accepted here"
            )
        return blobs.file(f.sha256, f.content, f"{side} file {case}/{f.name}")

    return tuple(
        TestCase(name=c.name, files=tuple(File(name=f.name, content=content(f, c.name)) for f in c.files))
        for c in cases
    )


def _cases_to(cases: tuple[TestCase, ...]) -> list[pb.TestCase]:
    return [
        pb.TestCase(name=c.name, files=[pb.File(name=f.name, content=f.content) for f in c.files])
        for c in cases
    ]


# -- requests ---------------------------------------------------------------------------------


def request_from_proto(msg: pb.RunRequest, blobs: BlobResolver | None = None) -> RolloutRequest:
    """The domain request of ``msg``; content-addressed files and skill are resolved through
    ``blobs`` (the host's cache for the caller's token; ``None``: none accepted).

    Raises:
        InvalidRequest: malformed JSON fields, a missing task, a hash that does not match.
        BlobsMissing: named files the host does not keep (all of them listed).
    """
    if not msg.HasField("task"):
        raise InvalidRequest("request has no task")
    skill = skill_from_proto(msg.skill, blobs)
    model = msg.model
    request = RolloutRequest(
        rollout_id=msg.rollout_id,
        env=msg.env,
        agent=msg.agent,
        task=Task(
            id=msg.task.id,
            instruction=msg.task.instruction,
            attributes=_json_obj(msg.task.attributes_json, "task.attributes_json"),
            cases=_cases_from(msg.task.cases, blobs, "task"),
        ),
        grading=Grading(
            attributes=_json_obj(msg.grading.attributes_json, "grading.attributes_json"),
            cases=_cases_from(msg.grading.cases, blobs, "grading"),
        ),
        skill=skill,
        model=ModelSpec(
            provider=model.provider,
            model=model.model,
            temperature=model.temperature if model.HasField("temperature") else None,
            max_output_tokens=model.max_output_tokens if model.HasField("max_output_tokens") else None,
            reasoning_effort=model.reasoning_effort or None,
            extra=_json_obj(model.extra_json, "model.extra_json"),
            prompt_caching=not model.no_prompt_caching,
        ),
        limits=Limits(
            wall_time_s=msg.limits.wall_time_s or None,
            max_turns=msg.limits.max_turns or None,
            exec_timeout_s=msg.limits.exec_timeout_s or None,
            memory_bytes=msg.limits.memory_bytes or None,
            cpus=msg.limits.cpus or None,
            output_bytes=msg.limits.output_bytes or None,
            max_model_tokens=msg.limits.max_model_tokens or None,
        ),
        use_eval_feedback=msg.use_eval_feedback,
        diagnostic_instruction=msg.diagnostic_instruction,
        model_cache=msg.model_cache,
        seed=msg.seed,
        isolation=msg.isolation,
    )
    if blobs is not None:
        blobs.check()
    return request


def request_to_proto(
    req: RolloutRequest,
    *,
    skill_sha256: str = "",
    skill_inline: bool = True,
    skill: pb.Skill | None = None,
) -> pb.RunRequest:
    """The proto of ``req``. ``skill_sha256``: the skill's hash when the caller knows it
    (:meth:`sandbox.api.blobs.ClientBlobs.skill`); ``skill_inline=False`` names the skill by that
    hash instead of sending its text. ``skill``: the skill's message as made already (a
    package, :func:`skill_to_proto`)."""
    m = req.model
    model = pb.ModelSpec(
        provider=m.provider,
        model=m.model,
        reasoning_effort=m.reasoning_effort or "",
        extra_json=_dump(m.extra),
        no_prompt_caching=not m.prompt_caching,
    )
    if m.temperature is not None:
        model.temperature = m.temperature
    if m.max_output_tokens is not None:
        model.max_output_tokens = m.max_output_tokens
    lim = req.limits
    return pb.RunRequest(
        rollout_id=req.rollout_id,
        env=req.env,
        agent=req.agent,
        task=pb.Task(
            id=req.task.id,
            instruction=req.task.instruction,
            attributes_json=_dump(req.task.attributes),
            cases=_cases_to(req.task.cases),
        ),
        grading=pb.Grading(attributes_json=_dump(req.grading.attributes), cases=_cases_to(req.grading.cases)),
        skill=skill
        if skill is not None
        else pb.Skill(
            name=req.skill.name,
            content=req.skill.content if skill_inline or not skill_sha256 else "",
            sha256=skill_sha256 or req.skill.sha256,
        ),
        model=model,
        limits=pb.Limits(
            wall_time_s=lim.wall_time_s or 0.0,
            max_turns=lim.max_turns or 0,
            exec_timeout_s=lim.exec_timeout_s or 0.0,
            memory_bytes=lim.memory_bytes or 0,
            cpus=lim.cpus or 0.0,
            output_bytes=lim.output_bytes or 0,
            max_model_tokens=lim.max_model_tokens or 0,
        ),
        use_eval_feedback=req.use_eval_feedback,
        diagnostic_instruction=req.diagnostic_instruction,
        model_cache=req.model_cache,
        seed=req.seed,
        isolation=req.isolation,
    )


# -- results ----------------------------------------------------------------------------------


def result_to_proto(r: RolloutResult, *, skill: str = "", skill_sha256: str = "") -> pb.RunResult:
    """The proto of ``r``. With the request's ``skill`` (and its ``skill_sha256``), the trace
    carries the skill's text as a marker (see ``Trace.elided_skill_sha256``)."""
    t = r.trace
    texts = (t.system_prompt, t.user_prompt, *(m.content for m in t.messages))
    shrink = bool(skill_sha256) and can_elide(texts, skill)

    def text(value: str) -> str:
        return elide(value, skill) if shrink else value

    msg = pb.RunResult(
        id=r.id,
        rollout_id=r.rollout_id,
        hard=r.hard,
        soft=r.soft,
        fail_reason=r.fail_reason,
        phase=r.phase,
        agent_ok=r.agent_ok,
        n_turns=r.n_turns,
        cases=[
            pb.CaseResult(name=c.name, ok=c.ok, stage=c.stage, reason=c.reason, report=c.report)
            for c in r.cases
        ],
        metrics_json=_dump(r.metrics),
        trace=pb.Trace(
            messages=[
                pb.Message(
                    role=m.role,
                    content=text(m.content),
                    name=m.name,
                    tool_call_id=m.tool_call_id,
                    tool_calls_json=json.dumps([dict(c) for c in m.tool_calls]) if m.tool_calls else "",
                )
                for m in t.messages
            ],
            executions=[_exec_to(e) for e in t.executions],
            system_prompt=text(t.system_prompt),
            user_prompt=text(t.user_prompt),
            code=t.code,
            notes=dict(t.notes),
            elided_skill_sha256=skill_sha256 if shrink else "",
        ),
        artifacts=[pb.File(name=a.name, content=a.content) for a in r.artifacts],
        usage=pb.Usage(
            calls=r.usage.calls,
            prompt_tokens=r.usage.prompt_tokens,
            completion_tokens=r.usage.completion_tokens,
            cached_input_tokens=r.usage.cached_input_tokens,
            cache_write_input_tokens=r.usage.cache_write_input_tokens,
        ),
        timings_s=dict(r.timings_s),
        host=r.host,
        image_digest=r.image_digest,
        container_runtime=r.container_runtime,
    )
    if r.infra_error is not None:
        msg.infra_error.CopyFrom(
            pb.InfraError(
                kind=_KIND_TO_PROTO[r.infra_error.kind],
                message=r.infra_error.message,
                retryable=r.infra_error.is_retryable,
                outcome=outcome_to_proto(r.infra_error.outcome),
            )
        )
    return msg


def _exec_to(e: ExecRecord) -> pb.ExecRecord:
    rec = pb.ExecRecord(
        turn=e.turn,
        case=e.case,
        code=e.code,
        stdout_tail=e.stdout_tail,
        stderr_tail=e.stderr_tail,
        duration_s=e.duration_s,
        timed_out=e.timed_out,
        oom_killed=e.oom_killed,
    )
    if e.exit_code is not None:
        rec.exit_code = e.exit_code
    return rec


def result_from_proto(msg: pb.RunResult, *, skill: str = "", skill_sha256: str = "") -> RolloutResult:
    """The domain result of ``msg``; ``skill`` (the request's, with its hash when known)
    expands an elided trace.

    Raises:
        InvalidRequest: the trace was elided for another skill than ``skill``.
    """
    t = msg.trace
    if t.elided_skill_sha256 and (skill_sha256 or sha256_hex(skill.encode("utf-8"))) != t.elided_skill_sha256:
        raise InvalidRequest("the result's trace names a skill other than the request's")

    def text(value: str) -> str:
        return restore(value, skill) if t.elided_skill_sha256 else value

    infra = None
    if msg.HasField("infra_error"):
        infra = InfraFailure(
            kind=_KIND_FROM_PROTO.get(msg.infra_error.kind, InfraErrorKind.INTERNAL),
            message=msg.infra_error.message,
            outcome=outcome_from_proto(msg.infra_error.outcome, retryable=msg.infra_error.retryable),
        )
    return RolloutResult(
        id=msg.id,
        rollout_id=msg.rollout_id,
        hard=msg.hard,
        soft=msg.soft,
        fail_reason=msg.fail_reason,
        phase=msg.phase,
        agent_ok=msg.agent_ok,
        n_turns=msg.n_turns,
        cases=tuple(
            CaseResult(name=c.name, ok=c.ok, stage=c.stage, reason=c.reason, report=c.report)
            for c in msg.cases
        ),
        metrics=json.loads(msg.metrics_json) if msg.metrics_json else {},
        trace=Trace(
            messages=tuple(
                Message(
                    role=m.role,
                    content=text(m.content),
                    name=m.name,
                    tool_call_id=m.tool_call_id,
                    tool_calls=tuple(json.loads(m.tool_calls_json)) if m.tool_calls_json else (),
                )
                for m in t.messages
            ),
            executions=tuple(
                ExecRecord(
                    turn=e.turn,
                    case=e.case,
                    code=e.code,
                    exit_code=e.exit_code if e.HasField("exit_code") else None,
                    stdout_tail=e.stdout_tail,
                    stderr_tail=e.stderr_tail,
                    duration_s=e.duration_s,
                    timed_out=e.timed_out,
                    oom_killed=e.oom_killed,
                )
                for e in t.executions
            ),
            system_prompt=text(t.system_prompt),
            user_prompt=text(t.user_prompt),
            code=t.code,
            notes=dict(t.notes),
        ),
        artifacts=tuple(File(name=a.name, content=a.content) for a in msg.artifacts),
        usage=Usage(
            calls=msg.usage.calls,
            prompt_tokens=msg.usage.prompt_tokens,
            completion_tokens=msg.usage.completion_tokens,
            cached_input_tokens=msg.usage.cached_input_tokens,
            cache_write_input_tokens=msg.usage.cache_write_input_tokens,
        ),
        timings_s=dict(msg.timings_s),
        host=msg.host,
        image_digest=msg.image_digest,
        infra_error=infra,
        container_runtime=msg.container_runtime,
    )


def event_to_proto(time_ns: int, event: ProgressEvent) -> pb.RunEvent:
    return pb.RunEvent(
        time_ns=time_ns, progress=pb.Progress(phase=event.phase, turn=event.turn, detail=event.detail)
    )


def description_to_proto(d: HostDescription) -> pb.DescribeResponse:
    return pb.DescribeResponse(
        host=d.host,
        version=d.version,
        capacity=d.capacity,
        free_slots=d.free_slots,
        running=d.running,
        draining=d.draining,
        agents=list(d.agents),
        image_digests=dict(d.image_digests),
        pool_idle=dict(d.pool_idle),
        container_runtime=d.container_runtime,
        providers=list(d.providers),
        runner_sha256=d.runner_sha256,
        agent_runtimes=dict(d.agent_runtimes),
        unavailable_agents=dict(d.unavailable_agents),
        available_runtimes=list(d.available_runtimes),
        engine_version=d.engine_version,
        service_build=d.service_build,
        image_labels=dict(d.image_labels),
        sessions=d.sessions,
        max_sessions=d.max_sessions,
        agent_image_digests=dict(d.agent_image_digests),
        skill_package_max_files=d.skill_package_max_files,
        skill_package_max_bytes=d.skill_package_max_bytes,
        languages=list(d.languages),
        http_port=d.http_port,
        reuse_max_executions=d.reuse_max_executions,
        reuse_max_age_s=d.reuse_max_age_s,
    )


def description_from_proto(m: pb.DescribeResponse) -> HostDescription:
    return HostDescription(
        host=m.host,
        version=m.version,
        capacity=m.capacity,
        free_slots=m.free_slots,
        running=m.running,
        draining=m.draining,
        agents=tuple(m.agents),
        image_digests=dict(m.image_digests),
        agent_image_digests=dict(m.agent_image_digests),
        pool_idle=dict(m.pool_idle),
        container_runtime=m.container_runtime,
        providers=tuple(m.providers),
        runner_sha256=m.runner_sha256,
        agent_runtimes=dict(m.agent_runtimes),
        unavailable_agents=dict(m.unavailable_agents),
        available_runtimes=tuple(m.available_runtimes),
        engine_version=m.engine_version,
        service_build=m.service_build,
        image_labels=dict(m.image_labels),
        sessions=m.sessions,
        max_sessions=m.max_sessions,
        skill_package_max_files=m.skill_package_max_files,
        skill_package_max_bytes=m.skill_package_max_bytes,
        languages=tuple(m.languages),
        http_port=m.http_port,
        reuse_max_executions=m.reuse_max_executions,
        reuse_max_age_s=m.reuse_max_age_s,
    )
