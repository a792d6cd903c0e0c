"""The scripted model server: a real threaded HTTP server speaking three model APIs.

Routes (any prefix before the suffix is accepted, so ``/v1/...``, ``/...`` and Azure's
``/openai/deployments/<d>/...`` all work):

=========================================  ================================================
``POST …/chat/completions``                OpenAI Chat Completions (JSON or SSE)
``POST …/responses``                       OpenAI Responses (JSON or SSE), Codex CLI
``POST …/messages`` (``?beta=true`` too)   Anthropic Messages (JSON or SSE), Claude Code
``POST …/messages/count_tokens``           Anthropic token count (the estimate)
``GET …/models``                           model list (OpenAI and Anthropic fields)
``GET /``, ``HEAD /api/hello``, ``/health`` 200 probes (Claude Code's connectivity check)
=========================================  ================================================

How a request is answered, in order: responders registered with ``when="before"``, the
scenario's rules, responders with ``when="after"``, the scenario's ``default`` rule. If none
answers, the reply is a 400 in the API's error shape saying that no rule matched, with a
snippet of the request, and a warning is logged. Every request is recorded (see
:class:`RecordedRequest`) before its reply is sent.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import math
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any, Literal
from urllib.parse import urlsplit

from skillopt.testing.scripted import anthropic_messages, openai_chat, openai_responses
from skillopt.testing.scripted.prompt_cache import PromptCache
from skillopt.testing.scripted.record import RecordedRequest, redact_headers
from skillopt.testing.scripted.render import error_body, estimate_tokens, resolve
from skillopt.testing.scripted.request import ScriptedRequest
from skillopt.testing.scripted.scenario import (
    ErrorCounters,
    Rule,
    Scenario,
    ScenarioError,
    ScenarioLike,
    ScriptedReply,
    render_template,
)
from skillopt.testing.scripted.wire import BodyError, read_body, send_body, send_sse

__all__ = ["RecordedRequest", "Responder", "ScriptedModelServer", "redact_headers"]

log = logging.getLogger("skillopt.testing.scripted")

Responder = Callable[[ScriptedRequest], "ScriptedReply | str | Mapping[str, Any] | None"]
"""A programmatic responder: return a reply (a ScriptedReply, a text, or a reply mapping) or
None to pass. ``error.times`` has no effect on a responder's replies (it keeps no counters)."""

_PROBES = ("/", "/api/hello", "/health", "/healthz")
_SNIPPET = 240


@dataclass(frozen=True, slots=True)
class _Decision:
    rule: str | None
    reply_index: int | None
    reply: ScriptedReply | None
    variables: Mapping[str, str]


