"""JSON forms of result rows and traces (``results.jsonl``, ``predictions/<id>/``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skillopt.types import (
    CaseResult,
    ExecRecord,
    InfraErrorKind,
    InfraFailure,
    Message,
    RolloutResult,
    Trace,
    Usage,
    WorkOutcome,
)

__all__ = ["row_from_json", "row_to_json", "trace_from_json", "trace_to_json"]


def row_to_json(row: RolloutResult, *, task_type: str = "") -> dict[str, Any]:
    """The ``results.jsonl`` line of a row: scores and provenance, no trace or file bytes."""
    out: dict[str, Any] = {
        "id": row.id,
        "rollout_id": row.rollout_id,
        "hard": row.hard,
        "soft": row.soft,
        "fail_reason": row.fail_reason,
        "phase": row.phase,
        "agent_ok": row.agent_ok,
        "n_turns": row.n_turns,
        "task_type": task_type or str(row.metrics.get("task_type", "")) or "other",
        "cases": [{"name": c.name, "ok": c.ok, "stage": c.stage, "reason": c.reason} for c in row.cases],
        "metrics": dict(row.metrics),
        "usage": row.usage.to_dict(),
        "timings_s": {k: round(v, 4) for k, v in row.timings_s.items()},
        "host": row.host,
        "image_digest": row.image_digest,
        "container_runtime": row.container_runtime,
        "infra_error": None,
    }
    if row.infra_error is not None:
        out["infra_error"] = {
            "kind": row.infra_error.kind.value,
            "message": row.infra_error.message,
            "retryable": row.infra_error.is_retryable,
            "outcome": row.infra_error.outcome.value,
        }
    return out


def row_from_json(
    obj: Mapping[str, Any], trace: Trace | None = None, reports: Mapping[str, str] | None = None
) -> RolloutResult:
    infra = obj.get("infra_error")
    usage = obj.get("usage") or {}
    reports = reports or {}
    return RolloutResult(
        id=str(obj["id"]),
        rollout_id=str(obj.get("rollout_id", "")),
        hard=float(obj.get("hard", 0.0)),
        soft=float(obj.get("soft", 0.0)),
        fail_reason=str(obj.get("fail_reason", "")),
        phase=str(obj.get("phase", "")),
        agent_ok=bool(obj.get("agent_ok", False)),
        n_turns=int(obj.get("n_turns", 0)),
        cases=tuple(
            CaseResult(
                name=c["name"],
                ok=bool(c["ok"]),
                stage=c.get("stage", ""),
                reason=c.get("reason", ""),
                report=reports.get(c["name"], ""),
            )
            for c in obj.get("cases", [])
        ),
        metrics=dict(obj.get("metrics") or {}),
        trace=trace or Trace(),
        usage=Usage.from_dict(usage),
        timings_s=dict(obj.get("timings_s") or {}),
        host=str(obj.get("host", "")),
        image_digest=str(obj.get("image_digest", "")),
        container_runtime=str(obj.get("container_runtime", "")),
        infra_error=None
        if not infra
        else InfraFailure(
            kind=InfraErrorKind(infra["kind"]),
            message=infra.get("message", ""),
            # Rows written before outcomes existed say only "retryable".
            outcome=WorkOutcome(infra["outcome"])
            if "outcome" in infra
            else WorkOutcome.of_retryable(infra.get("retryable")),
        ),
    )


def trace_to_json(trace: Trace, cases: tuple[CaseResult, ...] = ()) -> dict[str, Any]:
    return {
        "system_prompt": trace.system_prompt,
        "user_prompt": trace.user_prompt,
        "code": trace.code,
        "notes": dict(trace.notes),
        "messages": [
            {
                "role": m.role,
                "content": m.content,
                **({"name": m.name} if m.name else {}),
                **({"tool_call_id": m.tool_call_id} if m.tool_call_id else {}),
                **({"tool_calls": [dict(c) for c in m.tool_calls]} if m.tool_calls else {}),
            }
            for m in trace.messages
        ],
        "executions": [
            {
                "turn": e.turn,
                "case": e.case,
                "code": e.code,
                "exit_code": e.exit_code,
                "stdout_tail": e.stdout_tail,
                "stderr_tail": e.stderr_tail,
                "duration_s": e.duration_s,
                "timed_out": e.timed_out,
                "oom_killed": e.oom_killed,
            }
            for e in trace.executions
        ],
        "case_reports": {c.name: c.report for c in cases if c.report},
    }


def trace_from_json(obj: Mapping[str, Any]) -> tuple[Trace, dict[str, str]]:
    trace = Trace(
        system_prompt=obj.get("system_prompt", ""),
        user_prompt=obj.get("user_prompt", ""),
        code=obj.get("code", ""),
        notes=dict(obj.get("notes") or {}),
        messages=tuple(
            Message(
                role=m["role"],
                content=m.get("content", ""),
                name=m.get("name", ""),
                tool_call_id=m.get("tool_call_id", ""),
                tool_calls=tuple(m.get("tool_calls") or ()),
            )
            for m in obj.get("messages", [])
        ),
        executions=tuple(ExecRecord(**e) for e in obj.get("executions", [])),
    )
    return trace, dict(obj.get("case_reports") or {})
