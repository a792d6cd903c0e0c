"""The gateway's HTTP front end against a hostile client inside a rollout container (issue 10,
item 1): oversize bodies (declared, chunked, decompressed), too many or too large headers,
too many requests per rollout, slow and idle connections. Each is refused with an HTTP error
or a closed connection, the host's memory stays bounded, and a real exec-agent rollout that
runs meanwhile is unaffected."""

from __future__ import annotations

import json
import threading
import uuid

import pytest

from sandbox.gateway.connection import GatewayLimits
from sandbox.runtime.lease import LeasedSandbox
from skillopt.testing.fixtures.spreadsheetbench import solution_code
from tests.sandbox.conftest import rss_bytes, start_service
from tests.sandbox.test_exec_agents import TASK, exec_request, script

MiB = 1024 * 1024
LIMITS = GatewayLimits(
    max_body_bytes=4 * MiB,
    max_decoded_bytes=8 * MiB,
    max_headers=64,
    max_header_bytes=16 * 1024,
    max_connections_per_client=8,
    max_requests_per_session=40,
    header_timeout_s=3.0,
    idle_timeout_s=3.0,
    body_timeout_s=5.0,
)

ATTACK = r"""
import json, select, socket, sys, time, zlib
host, port, token = sys.argv[1], int(sys.argv[2]), sys.argv[3]
report = {}

def conn():
    s = socket.create_connection((host, port), timeout=30)
    return s

def status_of(s):
    # The status line of the answer, or 'closed' when the server hung up without one.
    data = b""
    try:
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    except OSError as exc:
        return "error:" + type(exc).__name__
    return data.split(b"\r\n", 1)[0].decode(errors="replace").split(" ")[1] if data.startswith(b"HTTP/") else "closed"

head = ("POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\nauthorization: Bearer " + token + "\r\n"
        "content-type: application/json\r\n")

# 1. a declared body of 1 GiB: refused before it is read
s = conn(); s.sendall((head + "content-length: 1073741824\r\n\r\n").encode() + b"{" * 65536)
report["declared_1gib"] = status_of(s); s.close()

# 2. a chunked body that never ends: cut at the cap
s = conn(); s.sendall((head + "transfer-encoding: chunked\r\n\r\n").encode())
sent = 0
try:
    piece = b"x" * 65536
    while sent < 64 * 2**20 and not select.select([s], [], [], 0)[0]:  # stop once answered
        s.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n"); sent += len(piece)
except OSError:
    pass
report["chunked_sent_mib"] = sent // 2**20
report["chunked_endless"] = status_of(s); s.close()

# 3. a gzip bomb: 1 GiB of zeros in about 1 MB
bomb = zlib.compressobj(9, zlib.DEFLATED, 31)
payload = b"".join(bomb.compress(b"\0" * 2**20) for _ in range(1024)) + bomb.flush()
s = conn(); s.sendall((head + "content-encoding: gzip\r\ncontent-length: %d\r\n\r\n" % len(payload)).encode() + payload)
report["gzip_bomb_bytes"] = len(payload)
report["gzip_bomb"] = status_of(s); s.close()

# 4. too many header fields, and one huge header
s = conn(); s.sendall((head + "".join("x-h%d: v\r\n" % i for i in range(500)) + "content-length: 2\r\n\r\n{}").encode())
report["many_headers"] = status_of(s); s.close()
s = conn(); s.sendall((head + "x-big: " + "a" * 200000 + "\r\ncontent-length: 2\r\n\r\n{}").encode())
report["huge_header"] = status_of(s); s.close()

# 5. more requests than one rollout may make (keep-alive, one after another)
codes = []
s = conn()
for i in range(60):
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "flood %d" % i}]}).encode()
    s.sendall((head + "content-length: %d\r\n\r\n" % len(body)).encode() + body)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    if not data:
        s.close(); s = conn(); continue
    codes.append(data.split(b" ", 2)[1].decode())
    hdrs = data.split(b"\r\n\r\n", 1)[0].lower()
    rest = data.split(b"\r\n\r\n", 1)[1]
    if b"content-length:" in hdrs:
        n = int(hdrs.split(b"content-length:")[1].split(b"\r\n")[0])
        while len(rest) < n:
            rest += s.recv(65536)
    else:  # chunked: read to the terminating chunk
        while not rest.endswith(b"0\r\n\r\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            rest += chunk
    if b"connection: close" in hdrs:
        s.close(); s = conn()
s.close()
report["per_session_codes"] = codes

# 6. slowloris: many connections trickling a request head, plus idle ones
socks, refused = [], 0
for i in range(20):
    try:
        t = conn(); t.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\n"); socks.append(t)
    except OSError:
        refused += 1
time.sleep(0.5)
answers = []
for t in socks:
    t.settimeout(30)
    answers.append(status_of(t))
report["slow_answers"] = answers
print("FLOOD-REPORT " + json.dumps(report))
"""


