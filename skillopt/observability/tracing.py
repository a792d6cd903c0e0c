"""OpenTelemetry traces of the rollout path, off unless the standard ``OTEL_*`` variables ask.

One process, one tracer: the controller (``service.name`` ``skillopt-controller``) and each
sandbox host (``skillopt-host``, its host id in ``skillopt.host.id``) call :func:`configure`
once at start. Tracing is **on** when the environment names where spans go:

* ``OTEL_TRACES_EXPORTER`` = ``otlp`` and/or ``console`` (comma-separated), or
* ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_ENDPOINT`` set (OTLP implied);

and **off** otherwise, or with ``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none``
(unlike the SDK's own auto-configuration, where ``otlp`` is the default: a process nobody asked
to trace pays nothing). The exporter, batch processor, sampler and resource read every other
standard variable themselves (endpoint, headers, ``OTEL_BSP_*``, ``OTEL_TRACES_SAMPLER``,
``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_SERVICE_NAME``). OTLP goes over HTTP/protobuf
(``skillopt[tracing]``); ``OTEL_EXPORTER_OTLP_PROTOCOL=grpc`` needs
``opentelemetry-exporter-otlp-proto-grpc`` as well.

Off, nothing of the SDK is imported: :func:`span` returns one shared no-op context manager and
:func:`record_span`, :func:`current` and :func:`in_context` return at once, so the hot paths
pay a function call and a ``None`` check. Prompt and completion text goes into spans only
with ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` (the variable OpenTelemetry's
own GenAI instrumentations read): :func:`capture_content`.

Usage::

    with tracing.span("sandbox.exec", {"skillopt.exec.kind": "python"}) as sp:
        outcome = run()
        sp.set_attribute("process.exit.code", outcome.exit_code)
    tracing.record_span("sandbox.grade", start=t0)          # t0 = time.monotonic() at its start
    pool.submit(tracing.in_context(work), arg)                # the caller's span follows the work
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import Any, TypeVar

from skillopt.errors import ConfigError
from skillopt.types import RolloutRequest, RolloutResult

__all__ = [
    "CONTENT_VARIABLE",
    "NOOP_SPAN",
    "attach",
    "capture_content",
    "configure",
    "context_of",
    "current",
    "detach",
    "enabled",
    "end_span",
    "extract",
    "in_context",
    "inject",
    "install",
    "record_span",
    "recording",
    "requested_exporters",
    "result_attributes",
    "rollout_attributes",
    "span",
    "start_span",
    "uninstall",
]

F = TypeVar("F", bound=Callable[..., Any])

#: The opt-in for prompt and completion text in span attributes.
CONTENT_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_EXPORTERS = ("otlp", "console")

#: The SDK tracer while tracing is on (``None``: off).
_tracer: Any = None
_provider: Any = None
_content = False


class _NoopSpan:
    """What :func:`span` yields while tracing is off: every method a no-op."""

    def set_attribute(self, key: str, value: Any) -> None:
        pass

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        pass

    def is_recording(self) -> bool:
        return False


NOOP_SPAN = _NoopSpan()
# nullcontext is reusable and reentrant: one instance serves every disabled span.
_NULL = contextlib.nullcontext(NOOP_SPAN)


def enabled() -> bool:
    """Whether this process traces."""
    return _tracer is not None


def capture_content() -> bool:
    """Whether prompt and completion text may go into span attributes (the opt-in variable
    was true when tracing was configured)."""
    return _content


def requested_exporters(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The span exporters the environment asks for (empty: tracing off).

    Raises:
        ConfigError: an exporter this build does not offer (named with those it does).
    """
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return ()
    names = [n.strip().lower() for n in env.get("OTEL_TRACES_EXPORTER", "").split(",") if n.strip()]
    if not names:
        endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        return ("otlp",) if endpoint else ()
    unknown = [n for n in names if n not in (*_EXPORTERS, "none")]
    if unknown:
        raise ConfigError(
            f"OTEL_TRACES_EXPORTER={env['OTEL_TRACES_EXPORTER']!r}: skillopt exports traces with "
            f"{' or '.join(_EXPORTERS)} (or none), not {', '.join(unknown)}"
        )
    return tuple(dict.fromkeys(n for n in names if n != "none"))


