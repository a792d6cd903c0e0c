"""The WebUI's door: who may use it, from where, and how actions are protected.

* **Loopback by default.** On 127.0.0.1/::1/localhost without a token, requests must name a
  loopback ``Host`` (so a web page elsewhere cannot reach the UI through DNS rebinding).
* **A token for anything else.** ``skillopt ui`` refuses to listen on another address without
  one (:func:`check_bind`). With a token, every request but the login page and static files
  carries it: the ``Authorization: Bearer`` header, or the session cookie that ``/login`` sets
  (HttpOnly, SameSite=Strict; derived from the token, compared in constant time).
* **Actions** (POST) take JSON with a same-origin ``Origin`` when the browser sends one: a
  cross-site form cannot send ``application/json`` without a CORS preflight, which is never
  granted, so another site cannot launch or stop runs through a logged-in browser.
* Every response gets a strict Content-Security-Policy (scripts and styles from the UI only),
  ``nosniff`` and ``frame-ancestors 'none'``.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import urlsplit

from skillopt.errors import ConfigError

__all__ = ["COOKIE", "SecurityMiddleware", "check_bind", "is_loopback", "session_value"]

COOKIE = "skillopt_ui"
_OPEN_PATHS = ("/login", "/static/")
_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def is_loopback(host: str) -> bool:
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse to serve a non-loopback address without a token.

    Raises:
        ConfigError: saying how to give one.
    """
    if not is_loopback(host) and not token:
        raise ConfigError(
            f"refusing to listen on {host} without a token: anyone who reaches it could launch runs. "
            "Give one with --token-file FILE or SKILLOPT_UI_TOKEN (e.g. python -c 'import secrets; "
            "print(secrets.token_urlsafe(32))' > FILE), or listen on 127.0.0.1 (the default)"
        )


def session_value(token: str) -> str:
    """The cookie value for ``token`` (not the token itself)."""
    return hmac.new(token.encode(), b"skillopt-ui-session", hashlib.sha256).hexdigest()


def _header(scope: Scope, name: bytes) -> str:
    for key, value in scope.get("headers") or []:
        if key == name:
            return value.decode("latin-1")
    return ""


class SecurityMiddleware:
    """ASGI middleware applying the rules in the module docstring."""

    def __init__(self, app: Any, *, token: str | None, bind_host: str) -> None:
        self.app = app
        self.token = token or None
        self.check_host = self.token is None and is_loopback(bind_host)

    def _authorized(self, scope: Scope) -> bool:
        if self.token is None:
            return True
        auth = _header(scope, b"authorization")
        if auth.startswith("Bearer ") and hmac.compare_digest(auth[7:].encode(), self.token.encode()):
            return True
        cookie = SimpleCookie()
        try:
            cookie.load(_header(scope, b"cookie"))
        except Exception:  # a malformed cookie header is no credential
            return False
        got = cookie.get(COOKIE)
        return got is not None and hmac.compare_digest(got.value.encode(), session_value(self.token).encode())

    async def _refuse(self, send: Send, status: int, message: str, *, location: str = "") -> None:
        headers = [(b"content-type", b"application/json"), *_HEADERS]
        if location:
            headers.append((b"location", location.encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": json.dumps({"error": message}).encode()})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path, method = scope.get("path", ""), scope.get("method", "GET")
        if self.check_host:
            host = _header(scope, b"host")
            name = urlsplit(f"//{host}").hostname or ""
            if not is_loopback(name):
                await self._refuse(send, 421, f"host {host!r} is not served here (loopback only)")
                return
        if not path.startswith(_OPEN_PATHS) and not self._authorized(scope):
            if method == "GET" and "text/html" in _header(scope, b"accept"):
                await self._refuse(send, 303, "login required", location="/login")
            else:
                await self._refuse(send, 401, "a token is required: log in at /login")
            return
        if method not in ("GET", "HEAD") and path != "/login":
            origin = _header(scope, b"origin")
            host = _header(scope, b"host")
            if origin and urlsplit(origin).netloc != host:
                await self._refuse(send, 403, "cross-origin request refused")
                return
            if not _header(scope, b"content-type").startswith("application/json"):
                await self._refuse(send, 415, "actions take application/json")
                return

        async def send_with_headers(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *_HEADERS]
            await send(message)

        await self.app(scope, receive, send_with_headers)