@pytest.fixture(scope="module")
def flood_service(docker_client, scripted):
    yield from start_service(scripted, capacity=3, pool_size=1, server_kw={"gateway_limits": LIMITS})


def test_gateway_flood_from_a_container(flood_service, scripts, sample, capsys):
    svc = flood_service
    service = svc.running.service
    gateway_url = service.gateway_url
    assert gateway_url is not None
    host, port = gateway_url.removeprefix("http://").split(":")
    session = service.gateway.open_session(f"flood/{uuid.uuid4().hex[:6]}", provider="scripted", model="m")
    # A real exec-agent rollout runs meanwhile, in another container.
    marker = sample.task(TASK).instruction[:120]
    scripts.scripts[marker] = script(solution_code(TASK))
    box: dict = {}

    def rollout() -> None:
        box["row"] = svc.client.run(exec_request(sample, "codex_exec", "scripted"), timeout_s=240)

    rss_before = rss_bytes()
    handle = service.pools.acquire(service.exec_spec, timeout_s=120)
    try:
        attacker = LeasedSandbox(service.runtime, handle, rollout_id="flood/attacker")
        attacker.write_file("attack.py", ATTACK.encode())
        t = threading.Thread(target=rollout)
        t.start()
        out = attacker.run_command(["python3", "attack.py", host, port, session.token], timeout_s=180)
        t.join(240)
    finally:
        service.pools.release(handle)
        service.gateway.close_session(session)
        del scripts.scripts[marker]
    rss_after = rss_bytes()
    assert "FLOOD-REPORT " in out.stdout_tail, (out.stdout_tail[-2000:], out.stderr_tail[-2000:])
    report = json.loads(out.stdout_tail.split("FLOOD-REPORT ", 1)[1])
    assert report["declared_1gib"] == "413", report
    assert report["chunked_endless"] == "413" and report["chunked_sent_mib"] < 64, report
    assert report["gzip_bomb"] == "413", report
    assert report["many_headers"] == "431", report
    assert report["huge_header"] == "431", report
    codes = report["per_session_codes"]
    assert codes.count("429") >= 60 - LIMITS.max_requests_per_session and "429" not in codes[:39], codes
    slow = report["slow_answers"]
    # Beyond the per-client cap: an immediate 503; the rest are cut off when their head is late.
    assert slow.count("503") >= 20 - LIMITS.max_connections_per_client, slow
    assert all(a in ("503", "408", "closed") for a in slow), slow
    # The concurrent rollout was not affected.
    row = box["row"]
    assert row.infra_error is None and row.hard == 1.0, (row.fail_reason, row.metrics)
    # Nothing stays open or reserved, and the host's memory stayed bounded (the attack sent
    # over 70 MiB and asked for 1 GiB twice).
    front = svc.running.front
    assert front is not None
    assert front.stats()["inflight_body_bytes"] == 0
    growth = rss_after - rss_before
    with capsys.disabled():
        print(
            f"\n[figures] gateway flood: host RSS {rss_before / MiB:.0f} MiB before, "
            f"{rss_after / MiB:.0f} MiB after ({growth / MiB:+.0f} MiB)"
        )
    assert growth < 160 * MiB, growth