def configure(
    service_name: str,
    *,
    attributes: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> bool:
    """Turn tracing on for this process when the environment asks for it (see the module's
    doc); returns whether it is on. The first call that turns it on wins (one provider per
    process); it is flushed when the process exits.

    Args:
        service_name: ``service.name`` unless ``OTEL_SERVICE_NAME`` says otherwise.
        attributes: more resource attributes (the host id).

    Raises:
        ConfigError: tracing is asked for but the SDK or the exporter asked for is not
            installed, or the exporter or protocol is not one we offer.
    """
    env = os.environ if environ is None else environ
    exporters = requested_exporters(env)
    if not exporters or _tracer is not None:
        return _tracer is not None
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise ConfigError(
            "tracing is asked for (OTEL_TRACES_EXPORTER / OTEL_EXPORTER_OTLP_ENDPOINT) but the "
            f"OpenTelemetry SDK is not installed ({exc.name}): pip install 'skillopt[tracing]', or unset them"
        ) from exc
    from skillopt import __version__

    resource = Resource.create(
        {
            SERVICE_NAME: env.get("OTEL_SERVICE_NAME") or service_name,
            SERVICE_VERSION: __version__,
            **(attributes or {}),
        }
    )
    provider = TracerProvider(resource=resource)
    for name in exporters:
        provider.add_span_processor(BatchSpanProcessor(_exporter(name, env)))
    install(provider, content=env.get(CONTENT_VARIABLE, "").strip().lower() == "true")
    trace.set_tracer_provider(provider)  # for any other instrumentation the user adds
    return True


def _exporter(name: str, env: Mapping[str, str]) -> Any:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter(out=sys.stderr)  # stdout carries the CLI's own output
    protocol = (
        env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    ).strip()
    if protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()  # endpoint, headers, timeout, TLS: from the OTEL_* variables
    if protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[import-not-found]
                OTLPSpanExporter as GrpcExporter,
            )
        except ImportError as exc:
            raise ConfigError(
                "OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs opentelemetry-exporter-otlp-proto-grpc "
                "(pip install it), or use http/protobuf (the default)"
            ) from exc
        return GrpcExporter()
    raise ConfigError(f"OTLP protocol {protocol!r} is not offered: use http/protobuf (the default) or grpc")


def install(provider: Any, *, content: bool = False) -> None:
    """Trace with ``provider`` (an SDK ``TracerProvider``) from now on; ``content``: the
    prompt-text opt-in. :func:`configure` calls it; tests call it with an in-memory exporter."""
    global _tracer, _provider, _content
    from skillopt import __version__

    _provider, _content = provider, content
    _tracer = provider.get_tracer("skillopt", __version__)


def uninstall() -> None:
    """Stop tracing (flushing what is queued): the inverse of :func:`install`."""
    global _tracer, _provider, _content
    provider, _tracer, _provider, _content = _provider, None, None, False
    if provider is not None:
        provider.force_flush()


def _kind(kind: str) -> Any:
    from opentelemetry.trace import SpanKind

    return {"server": SpanKind.SERVER, "client": SpanKind.CLIENT}.get(kind, SpanKind.INTERNAL)


def span(
    name: str, attributes: Mapping[str, Any] | None = None, *, parent: Any = None, kind: str = "internal"
) -> contextlib.AbstractContextManager[Any]:
    """A span around a block, current inside it (its children nest under it); an exception
    leaving the block marks it failed. Off: a shared no-op context manager.

    Args:
        parent: a context from :func:`current` or :func:`extract` (default: the current one).
        kind: ``internal``, ``server`` or ``client``.
    """
    if _tracer is None:
        return _NULL
    return _live_span(name, attributes, parent, kind)


@contextlib.contextmanager
def _live_span(name: str, attributes: Mapping[str, Any] | None, parent: Any, kind: str) -> Iterator[Any]:
    with _tracer.start_as_current_span(
        name,
        context=parent,
        kind=_kind(kind),
        attributes=attributes,
        record_exception=False,  # an exception's text may quote a prompt: its type only, below
        set_status_on_exception=False,
    ) as sp:
        try:
            yield sp
        except BaseException as exc:
            _failed(sp, exc)
            raise


def start_span(
    name: str, attributes: Mapping[str, Any] | None = None, *, parent: Any = None, kind: str = "internal"
) -> Any:
    """A started span that is not current (end it with :func:`end_span`); only while on."""
    assert _tracer is not None, "tracing is off"
    return _tracer.start_span(name, context=parent, kind=_kind(kind), attributes=attributes)


def _failed(sp: Any, error: BaseException | str) -> None:
    """Mark ``sp`` failed: by an exception's type alone (its text may quote a prompt or a
    model's answer), or by ``error`` when it is a description of ours."""
    from opentelemetry.trace import Status, StatusCode

    if isinstance(error, BaseException):
        sp.set_attribute("error.type", type(error).__name__)
        error = type(error).__name__
    sp.set_status(Status(StatusCode.ERROR, error[:300]))


