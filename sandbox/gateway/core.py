"""The model gateway: the one path from the sandbox side to model providers.

Each rollout that needs a model gets a :class:`GatewaySession` with a random token. Agent CLIs
in exec-agent containers present that token to the HTTP front end (``http.py``); in-service
agents go through :class:`GatewayChatModel`. Both paths share this module's logic:

* the session decides the provider profile (URL and real key) and forces the model name;
* incoming credentials are dropped and the real key injected (the container never has it);
* every exchange is recorded into the session (the rollout's trace) with its token usage;
* a per-rollout token budget ends the model conversation when used up;
* the record/replay cache (``cache.py``): ``record`` stores, ``replay`` answers only from the
  store and a miss is a typed error.
"""

from __future__ import annotations

import dataclasses
import json
import random
import secrets
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import httpx
import structlog

from sandbox.gateway.cache import CACHE_MODES, ExchangeCache, StoredResponse, canonical_key
from sandbox.gateway.session import GatewaySession
from sandbox.gateway.spans import model_call_failed, model_call_span
from sandbox.gateway.usage import parse_usage
from sandbox.observability.metrics import NO_METRICS, Metrics
from skillopt.errors import (
    ConfigError,
    ModelError,
    ModelTimeout,
    ModelUnavailable,
    ReplayMiss,
)
from skillopt.models._errors import model_error_for_status, redact
from skillopt.models.base import SEED_HEADER, ChatModel, ChatRequest, ChatResponse
from skillopt.models.prefix import chat_payload, prompt_prefix
from skillopt.models.profiles import ProviderProfile
from skillopt.types import Usage

__all__ = ["Gateway", "GatewayChatModel"]

log = structlog.get_logger("skillopt.sandbox.gateway")

_STRIP_HEADERS = frozenset(
    {
        "authorization",
        "x-api-key",
        "api-key",
        "host",
        "content-length",
        "connection",
        "accept-encoding",
        "transfer-encoding",
        "keep-alive",
    }
)
_RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
_MAX_LOGGED_BODY = 256 * 1024  # per exchange, per direction
_MAX_ERROR_BODY = 64 * 1024


def _clip(text: str) -> str:
    return (
        text
        if len(text) <= _MAX_LOGGED_BODY
        else text[:_MAX_LOGGED_BODY] + f"\n[... {len(text) - _MAX_LOGGED_BODY} more characters]"
    )


