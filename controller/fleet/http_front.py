"""The SandboxFusion-compatible HTTP API in front of a fleet (``skillopt fleet http``): one URL
for a client, every request passed to one host's own ``/run_code`` / ``/run_jupyter``.

Placement is the fleet's (:class:`~controller.fleet.executor.FleetExecutor`: hosts from
``--endpoints``, ``dns:///`` names re-resolved, health watches, the live host with the most free
slots first, a host taking at most its ``capacity`` requests at once; more wait here for a
slot), among the hosts whose HTTP API serves the request's language.

A host that fails is skipped where that is safe: one that refuses the connection (or its
connect or write times out), answers 429 (full) or 503 (draining) has not run the code, so the
request goes to another live host. A host that dies after it took the request may have run the code:
the answer is ``SandboxError`` with a message, never a second run behind the client's back
(SandboxFusion's client retries a ``SandboxError`` itself, by its ``max_attempts``).

Isolation: a request's ``isolation`` (``"gvisor"``), or the front's own (``--isolation``: every
request, for clients that cannot add the field), places it only on hosts whose code-run
containers run under it (``Describe``'s ``container_runtime``) and is passed on, so the host
checks it again; none such: 412 naming each host's runtime.

Tokens are the hosts' own: the caller's token (``/t/<token>`` path prefix or
``Authorization: Bearer``) goes to the host as its bearer header and the host decides, so a
tenant's caps hold on every host as they do when it calls a host directly.

The front serves with the host's listener (:class:`~sandbox.server.fusion_http.HttpApi`:
Starlette on uvicorn, the same limits), checks a request with the same pydantic models, and
passes it to the host with one pooled ``httpx.HTTPTransport``: a connection to a host is kept
for the next request (``_KEEP_ALIVE_S``, shorter than the host's own keep-alive, so the front
never sends on a connection the host is closing: a request lost that way would look like a host
that died after it took it), and the body is passed on as the caller sent it. A host that
closes the connection without an answer counts as one that took the request, also when it
closed while the body was still being sent: httpx reads for an answer then (a host's early
413 or 503 comes that way), and the two are one error to it. The transport,
not an ``httpx.Client``: a proxy wants none of a client's redirects, cookies or proxy settings
from the environment, and it costs a quarter less CPU per request (measured in two runs, 1,500
requests each to a host that answers at once: 560-650 µs against 770-860 µs; ``http.client``
with a new connection each time, before it, 370-450 µs plus the host's work to accept each
connection).
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

import httpx
import structlog

from controller.fleet.executor import FleetExecutor
from controller.fleet.hosts import HostState
from sandbox.server.fusion_http import HttpApi, HttpRefusal, credential
from sandbox.server.fusion_models import (
    ROUTES,
    RunCodeRequest,
    RunJupyterRequest,
    parse_request,
    sandbox_error,
)
from skillopt.errors import SandboxUnavailable
from skillopt.isolation import gives_isolation, unknown_isolation

__all__ = ["FleetHttpFront"]

log = structlog.get_logger("skillopt.controller.fleet.http")

#: Seconds the request may take on a host beyond its own timeouts (container start, copy out).
_SLACK_S = 120.0
_CONNECT_TIMEOUT_S = 5.0
#: Seconds an idle connection to a host is kept (the host keeps it longer: KEEP_ALIVE_S).
_KEEP_ALIVE_S = 5.0
#: The longest a host lets a step run (CodeRunConfig.max_timeout_s): larger asks are its 400.
_MAX_STEP_S = 300.0
#: Failures before the host had the whole request: it ran nothing, another host may.
_NOT_TAKEN = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.WriteError,
    httpx.WriteTimeout,
    httpx.PoolTimeout,
)


class _Unsafe(Exception):
    """The host failed after it took the request whole: the code may have run."""


class FleetHttpFront(HttpApi):
    """The HTTP API of a fleet, serving until :meth:`close`.

    Args:
        fleet: the hosts (the front's own: it places on it and closes it).
        listen, max_body_bytes, max_connections: as :class:`~sandbox.server.fusion_http.HttpApi`.
        wait_s: longest wait for a free slot on a usable host; then 503 with ``Retry-After``.
        isolation: the isolation every request requires ("" = only what a request asks for).
    """

    def __init__(
        self,
        fleet: FleetExecutor,
        *,
        listen: str,
        max_body_bytes: int = 64 * 1024 * 1024,
        max_connections: int = 256,
        wait_s: float = 60.0,
        isolation: str = "",
    ) -> None:
        if unknown_isolation(isolation):
            raise ValueError(unknown_isolation(isolation))
        self.fleet = fleet
        self.wait_s = wait_s
        self.isolation = isolation
        self._transport = httpx.HTTPTransport(
            limits=httpx.Limits(
                max_connections=None,
                max_keepalive_connections=max_connections,
                keepalive_expiry=_KEEP_ALIVE_S,
            )
        )
        try:
            super().__init__(listen=listen, max_body_bytes=max_body_bytes, max_connections=max_connections)
        except BaseException:
            self._transport.close()
            raise
        log.info(
            "fleet_http.started", listen=listen, port=self.port, hosts=self.fleet.hosts(), isolation=isolation
        )

    def close(self) -> None:
        super().close()
        self.fleet.close()
        self._transport.close()

    def authorize(self, path: str, authorization: str) -> tuple[str, str]:
        """The caller's token (checked by the host that takes its request) and the path."""
        return credential(path, authorization)

    def languages(self) -> list[str]:
        """Every language some host's HTTP API serves."""
        hosts = [h for h in list(self.fleet.hosts_state) if not h.gone]
        return sorted({lang for h in hosts if h.http_port for lang in h.languages})

    def post(self, route: str, caller: str, body: bytes) -> tuple[int, Any]:
        request = parse_request(ROUTES[route], body)
        language, timeout_s = _language_and_timeout(request)
        offered = self.languages()
        if language not in offered:
            raise HttpRefusal(
                400,
                f"language {language[:40]!r} is served by no host of this fleet; they run "
                f"{', '.join(offered) or 'nothing yet (no host answered)'}",
            )
        isolation = self._isolation(request.isolation, language)
        if isolation and request.isolation != isolation:  # the host checks it again
            body = json.dumps({**json.loads(body), "isolation": isolation}).encode("utf-8")
        del request
        tried: set[str] = set()
        refused: tuple[int, Any] | None = None  # a host's 412: its Describe was out of date
        until = time.monotonic() + self.wait_s
        while True:
            try:
                host = self.fleet.take(tried, usable=lambda h: _serves(h, language, isolation), until=until)
            except SandboxUnavailable:
                raise HttpRefusal(
                    503,
                    f"no sandbox host of this fleet has been reachable for {self.fleet.down_timeout_s:g} s "
                    f"({', '.join(self.fleet.hosts())}); retry later",
                    {"Retry-After": "5"},
                ) from None
            if host is None and refused is not None:
                return refused
            if host is None:
                raise HttpRefusal(
                    503,
                    f"no sandbox host could take the request within {self.wait_s:g} s "
                    f"(tried: {', '.join(sorted(tried)) or 'none free'}); retry shortly",
                    {"Retry-After": "1"},
                )
            tried.add(host.address)
            answer = self._on(host, route, caller, body, timeout_s)
            if answer is not None and answer[0] == 412:
                refused = answer
            elif answer is not None:
                return answer

    def _isolation(self, asked: str, language: str) -> str:
        """The isolation the request requires (its own, or the front's), checked against the
        hosts that serve ``language``.

        Raises:
            HttpRefusal: 400, not a level; 412, no host of the fleet gives it.
        """
        if unknown_isolation(asked):
            raise HttpRefusal(400, unknown_isolation(asked))
        isolation = asked or self.isolation
        if self.isolation and asked and asked != self.isolation:
            raise HttpRefusal(400, f"this front requires isolation={self.isolation}, the request {asked!r}")
        hosts = [h for h in list(self.fleet.hosts_state) if not h.gone and _serves(h, language)]
        if isolation and not any(gives_isolation(isolation, h.container_runtime) for h in hosts):
            runtimes = ", ".join(f"{h.address}: {h.container_runtime or 'the engine default'}" for h in hosts)
            raise HttpRefusal(
                412,
                f"no host of this fleet serving {language!r} runs code under isolation={isolation} "
                f"({runtimes}); start one with: skillopt serve --runtime runsc --http-listen ...",
            )
        return isolation

    def _on(
        self, host: HostState, route: str, token: str, body: bytes, timeout_s: float
    ) -> tuple[int, Any] | None:
        """The host's answer, or None when it did not run the request (try another)."""
        try:
            status, data, retry_after = self._forward(host, route, token, body, timeout_s)
        except _Unsafe as exc:
            self.fleet.mark_down(host, str(exc))
            self.fleet.give_back(host)
            log.warning("fleet_http.host_failed", address=host.address, error=str(exc)[:300])
            message = (
                f"sandbox host {host.address} failed while it ran the request ({exc}); the code may "
                "have run there: send it again to run it on another host"
            )
            return 200, sandbox_error(route, message, host.host_id)
        except _NOT_TAKEN as exc:  # it never took the request whole: safe elsewhere
            self.fleet.mark_down(host, f"HTTP API: {_described(exc)}")
            self.fleet.give_back(host)
            log.warning("fleet_http.host_skipped", address=host.address, error=_described(exc)[:300])
            return None
        if status in (429, 503):  # full, or draining: it ran nothing
            self.fleet.give_back(host, full=status == 429)
            if status == 503:
                self.fleet.mark_down(host, "HTTP API: 503 (draining)", draining=True)
            log.info("fleet_http.host_refused", address=host.address, status=status, retry_after=retry_after)
            return None
        self.fleet.give_back(host, ok=True)
        return status, data

    def _forward(
        self, host: HostState, route: str, token: str, body: bytes, timeout_s: float
    ) -> tuple[int, bytes, str]:
        """POST ``body`` to the host's HTTP API: its status, body and ``Retry-After``.

        Raises:
            httpx.ConnectError, httpx.WriteError (and their timeouts): it could not be reached or
                did not take the whole request (nothing ran).
            _Unsafe: it failed after it took the whole request.
        """
        name = host.address.rpartition(":")[0].strip("[]")
        url = f"http://{f'[{name}]' if ':' in name else name}:{host.http_port}{route}"
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        timeout = httpx.Timeout(timeout_s, connect=_CONNECT_TIMEOUT_S).as_dict()
        request = httpx.Request("POST", url, content=body, headers=headers, extensions={"timeout": timeout})
        try:
            resp = self._transport.handle_request(request)
            try:
                data = resp.read()
            finally:
                resp.close()
        except _NOT_TAKEN:
            raise
        except httpx.TransportError as exc:
            raise _Unsafe(_described(exc)) from exc
        return resp.status_code, data, resp.headers.get("Retry-After", "")


def _described(exc: Exception) -> str:
    return f"{exc.__class__.__name__}: {exc}" if str(exc) else exc.__class__.__name__


def _language_and_timeout(request: RunCodeRequest | RunJupyterRequest) -> tuple[str, float]:
    """The language a request needs (a notebook: python) and how long it may take on a host
    (its own timeouts, each as far as a host lets it run, plus slack)."""

    def seconds(*values: float) -> float:
        return sum(0.0 if math.isnan(v) else min(max(v, 0.0), _MAX_STEP_S) for v in values) + _SLACK_S

    if isinstance(request, RunJupyterRequest):
        return "python", seconds(request.total_timeout)
    return request.language, seconds(request.compile_timeout, request.run_timeout)


def _serves(host: HostState, language: str, isolation: str = "") -> bool:
    return (
        bool(host.http_port)
        and language in host.languages
        and not host.address.startswith("unix:")
        and gives_isolation(isolation, host.container_runtime)
    )