def end_span(sp: Any, *, error: BaseException | str | None = None, end_ns: int | None = None) -> None:
    """End ``sp``, failed when ``error`` is given (see :func:`_failed`)."""
    if error is not None:
        _failed(sp, error)
    sp.end(end_time=end_ns)


def record_span(
    name: str,
    *,
    start: float,
    end: float | None = None,
    parent: Any = None,
    attributes: Mapping[str, Any] | None = None,
    error: BaseException | str | None = None,
    kind: str = "internal",
) -> None:
    """A span for an interval that already passed: ``start`` (and ``end``, default now) are
    ``time.monotonic()`` readings. For leaves measured where a live span would mean
    re-shaping the code (a streamed model answer ends in a generator's ``finally``)."""
    if _tracer is None:
        return
    now_mono, now_ns = time.monotonic(), time.time_ns()
    start_ns = now_ns - int((now_mono - start) * 1e9)
    end_ns = now_ns - int((now_mono - end) * 1e9) if end is not None else now_ns
    sp = _tracer.start_span(
        name, context=parent, kind=_kind(kind), attributes=attributes, start_time=start_ns
    )
    end_span(sp, error=error, end_ns=end_ns)


def current() -> Any:
    """The current context, to parent spans started elsewhere (another thread, later);
    ``None`` while off."""
    if _tracer is None:
        return None
    from opentelemetry import context

    return context.get_current()


def in_context(fn: F) -> F:
    """``fn`` bound to the caller's current context, for a thread pool: spans it starts nest
    under the caller's. Off: ``fn`` itself."""
    if _tracer is None:
        return fn
    from opentelemetry import context

    captured = context.get_current()

    def bound(*args: Any, **kwargs: Any) -> Any:
        token = context.attach(captured)
        try:
            return fn(*args, **kwargs)
        finally:
            context.detach(token)

    return bound  # type: ignore[return-value]


def attach(ctx: Any) -> Any:
    """Make ``ctx`` current; returns the token for :func:`detach`."""
    from opentelemetry import context

    return context.attach(ctx)


def detach(token: Any) -> None:
    from opentelemetry import context

    context.detach(token)


def context_of(sp: Any) -> Any:
    """A context whose current span is ``sp``."""
    from opentelemetry import trace

    return trace.set_span_in_context(sp)


def inject(carrier: MutableMapping[str, str], ctx: Any = None) -> None:
    """Write ``ctx``'s trace context (W3C ``traceparent``, by ``OTEL_PROPAGATORS``) into ``carrier``."""
    from opentelemetry import propagate

    propagate.inject(carrier, context=ctx)


def extract(carrier: Mapping[str, str]) -> Any:
    """The context a caller sent in ``carrier`` (a fresh one when it sent none)."""
    from opentelemetry import propagate

    return propagate.extract(carrier)


@contextlib.contextmanager
def recording(exporter: Any, *, content: bool = False) -> Iterator[None]:
    """Trace into ``exporter`` (e.g. the SDK's ``InMemorySpanExporter``) inside the block,
    synchronously: for tests."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    install(provider, content=content)
    try:
        yield
    finally:
        uninstall()


# -- the attributes of a rollout (both sides use them) --------------------------------------------


def rollout_attributes(request: RolloutRequest) -> dict[str, Any]:
    """What identifies a rollout in its spans (ids and names: no prompt, no task text)."""
    return {
        "skillopt.rollout_id": request.rollout_id,
        "skillopt.task_id": request.task.id,
        "skillopt.env": request.env,
        "skillopt.agent": request.agent,
        "gen_ai.request.model": request.model.model,
    }


def result_attributes(result: RolloutResult) -> dict[str, Any]:
    """How a rollout ended: its outcome (``passed``, ``failed`` or ``infra:<kind>``), score,
    turns and tokens; of a failure only its reason's leading word (``exec-error``), never the
    text after it (a program's output, a model's words)."""
    info = result.infra_error
    outcome = f"infra:{info.kind.value}" if info is not None else ("passed" if result.ok else "failed")
    attrs: dict[str, Any] = {
        "skillopt.outcome": outcome,
        "skillopt.hard": float(result.hard),
        "skillopt.turns": result.n_turns,
        "gen_ai.usage.input_tokens": result.usage.prompt_tokens,
        "gen_ai.usage.output_tokens": result.usage.completion_tokens,
    }
    words = result.fail_reason.split(":", 1)[0].split()
    if words:
        attrs["skillopt.fail_reason"] = words[0][:60]
    if result.host:
        attrs["skillopt.host.id"] = result.host
    return attrs
