"""The gateway's model calls as spans (``gateway.model_call``), children of their rollout's.

The rollout's context rides on its :class:`GatewaySession` (captured when the session opens,
on the rollout's thread), so a call an agent CLI makes from its container, which carries no
trace context of its own (only the session's token), still lands in the rollout's trace. A
call is recorded when it ends (a streamed answer ends in the relaying generator's ``finally``),
with the interval it took; a failed one with the typed error.

Attributes follow OpenTelemetry's GenAI conventions where they fit (``gen_ai.*``). Prompt and
completion text only with ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``
(:func:`skillopt.observability.tracing.capture_content`), clipped to 16 KiB each.
"""

from __future__ import annotations

import json
from typing import Any

from sandbox.gateway.cache import StoredResponse
from sandbox.gateway.session import GatewaySession
from skillopt.observability import tracing
from skillopt.types import Usage

__all__ = ["model_call_failed", "model_call_span"]

_MAX_CONTENT = 16 * 1024


def _attributes(session: GatewaySession, api: str) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.system": session.profile.kind,
        "gen_ai.request.model": session.model,
        "skillopt.rollout_id": session.rollout_id,
        "skillopt.gateway.provider": session.profile.name,
        "skillopt.gateway.api": api,
        "skillopt.gateway.cache_mode": session.cache_mode,
    }


def model_call_span(
    session: GatewaySession,
    api: str,
    t0: float,
    response: StoredResponse,
    usage: Usage,
    payload: Any,
    *,
    replayed: bool,
) -> None:
    """A model call that got an answer (the provider's error statuses included), from ``t0``
    (``time.monotonic()``) to now."""
    if not tracing.enabled():
        return
    status = response.status
    attrs = {
        **_attributes(session, api),
        "http.response.status_code": status,
        "skillopt.gateway.replayed": replayed,
        "gen_ai.usage.input_tokens": usage.prompt_tokens,
        "gen_ai.usage.output_tokens": usage.completion_tokens,
        "skillopt.gateway.cached_input_tokens": usage.cached_input_tokens,
    }
    if tracing.capture_content():
        attrs["gen_ai.input.messages"] = json.dumps(payload, ensure_ascii=False)[:_MAX_CONTENT]
        attrs["gen_ai.output.messages"] = response.body.decode("utf-8", "replace")[:_MAX_CONTENT]
    error = f"provider answered {status}" if status >= 400 else None
    tracing.record_span(
        "gateway.model_call",
        start=t0,
        parent=session.trace_parent,
        attributes=attrs,
        error=error,
        kind="client",
    )


def model_call_failed(session: GatewaySession, api: str, t0: float, error: BaseException) -> None:
    """A model call that got no answer (timeout, unreachable provider, replay miss): the
    error's type only (a provider's message may quote the request)."""
    if not tracing.enabled():
        return
    attrs = {**_attributes(session, api), "error.type": type(error).__name__}
    tracing.record_span(
        "gateway.model_call",
        start=t0,
        parent=session.trace_parent,
        attributes=attrs,
        error=error,
        kind="client",
    )
