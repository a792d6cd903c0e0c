"""The HTTP listener's memory bound: request bodies held at once, across connections, stay
within ``max_buffered_bytes`` (a body that would exceed it is refused unread with a 503 and
``Retry-After``), so many connections cannot add up to the machine's memory. The listener is
the real one, over a real socket; only what a POST does is the test's (it holds its body
until released)."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from email.message import Message
from typing import Any

import pytest

from tests.sandbox.holding_api import Holding


def _post(port: int, body: bytes) -> tuple[int, Message, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("POST", "/run_code", body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, resp.headers, resp.read()  # header names: any case (RFC 9110)
    finally:
        conn.close()


@pytest.fixture
def api() -> Iterator[Holding]:
    server = Holding(listen="127.0.0.1:0", max_body_bytes=1000, max_buffered_bytes=1500)
    try:
        yield server
    finally:
        server.release.set()
        server.close()


def test_bodies_held_at_once_stay_within_the_budget_and_come_back_after(api):
    first: list[Any] = []
    holder = threading.Thread(target=lambda: first.append(_post(api.port, b"x" * 900)))
    holder.start()
    assert api.entered.acquire(timeout=30)  # the first body is held by its POST
    status, headers, data = _post(api.port, b"y" * 900)
    assert status == 503 and headers.get("Retry-After") == "1" and b"request bodies" in data
    assert _post(api.port, b"z" * 1001)[0] == 413  # over the per-body limit: refused as before
    api.release.set()
    holder.join(30)
    assert first[0][0] == 200
    # The first body's room came back: the same body fits again.
    status, _, data = _post(api.port, b"y" * 900)
    assert status == 200 and json.loads(data)["body"] == "y" * 900