class Gateway:
    """Sessions, key injection, budgets, recording and replay for one sandbox host.

    Args:
        providers: the host's provider profiles (with resolved keys).
        cache: the exchange store; required for ``record``/``replay``.
        default_mode: cache mode when a session does not choose one.
    """

    def __init__(
        self,
        providers: Mapping[str, ProviderProfile],
        *,
        cache: ExchangeCache | None = None,
        default_mode: str = "off",
        upstream_timeout_s: float = 600.0,
        max_attempts: int = 3,
    ) -> None:
        if default_mode not in CACHE_MODES:
            raise ConfigError(
                f"gateway cache mode must be one of {', '.join(CACHE_MODES)}, got {default_mode!r}"
            )
        if default_mode != "off" and cache is None:
            raise ConfigError(
                f"gateway cache mode {default_mode!r} needs a cache directory (--gateway-cache-dir)"
            )
        self.providers = dict(providers)
        self.cache = cache
        self.default_mode = default_mode
        self.max_attempts = max_attempts
        self.upstream_timeout_s = upstream_timeout_s
        #: The host's recorder of model calls and provider failures (none: metrics off).
        self.metrics: Metrics = NO_METRICS
        self._sessions: dict[str, GatewaySession] = {}
        self._lock = threading.Lock()
        self._http = httpx.Client(
            timeout=httpx.Timeout(upstream_timeout_s, connect=10.0), follow_redirects=False
        )

    # -- sessions ----------------------------------------------------------------------------

    def open_session(
        self,
        rollout_id: str,
        *,
        provider: str,
        model: str,
        budget_tokens: int | None = None,
        cache_mode: str = "",
        seed: int = 0,
    ) -> GatewaySession:
        mode = cache_mode or self.default_mode
        if mode not in CACHE_MODES:
            raise ConfigError(f"model cache mode must be one of {', '.join(CACHE_MODES)}, got {mode!r}")
        if mode != "off" and self.cache is None:
            raise ConfigError(
                "this sandbox host has no gateway cache directory; record/replay is unavailable"
            )
        session = GatewaySession(
            token=f"sk-skillopt-rollout-{secrets.token_urlsafe(24)}",
            rollout_id=rollout_id,
            profile=self.providers[provider],
            model=model,
            budget_tokens=budget_tokens,
            cache_mode=mode,
            seed=seed,
        )
        with self._lock:
            self._sessions[session.token] = session
        return session

    def close_session(self, session: GatewaySession) -> None:
        with self._lock:
            self._sessions.pop(session.token, None)

    def session_for(self, token: str) -> GatewaySession | None:
        with self._lock:
            return self._sessions.get(token)

    # -- the shared exchange logic -----------------------------------------------------------

    @staticmethod
    def _cache_key(session: GatewaySession, api: str, body: Any) -> str:
        """The record/replay key, computed only when the session records or replays: the
        canonical form of a request with a 200 KB skill in it took 1.8 ms per model call."""
        if session.cache_mode not in ("record", "replay"):
            return ""
        return canonical_key(api, body, seed=session.seed)

    def _lookup(self, session: GatewaySession, key: str, api: str) -> StoredResponse | None:
        if session.cache_mode == "replay":
            assert self.cache is not None
            hit = self.cache.get(key)
            if hit is None:
                err = ReplayMiss(
                    f"replay: no recorded exchange for this {api} request (key {key[:16]}); record the run first "
                    "or use cache mode 'record'",
                    rollout_id=session.rollout_id,
                )
                session.error = session.error or err
                model_call_failed(session, api, time.monotonic(), err)
                self.metrics.gateway_error(session.profile.name, str(err.kind))
                raise err
            return hit
        return None

    def _store(self, session: GatewaySession, key: str, canonical: Any, response: StoredResponse) -> None:
        if session.cache_mode == "record" and response.status == 200:
            assert self.cache is not None
            self.cache.put(key, canonical, response)

    # -- HTTP front end path -----------------------------------------------------------------

    def upstream_url(self, profile: ProviderProfile, api: str, query: str) -> str:
        kind = profile.kind
        if kind == "anthropic":
            base = (profile.base_url or "https://api.anthropic.com").rstrip("/")
            base = base[:-3] if base.endswith("/v1") else base
            url = f"{base}/v1/messages" if api == "messages" else f"{base}/v1/models"
        elif kind in ("openai", "openai_compatible", "openai_responses"):
            base = (profile.base_url or "https://api.openai.com/v1").rstrip("/")
            suffix = {"responses": "/responses", "chat": "/chat/completions", "models": "/models"}[api]
            url = base + suffix
        else:
            raise ConfigError(
                f"provider {profile.name!r} of kind {kind!r} cannot serve exec agents through the gateway"
            )
        return f"{url}?{query}" if query else url

    def _auth_headers(self, profile: ProviderProfile) -> dict[str, str]:
        if not profile.api_key:
            return {}
        if profile.kind == "anthropic":
            return {"x-api-key": profile.api_key}
        return {"authorization": f"Bearer {profile.api_key}"}

    def forward(
        self, session: GatewaySession, *, api: str, query: str, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, str, Iterator[bytes]]:
        """Forward one HTTP request of an exec agent. Returns status, content type and the
        response body as chunks (streamed through as they arrive, recorded when done).

        Raises:
            BudgetExceeded, ReplayMiss: the session may not get an answer.
            ValueError: the body is not JSON.
        """
        session.check_budget()
        session.check_failed()
        payload = json.loads(body or b"{}")
        if isinstance(payload, dict) and session.model and "model" in payload:
            payload["model"] = session.model  # the agent cannot switch to another model
        key = self._cache_key(session, api, payload)
        t0 = time.monotonic()
        hit = self._lookup(session, key, api)
        if hit is not None:
            self._log(session, api, payload, hit, t0, replayed=True)
            return hit.status, hit.content_type, iter([hit.body])
        out_headers = {k: v for k, v in headers.items() if k.lower() not in _STRIP_HEADERS}
        out_headers.update(self._auth_headers(session.profile))
        if session.seed:
            out_headers[SEED_HEADER] = str(session.seed)
        url = self.upstream_url(session.profile, api, query)
        data = json.dumps(payload).encode("utf-8")
        try:
            response = self._open(url, out_headers, data, session)
        except ModelError as exc:
            model_call_failed(session, api, t0, exc)
            raise
        content_type = response.headers.get("content-type", "application/json")
        if response.status_code >= 400:
            # The provider refused or failed (after our retries): relay its answer once, and
            # type the rollout's failure by it (never let an agent run an error text as code).
            try:
                raw = response.read()[:_MAX_ERROR_BODY]
            except httpx.HTTPError:
                raw = b""
            finally:
                response.close()
            stored = StoredResponse(
                status=response.status_code, content_type=content_type, body=raw, usage={}
            )
            self._log(session, api, payload, stored, t0, replayed=False)
            self._fail(session, self._status_error(session, response.status_code, raw))
            return response.status_code, content_type, iter([raw])

        def chunks() -> Iterator[bytes]:
            parts: list[bytes] = []
            try:
                for chunk in response.iter_raw():
                    parts.append(chunk)
                    yield chunk
            except httpx.HTTPError as exc:  # the provider broke off mid-answer
                kind = ModelTimeout if isinstance(exc, httpx.TimeoutException) else ModelUnavailable
                self._fail(
                    session,
                    kind(
                        f"provider {session.profile.name!r} broke off its answer: {type(exc).__name__}",
                        rollout_id=session.rollout_id,
                    ),
                )
            finally:
                response.close()
                raw = b"".join(parts)
                stored = StoredResponse(
                    status=response.status_code,
                    content_type=content_type,
                    body=raw,
                    usage=parse_usage(content_type, raw).to_dict(),
                )
                self._store(session, key, payload, stored)
                self._log(session, api, payload, stored, t0, replayed=False)

        return response.status_code, content_type, chunks()

    def _fail(self, session: GatewaySession, error: ModelError) -> None:
        """Record a provider's failure in the session (it types the rollout's) and count it."""
        session.fail(error)
        self.metrics.gateway_error(session.profile.name, str(error.kind))

    def _status_error(self, session: GatewaySession, status: int, body: bytes) -> ModelError:
        """The typed error for an HTTP error status the provider answered."""
        profile = session.profile
        excerpt = " ".join(body.decode("utf-8", "replace").split())[:300]
        cls = model_error_for_status(status)
        err = cls(
            redact(
                f"provider {profile.name!r} answered {status}: {excerpt or '(empty body)'}", [profile.api_key]
            ),
            rollout_id=session.rollout_id,
        )
        err.status = status
        return err

    def _open(
        self, url: str, headers: dict[str, str], data: bytes, session: GatewaySession
    ) -> httpx.Response:
        """POST with retries on 429/5xx/connection errors, only before any byte is relayed.

        Raises:
            ModelTimeout: the provider did not answer in time (every attempt).
            ModelUnavailable: it could not be reached (every attempt).
        """
        last: Exception | None = None
        for attempt in range(self.max_attempts):
            try:
                request = self._http.build_request("POST", url, headers=headers, content=data)
                response = self._http.send(request, stream=True)
            except httpx.HTTPError as exc:
                last = exc
                log.warning(
                    "gateway.upstream_error",
                    rollout_id=session.rollout_id,
                    error=type(exc).__name__,
                    attempt=attempt + 1,
                )
            else:
                if response.status_code not in _RETRY_STATUS or attempt == self.max_attempts - 1:
                    return response
                delay = _retry_after(response.headers.get("retry-after"))
                response.read()
                response.close()
                log.warning(
                    "gateway.upstream_retry",
                    rollout_id=session.rollout_id,
                    status=response.status_code,
                    attempt=attempt + 1,
                )
                time.sleep(
                    delay if delay is not None else 0.5 * 2**attempt * (1 + random.random())
                )  # backoff
                continue
            if attempt < self.max_attempts - 1:
                time.sleep(0.5 * 2**attempt * (1 + random.random()))  # backoff with jitter
        name = session.profile.name
        if isinstance(last, httpx.TimeoutException):
            err: ModelError = ModelTimeout(
                f"provider {name!r} did not answer within {self.upstream_timeout_s:g}s "
                f"({self.max_attempts} attempts)",
                rollout_id=session.rollout_id,
            )
        else:
            err = ModelUnavailable(
                f"provider {name!r} unreachable after {self.max_attempts} attempts: {type(last).__name__}",
                rollout_id=session.rollout_id,
            )
        self._fail(session, err)
        raise err

    def _log(
        self,
        session: GatewaySession,
        api: str,
        payload: Any,
        resp: StoredResponse,
        t0: float,
        *,
        replayed: bool,
    ) -> None:
        try:
            usage = dataclasses.replace(Usage.from_dict(resp.usage), calls=1)
        except (TypeError, ValueError):  # a recording from elsewhere
            usage = Usage(calls=1)
        seconds = time.monotonic() - t0
        self.metrics.model_call(session.profile.name, seconds, usage, status=resp.status, replayed=replayed)
        record = usage.to_dict()
        del record["calls"]
        model_call_span(session, api, t0, resp, usage, payload, replayed=replayed)
        session.add(
            {
                "api": api,
                "status": resp.status,
                "seconds": round(seconds, 4),
                "replayed": replayed,
                "model": (payload.get("model") if isinstance(payload, dict) else None) or session.model,
                "usage": record,
                # What the run's cacheable prefix share is computed from (skillopt.models.prefix).
                "prefix": prompt_prefix(payload).to_json() if isinstance(payload, dict) else None,
                "request": _clip(json.dumps(payload, ensure_ascii=False)),
                "response": _clip(resp.body.decode("utf-8", "replace")),
            },
            usage,
        )

    # -- in-process path ---------------------------------------------------------------------

    def complete(self, session: GatewaySession, model: ChatModel, request: ChatRequest) -> ChatResponse:
        """An in-service agent's call: the same budget, recording and replay as HTTP calls."""
        session.check_budget()
        canonical = _request_json(request)
        key = self._cache_key(session, "chat-neutral", canonical)
        t0 = time.monotonic()
        hit = self._lookup(session, key, "chat")
        if hit is not None:
            reply = _response_from_json(json.loads(hit.body))
            self._log(session, "chat", canonical, hit, t0, replayed=True)
            return reply
        session.check_failed()
        # One upstream timeout policy for both paths (HTTP front end and in-service agents).
        limit = min(request.timeout_s or self.upstream_timeout_s, self.upstream_timeout_s)
        try:
            reply = model.complete(
                dataclasses.replace(request, timeout_s=limit, seed=session.seed or request.seed)
            )
        except ModelError as exc:
            status = getattr(exc, "status", 0) or 500  # no HTTP answer: counted as a server error
            self.metrics.model_call(
                session.profile.name, time.monotonic() - t0, Usage(), status=status, replayed=False
            )
            self._fail(session, exc)
            model_call_failed(session, "chat", t0, exc)
            raise
        body = json.dumps(_response_json(reply)).encode("utf-8")
        stored = StoredResponse(
            status=200, content_type="application/json", body=body, usage=reply.usage.to_dict()
        )
        self._store(session, key, canonical, stored)
        self._log(session, "chat", canonical, stored, t0, replayed=False)
        return reply

    def close(self) -> None:
        self._http.close()


