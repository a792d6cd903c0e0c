"""The HTTP listener every HTTP API of a host and of the fleet's front serves with
(``sandbox.server.fusion_http.HttpApi``: Starlette on uvicorn), over a real socket: its own
limits and refusals, each answered as JSON ``{"detail": ...}``. Only what a POST does is the
test's (it holds its request until released)."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator

import httpx
import pytest

from sandbox.server import fusion_http
from sandbox.server.http_protocol import MAX_HEAD_BYTES
from tests.sandbox.holding_api import Holding


@pytest.fixture
def api() -> Iterator[Holding]:
    server = Holding(listen="127.0.0.1:0", max_connections=1)
    try:
        yield server
    finally:
        server.release.set()
        server.close()


def test_requests_past_the_limit_get_503_and_the_slot_comes_back(api):
    url = f"http://127.0.0.1:{api.port}"
    first: list[httpx.Response] = []
    holder = threading.Thread(target=lambda: first.append(httpx.post(f"{url}/run_code", content=b"{}")))
    holder.start()
    assert api.entered.acquire(timeout=30)
    r = httpx.post(f"{url}/run_jupyter", content=b"{}", timeout=30)
    assert r.status_code == 503 and r.headers["retry-after"] == "1"
    assert "too many connections" in r.json()["detail"]
    api.release.set()
    holder.join(30)
    assert first[0].status_code == 200
    r = httpx.post(f"{url}/run_jupyter", content=b"[]", timeout=30)
    assert r.status_code == 200 and r.json() == {"route": "/run_jupyter", "caller": "", "body": "[]"}


def test_the_token_prefix_leaves_the_path_and_refusals_are_json(api):
    api.release.set()
    url = f"http://127.0.0.1:{api.port}"
    r = httpx.post(f"{url}/t/tok/run_code/", content=b"x", timeout=30)
    assert r.json() == {"route": "/run_code", "caller": "tok", "body": "x"}
    r = httpx.post(f"{url}/run_code", content=b"x", headers={"Authorization": "Bearer hdr"}, timeout=30)
    assert r.json()["caller"] == "hdr"
    r = httpx.post(f"{url}/t/wrong/run_code", content=b"x", timeout=30)
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    r = httpx.get(f"{url}/run_code", timeout=30)
    assert r.status_code == 405 and r.headers["allow"] == "POST" and "GET" in r.json()["detail"]
    r = httpx.post(f"{url}/t/tok/nothing", content=b"x", timeout=30)
    assert r.status_code == 404 and "/nothing" in r.json()["detail"] and "tok" not in r.text
    assert httpx.get(f"{url}/v1/ping", timeout=30).json() == "pong"
    r = httpx.post(f"{url}/run_code", content=iter([b"chunked"]), timeout=30)
    assert r.status_code == 411 and "Content-Length" in r.json()["detail"]


def test_a_body_that_stops_coming_is_408(api, monkeypatch):
    monkeypatch.setattr(fusion_http, "BODY_IDLE_S", 0.5)
    with socket.create_connection(("127.0.0.1", api.port), timeout=30) as sock:
        sock.sendall(b"POST /run_code HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" + b"{" * 10)
        answer = b""
        while chunk := sock.recv(65536):  # the listener answers, then closes the connection
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408") and b"connection: close" in head.lower()
    assert "stopped coming" in json.loads(body)["detail"]


def test_a_head_past_the_bound_is_refused_before_it_fills_memory(api):
    api.release.set()
    with socket.create_connection(("127.0.0.1", api.port), timeout=30) as sock:
        sock.sendall(b"POST /run_code HTTP/1.1\r\nHost: x\r\nX-Big: ")
        answer = b""
        with contextlib.suppress(ConnectionError):  # refused while it still sends
            for _ in range(16 * MAX_HEAD_BYTES // 65536):
                sock.sendall(b"a" * 65536)
        with contextlib.suppress(ConnectionError):
            while chunk := sock.recv(65536):
                answer += chunk
    assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
    r = httpx.post(f"http://127.0.0.1:{api.port}/run_code", content=b"{}", timeout=30)
    assert r.status_code == 200  # the listener goes on


def test_an_ipv6_address_binds():
    server = Holding(listen="[::1]:0")  # the loopback's IPv6 address: every CI machine has it
    try:
        server.release.set()
        r = httpx.post(f"http://[::1]:{server.port}/run_code", content=b"6", timeout=30)
        assert r.json()["body"] == "6"
    finally:
        server.close()
