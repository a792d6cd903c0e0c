"""A real HTTP listener whose POSTs wait until the test lets them go: for the listener's own
limits (requests in flight, request bodies held at once) and its answers."""

from __future__ import annotations

import threading
from typing import Any

from sandbox.server.fusion_http import HttpApi, HttpRefusal, credential


class Holding(HttpApi):
    """A POST answers what it was sent (its route, caller and body) once
    :attr:`release` is set; :attr:`entered` counts POSTs that reached it. A caller is its
    token; the token ``wrong`` is refused 401."""

    def __init__(self, **kwargs: Any) -> None:
        self.entered = threading.Semaphore(0)
        self.release = threading.Event()
        super().__init__(**kwargs)

    def authorize(self, path: str, authorization: str) -> tuple[Any, str]:
        token, path = credential(path, authorization)
        if token == "wrong":
            raise HttpRefusal(401, "a valid token is required", {"WWW-Authenticate": "Bearer"})
        return token, path

    def post(self, route: str, caller: Any, body: bytes) -> tuple[int, Any]:
        self.entered.release()
        assert self.release.wait(30)
        return 200, {"route": route, "caller": caller, "body": body.decode()}