class GatewayChatModel:
    """A ChatModel for in-service agents that routes every call through the gateway."""

    def __init__(self, gateway: Gateway, session: GatewaySession, inner: ChatModel) -> None:
        self.gateway = gateway
        self.session = session
        self.inner = inner
        self.name = inner.name

    def complete(self, request: ChatRequest) -> ChatResponse:
        return self.gateway.complete(self.session, self.inner, request)


def _retry_after(value: str | None) -> float | None:
    try:
        return min(10.0, max(0.0, float(value))) if value else None
    except ValueError:
        return None


def _request_json(r: ChatRequest) -> dict[str, Any]:
    return {
        "model": r.model,
        **chat_payload(r),
        "temperature": r.temperature,
        "max_output_tokens": r.max_output_tokens,
        "reasoning_effort": r.reasoning_effort,
        "extra": dict(r.extra),
    }


def _response_json(r: ChatResponse) -> dict[str, Any]:
    return {
        "text": r.text,
        "tool_calls": [dict(c) for c in r.tool_calls],
        "usage": r.usage.to_dict(),
        "finish_reason": r.finish_reason,
        "model": r.raw_model,
    }


def _response_from_json(d: Mapping[str, Any]) -> ChatResponse:
    u = d.get("usage") or {}
    return ChatResponse(
        text=d.get("text", ""),
        tool_calls=tuple(d.get("tool_calls") or ()),
        usage=dataclasses.replace(Usage.from_dict(u), calls=1),
        finish_reason=d.get("finish_reason", ""),
        raw_model=d.get("model", ""),
    )
