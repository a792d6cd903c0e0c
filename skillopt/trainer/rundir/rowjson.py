"""JSON forms of result rows and traces: a ``results.jsonl`` (and ``infra_attempts.jsonl``)
line is a :class:`ResultRow`; ``predictions/<id>/trace.json`` is :func:`trace_to_json`'s."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, PlainSerializer

from skillopt.trainer.rundir.schema import Record, parse
from skillopt.trainer.versions import upgrade
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

__all__ = ["ROW_VERSION", "CaseRow", "InfraRow", "ResultRow", "trace_from_json", "trace_to_json"]

#: ``results.jsonl`` lines (``schema_version``). 1: versioned. 0 (no version): the same keys,
#: but rows from before outcomes say only ``infra_error.retryable`` (read as ``lost`` when
#: true, ``final`` when false), and the oldest lack ``container_runtime`` and the cache counts.
ROW_VERSION = 1


def _usage(value: Any) -> Usage:
    if isinstance(value, Usage):
        return value
    return Usage.from_dict(value or {})


#: :class:`Usage` in its JSON form (the cache counts only when not 0).
UsageField = Annotated[Usage, BeforeValidator(_usage), PlainSerializer(Usage.to_dict)]


class CaseRow(Record):
    """One graded case of a row (its report is in the trace, not the row)."""

    name: str
    ok: bool
    stage: str = ""
    reason: str = ""


class InfraRow(Record):
    """A row's infrastructure failure: what kind, and what happened to the work."""

    kind: InfraErrorKind
    message: str = ""
    #: Whether another attempt may succeed (kept for older readers; ``outcome`` says it).
    retryable: bool
    outcome: WorkOutcome

    @classmethod
    def of(cls, failure: InfraFailure) -> InfraRow:
        return cls(
            kind=failure.kind,
            message=failure.message,
            retryable=failure.is_retryable,
            outcome=failure.outcome,
        )


def _outcome_from_retryable(row: dict[str, Any]) -> dict[str, Any]:
    """Row version 0 → 1: an infrastructure failure stored before outcomes said only
    ``retryable``."""
    infra = row.get("infra_error")
    if isinstance(infra, Mapping) and "outcome" not in infra:
        outcome = WorkOutcome.of_retryable(infra.get("retryable"))
        row["infra_error"] = {
            **infra,
            "outcome": outcome.value,
            "retryable": outcome is not WorkOutcome.FINAL,
        }
    return row


class ResultRow(Record):
    """One ``results.jsonl`` line: a rollout's scores and provenance, no trace or file bytes
    (those are in ``predictions/<id>/``)."""

    id: str
    rollout_id: str = ""
    hard: float = 0.0
    soft: float = 0.0
    fail_reason: str = ""
    phase: str = ""
    agent_ok: bool = False
    n_turns: int = 0
    #: The item's category (the env's task type; ``other`` when it has none).
    task_type: str = ""
    cases: tuple[CaseRow, ...] = ()
    metrics: dict[str, Any] = Field(default_factory=dict)
    usage: UsageField = Field(default_factory=Usage)
    timings_s: dict[str, float] = Field(default_factory=dict)
    host: str = ""
    image_digest: str = ""
    container_runtime: str = ""
    infra_error: InfraRow | None = None
    schema_version: int = ROW_VERSION

    @classmethod
    def of(cls, row: RolloutResult, *, task_type: str = "") -> ResultRow:
        """The stored line of ``row`` (timings rounded to 0.1 ms)."""
        return cls(
            id=row.id,
            rollout_id=row.rollout_id,
            hard=row.hard,
            soft=row.soft,
            fail_reason=row.fail_reason,
            phase=row.phase,
            agent_ok=row.agent_ok,
            n_turns=row.n_turns,
            task_type=task_type or str(row.metrics.get("task_type", "")) or "other",
            cases=tuple(CaseRow(name=c.name, ok=c.ok, stage=c.stage, reason=c.reason) for c in row.cases),
            metrics=dict(row.metrics),
            usage=row.usage,
            timings_s={k: round(v, 4) for k, v in row.timings_s.items()},
            host=row.host,
            image_digest=row.image_digest,
            container_runtime=row.container_runtime,
            infra_error=InfraRow.of(row.infra_error) if row.infra_error is not None else None,
        )

    @classmethod
    def from_json(cls, data: Any) -> ResultRow:
        """Parse a stored line of any version.

        Raises:
            RecordError: not a row (no ``id``, a mistyped field) or written by a newer skillopt.
        """
        data = upgrade(data, key="schema_version", current=ROW_VERSION, steps={0: _outcome_from_retryable})
        if "id" in data and not isinstance(data["id"], str):
            data["id"] = str(data["id"])
        return parse(data, cls.model_validate, what="a result row")

    def result(self, trace: Trace | None = None, reports: Mapping[str, str] | None = None) -> RolloutResult:
        """The row as the trainer's :class:`RolloutResult` (with its trace and the cases'
        reports, when read from its prediction files)."""
        reports = reports or {}
        infra = self.infra_error
        return RolloutResult(
            id=self.id,
            rollout_id=self.rollout_id,
            hard=self.hard,
            soft=self.soft,
            fail_reason=self.fail_reason,
            phase=self.phase,
            agent_ok=self.agent_ok,
            n_turns=self.n_turns,
            cases=tuple(
                CaseResult(
                    name=c.name, ok=c.ok, stage=c.stage, reason=c.reason, report=reports.get(c.name, "")
                )
                for c in self.cases
            ),
            metrics=dict(self.metrics),
            trace=trace or Trace(),
            usage=self.usage,
            timings_s=dict(self.timings_s),
            host=self.host,
            image_digest=self.image_digest,
            container_runtime=self.container_runtime,
            infra_error=None
            if infra is None
            else InfraFailure(kind=infra.kind, message=infra.message, outcome=infra.outcome),
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