_API_ROUTES: tuple[tuple[str, ModuleType], ...] = (
    ("/chat/completions", openai_chat),
    ("/responses", openai_responses),
    ("/messages", anthropic_messages),
)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # the default 5 drops SYNs under 16+ simultaneous connects
    scripted: ScriptedModelServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the SDKs pool connections
    # Headers and body go out in two writes: with Nagle's algorithm the body waited for the
    # client's delayed ACK, 40 ms per response (measured: 45 ms per target call, 4 ms without).
    disable_nagle_algorithm = True
    server: _HTTPServer
    timeout = 300  # idle keep-alive connections end eventually

    def setup(self) -> None:
        super().setup()
        self.server.scripted._track(self.connection, add=True)

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        self.server.scripted._track(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("scripted_server %s - %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        self.server.scripted._handle(self, "GET")

    def do_HEAD(self) -> None:
        self.server.scripted._handle(self, "HEAD")

    def do_POST(self) -> None:
        self.server.scripted._handle(self, "POST")


class ScriptedModelServer:
    """A scripted OpenAI/Anthropic-compatible model server on a real socket.

    Usage::

        with ScriptedModelServer({"rules": [{"match": {"contains": "hi"}, "reply": "hello"}]}) as srv:
            client = openai.OpenAI(base_url=srv.base_url, api_key="k")
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
            assert srv.requests[-1].rule == "rule0"

    Args:
        scenario: a :class:`Scenario`, a YAML/JSON file path, a rule list or mapping, or None.
        host, port: where to listen; port 0 picks a free port (read ``.port`` after start).
        log_path: append every recorded request as one JSON line to this file.
        expect_auth: if set, API requests must carry ``Authorization: Bearer <token>``,
            ``x-api-key: <token>`` or ``api-key: <token>``, else 401 (probes are exempt).
        max_records: how many recorded requests to keep in memory (oldest dropped).
        responders: programmatic responders tried before the rules.
        responders_after: programmatic responders tried after the rules, before ``default``.
    """

    def __init__(
        self,
        scenario: ScenarioLike = None,
        host: str = "127.0.0.1",
        port: int = 0,
        log_path: str | Path | None = None,
        *,
        expect_auth: str | None = None,
        max_records: int = 10_000,
        responders: Sequence[Responder] = (),
        responders_after: Sequence[Responder] = (),
    ) -> None:
        self._scenario = Scenario.coerce(scenario)
        self._host = host
        self._want_port = port
        self.log_path = Path(log_path) if log_path is not None else None
        self.expect_auth = expect_auth
        self._records: deque[RecordedRequest] = deque(maxlen=max_records)
        self._cond = threading.Condition()
        self._counters = ErrorCounters()
        self._before: list[Responder] = list(responders)
        self._after: list[Responder] = list(responders_after)
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        self._log_lock = threading.Lock()
        #: OpenAI's automatic prefix caching, simulated (``cached_tokens`` in usage).
        self.prompt_cache = PromptCache()

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> ScriptedModelServer:
        """Bind and serve in a background thread. Returns self. Idempotent."""
        if self._httpd is not None:
            return self
        self._stopping.clear()
        httpd = _HTTPServer((self._host, self._want_port), _Handler)
        httpd.scripted = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="scripted-model-server",
            daemon=True,
        )
        self._thread.start()
        log.info("scripted model server listening on %s (scenario %s)", self.base_url, self._scenario.name)
        return self

    def stop(self) -> None:
        """Stop serving, cut delayed replies short and close open connections. Idempotent."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        with self._conns_lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._conns_lock:
            if add:
                self._conns.add(conn)
            else:
                self._conns.discard(conn)

    # ----------------------------------------------------------------- addresses

    @property
    def host(self) -> str:
        return self._host

    @property
    def port(self) -> int:
        """The bound port. Raises RuntimeError before :meth:`start`."""
        if self._httpd is None:
            raise RuntimeError("ScriptedModelServer is not running; call start() first")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """``http://host:port`` (no path)."""
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI SDK / Codex ``base_url``: ``http://host:port/v1``."""
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """The Anthropic SDK / ``ANTHROPIC_BASE_URL``: ``http://host:port`` (no ``/v1``)."""
        return self.url

    # ----------------------------------------------------------------- scripting

    @property
    def scenario(self) -> Scenario:
        return self._scenario

    def set_scenario(self, scenario: ScenarioLike) -> None:
        """Replace the scenario (and reset the transient-error counters)."""
        self._scenario = Scenario.coerce(scenario)
        self._counters.reset()

    def add_responder(self, responder: Responder, *, when: Literal["before", "after"] = "before") -> None:
        """Register a programmatic responder, tried before the rules or after them."""
        if when not in ("before", "after"):
            raise ValueError(f"when must be 'before' or 'after', got {when!r}")
        (self._before if when == "before" else self._after).append(responder)

    # ----------------------------------------------------------------- observability

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of the recorded requests, oldest first."""
        with self._cond:
            return list(self._records)

    def api_requests(self, api: str | None = None) -> list[RecordedRequest]:
        """Recorded model calls (chat/responses/messages), optionally of one API only."""
        apis = (api,) if api else ("chat", "responses", "messages")
        return [r for r in self.requests if r.api in apis]

    def reset(self) -> None:
        """Forget recorded requests and transient-error counters (responders stay)."""
        with self._cond:
            self._records.clear()
        self._counters.reset()

    def wait_for_requests(
        self, count: int, *, timeout_s: float = 10.0, api: str | None = None
    ) -> list[RecordedRequest]:
        """Block until at least ``count`` requests (of ``api``, if given) are recorded.

        Raises:
            TimeoutError: fewer arrived within ``timeout_s``.
        """

        def matching() -> list[RecordedRequest]:
            return [r for r in self._records if api is None or r.api == api]

        with self._cond:
            if not self._cond.wait_for(lambda: len(matching()) >= count, timeout=timeout_s):
                raise TimeoutError(
                    f"scripted server saw {len(matching())} of {count} requests in {timeout_s}s"
                )
            return matching()

    def _record(self, rec: RecordedRequest) -> None:
        with self._cond:
            self._records.append(rec)
            self._cond.notify_all()
        if self.log_path is not None:
            line = json.dumps(rec.to_dict(), ensure_ascii=False, default=str)
            with self._log_lock, self.log_path.open("a", encoding="utf-8") as fh:
                fh.write(line + "\n")

    # ----------------------------------------------------------------- request handling

    def _handle(self, h: _Handler, method: str) -> None:
        split = urlsplit(h.path)
        path, query = split.path or "/", split.query
        raw_headers = {k.lower(): v for k, v in h.headers.items()}
        rec: dict[str, Any] = {
            "ts": time.time(),
            "method": method,
            "path": path,
            "query": query,
            "headers": redact_headers(raw_headers),
        }
        try:
            body_bytes = read_body(h, raw_headers)
        except BodyError as exc:
            h.close_connection = True  # the stream position is unknown now
            self._reply_error(h, rec, "chat", exc.status, str(exc))
            return
        kind, module = _route(method, path)
        rec["api"] = kind
        if kind == "probe":
            self._send_json(h, rec, 200, {"ok": True, "server": "skillopt-scripted-model-server"})
            return
        err_api = module.API if module is not None else ("messages" if "messages" in path else "chat")
        if kind is None:
            self._reply_error(h, rec, err_api, 404, f"scripted server: no route for {method} {path}")
            return
        if not self._authorized(raw_headers):
            msg = "scripted server: missing or wrong API key (expect_auth is set)"
            self._reply_error(h, rec, err_api, 401, msg)
            return
        if kind == "models":
            self._send_json(h, rec, 200, self._models_body())
            return
        assert module is not None
        try:
            body = json.loads(body_bytes or b"{}")
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            rec["body"] = body_bytes.decode("utf-8", "replace")
            self._reply_error(h, rec, err_api, 400, f"scripted server: request body is not JSON: {exc}")
            return
        rec["body"] = body
        if not isinstance(body, dict):
            self._reply_error(h, rec, err_api, 400, "scripted server: request body must be a JSON object")
            return
        req = _scripted_request(module, method, path, query, rec["headers"], body)
        rec.update(model=req.model, stream=req.stream, turn=req.turn)
        if kind == "count_tokens":
            self._send_json(h, rec, 200, {"input_tokens": estimate_tokens(req.text)})
            return
        self._answer(h, rec, req, module)

    def _answer(self, h: _Handler, rec: dict[str, Any], req: ScriptedRequest, module: ModuleType) -> None:
        try:
            decision = self._decide(req)
        except Exception as exc:  # a responder bug must surface in the test, not hang it
            log.exception("scripted server: responder failed")
            self._reply_error(h, rec, req.api, 500, f"scripted server: responder raised {exc!r}")
            return
        rec.update(rule=decision.rule, reply_index=decision.reply_index)
        reply = decision.reply
        if reply is None:
            msg = self._unmatched_message(req)
            log.warning("%s", msg)
            self._reply_error(h, rec, req.api, 400, msg)
            return
        if reply.error is not None:
            err = reply.error
            message = err.message or f"scripted error {err.status} (rule {decision.rule})"
            message = str(render_template(message, decision.variables))
            headers = dict(err.headers)
            if err.retry_after_s is not None:
                headers.setdefault("retry-after", str(math.ceil(err.retry_after_s)))
                headers.setdefault("retry-after-ms", str(int(err.retry_after_s * 1000)))
            body: Any = (
                err.body
                if err.body is not None
                else error_body(req.api, err.status, message, type_=err.type, code=err.code)
            )
            self._record(RecordedRequest(status=err.status, error=message, **rec))
            if self._wait(reply.delay_s):
                send_body(h, err.status, body, headers)
            return
        seed = hashlib.sha256(
            json.dumps(req.body, sort_keys=True, default=str).encode()
            + f"|{decision.rule}|{decision.reply_index}".encode()
        ).hexdigest()
        try:
            resolved = resolve(
                reply,
                req,
                variables=decision.variables,
                id_seed=seed,
                default_sse_mode=self._scenario.responses_sse,
                call_prefix=module.CALL_PREFIX,
            )
            if req.api in ("chat", "responses") and (
                reply.usage is None or reply.usage.prompt_tokens is None
            ):
                key = str(req.body.get("prompt_cache_key") or "")
                cached = self.prompt_cache.lookup(model=req.model, key=key, text=req.text)
                resolved = dataclasses.replace(resolved, cached_tokens=min(cached, resolved.prompt_tokens))
            elif req.api == "messages" and (reply.usage is None or reply.usage.prompt_tokens is None):
                read, write = self.prompt_cache.anthropic(model=req.model, body=req.body)
                budget = resolved.prompt_tokens
                resolved = dataclasses.replace(
                    resolved, cached_tokens=min(read, budget), cache_write_tokens=min(write, budget)
                )
            if req.stream:
                frames = list(module.render_sse(resolved, req))  # errors surface before any byte
            else:
                payload = module.render_json(resolved, req)
        except ScenarioError as exc:
            log.error("%s", exc.message)
            self._reply_error(h, rec, req.api, 400, exc.message)
            return
        # Recorded on arrival, before a scripted delay, so a client that times out is still seen.
        self._record(RecordedRequest(status=200, **rec))
        if not self._wait(reply.delay_s):
            return
        if req.stream:
            send_sse(h, frames)
        else:
            send_body(h, 200, payload)

    def _decide(self, req: ScriptedRequest) -> _Decision:
        base = {"turn": str(req.turn), "model": req.model, "api": req.api}
        for responder in list(self._before):
            d = self._ask(responder, req, base)
            if d is not None:
                return d
        scenario = self._scenario
        hit = scenario.find(req)
        if hit is not None:
            rule, variables = hit
            return self._from_rule(rule, req, {**base, **variables})
        for responder in list(self._after):
            d = self._ask(responder, req, base)
            if d is not None:
                return d
        if scenario.default is not None:
            return self._from_rule(scenario.default, req, base)
        return _Decision(None, None, None, base)

    def _from_rule(self, rule: Rule, req: ScriptedRequest, variables: Mapping[str, str]) -> _Decision:
        index, reply = rule.choose(req.turn, self._counters)
        return _Decision(rule.name, index, reply, {**variables, "rule": rule.name})

    @staticmethod
    def _ask(responder: Responder, req: ScriptedRequest, base: Mapping[str, str]) -> _Decision | None:
        out = responder(req)
        if out is None:
            return None
        name = f"responder:{getattr(responder, '__name__', type(responder).__name__)}"
        return _Decision(name, None, ScriptedReply.from_obj(out), {**base, "rule": name})

    def _unmatched_message(self, req: ScriptedRequest) -> str:
        text = req.text
        head = text[:_SNIPPET]
        tail = req.last_user_text[-_SNIPPET:]
        return (
            f"scripted server: no scenario rule matched this request "
            f"(scenario={self._scenario.name!r}, api={req.api}, model={req.model!r}, turn={req.turn}, "
            f"path={req.path}). Request text starts: {head!r}; last user text ends: {tail!r}. "
            "Add a rule that matches it, or a `default` rule."
        )

    def _authorized(self, headers: Mapping[str, str]) -> bool:
        token = self.expect_auth
        if token is None:
            return True
        return (
            headers.get("authorization") == f"Bearer {token}"
            or headers.get("x-api-key") == token
            or headers.get("api-key") == token
        )

    def _models_body(self) -> dict[str, Any]:
        ids = ["scripted-model", *self._scenario.models]
        for rule in self._scenario.rules:
            ids += [m for m in rule.match.model if not any(c in m for c in "*?[")]
        ids = list(dict.fromkeys(ids))
        data = [
            {
                "id": m,
                "object": "model",
                "created": 0,
                "owned_by": "skillopt-scripted",
                "type": "model",
                "display_name": m,
                "created_at": "2023-11-14T22:13:20Z",
            }
            for m in ids
        ]
        return {"object": "list", "data": data, "has_more": False, "first_id": ids[0], "last_id": ids[-1]}

    def _wait(self, delay_s: float) -> bool:
        """Sleep for a scripted delay; False if the server is stopping meanwhile."""
        if delay_s <= 0:
            return True
        return not self._stopping.wait(delay_s)

    # ----------------------------------------------------------------- replies

    def _send_json(
        self,
        h: _Handler,
        rec: dict[str, Any],
        status: int,
        payload: Any,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Record the request, then send a JSON (or text) reply."""
        self._record(RecordedRequest(status=status, **rec))
        send_body(h, status, payload, headers)

    def _reply_error(
        self,
        h: _Handler,
        rec: dict[str, Any],
        api: str,
        status: int,
        message: str,
        *,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        rec = {**rec, "error": message}
        payload = body if body is not None else error_body(api, status, message)
        self._send_json(h, rec, status, payload, headers)


def _route(method: str, path: str) -> tuple[str | None, ModuleType | None]:
    """(kind, API module) for a request; kind None means no route (404)."""
    if method in ("GET", "HEAD") and path in _PROBES:
        return "probe", None
    if method == "GET" and path.endswith("/models"):
        return "models", None
    if method != "POST":
        return None, None
    if path.endswith("/messages/count_tokens"):
        return "count_tokens", anthropic_messages
    for suffix, module in _API_ROUTES:
        if path.endswith(suffix):
            return module.API, module
    return None, None


def _scripted_request(
    module: ModuleType, method: str, path: str, query: str, headers: Mapping[str, str], body: dict[str, Any]
) -> ScriptedRequest:
    parsed = module.parse(body)
    return ScriptedRequest(
        api=module.API,
        method=method,
        path=path,
        query=query,
        headers=headers,
        body=body,
        model=parsed.model,
        stream=parsed.stream,
        system=parsed.system,
        messages=parsed.messages,
        tools=parsed.tools,
        turn=parsed.turn,
    )
