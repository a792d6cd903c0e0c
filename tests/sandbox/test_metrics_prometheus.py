"""``skillopt serve --metrics-listen``, scraped by a real Prometheus (Debian's ``prometheus``):
a host in a subprocess serves rollouts (scored, and one its provider refused) and sessions (one
live, one refused for room); Prometheus, started here on a free port with a generated config,
scrapes it, and its HTTP query API returns the series with the values served."""

from __future__ import annotations

import json
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from controller.client.sandbox_client import ChannelConfig, SandboxClient
from controller.client.sessions import SandboxSession, SessionEndpoints
from controller.embedded import spawn_service, wait_listening
from skillopt.errors import SessionLimit
from skillopt.testing.fixtures.spreadsheetbench import solution_code
from tests.sandbox.conftest import fenced, request_for

PROMETHEUS = shutil.which("prometheus")
pytestmark = pytest.mark.skipif(PROMETHEUS is None, reason="needs Debian's prometheus (scripts/setup.sh)")

SOLVED, WRONG, REFUSED = "32255", "66-24", "42354"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Scraped:
    token: str
    metrics_url: str
    query: Callable[[str], list[dict[str, Any]]]


def _poll(
    query: Callable[[str], list[dict[str, Any]]], promql: str, want: Callable[[dict[str, float]], bool]
):
    """Poll Prometheus until ``promql``'s result (labels → value) satisfies ``want``."""
    deadline = time.monotonic() + 60  # a loaded machine's scrapes can lag; not a timing assertion
    got: dict[str, float] = {}
    while time.monotonic() < deadline:
        got = {json.dumps(r["metric"], sort_keys=True): float(r["value"][1]) for r in query(promql)}
        if want(got):
            return got
        time.sleep(0.2)  # a poll interval, not a synchronisation: the condition is what ends it
    raise AssertionError(f"{promql}: {got}")


def _served(port: int, token: str, sample, scripts) -> None:
    """Three rollouts (solved, wrong, the provider refusing the key) and two session creates."""
    scripts.scripts[sample.task(SOLVED).instruction[:120]] = [fenced(solution_code(SOLVED))]
    scripts.scripts[sample.task(WRONG).instruction[:120]] = [fenced("print('no')\n")]
    scripts.scripts[sample.task(REFUSED).instruction[:120]] = [{"error": {"status": 401}}]
    with SandboxClient(ChannelConfig(address=f"127.0.0.1:{port}", token=token)) as client:
        rows = [client.run(request_for(sample, tid), timeout_s=120) for tid in (SOLVED, WRONG, REFUSED)]
    assert rows[0].hard == 1.0 and rows[1].infra_error is None and rows[1].hard == 0.0
    assert rows[2].infra_error is not None and rows[2].infra_error.kind == "model_auth"
    where = SessionEndpoints(endpoints=(f"127.0.0.1:{port}",), token=token)
    session = SandboxSession.create(where)
    assert session.exec(["echo", "hi"]).stdout == b"hi\n"
    with pytest.raises(SessionLimit):
        SandboxSession.create(where)  # --max-sessions 1: refused for room


@pytest.fixture(scope="module")
def scraped(docker_client, scripted, _session_scripts, sample, tmp_path_factory) -> Iterator[Scraped]:
    tmp = tmp_path_factory.mktemp("prom")
    token = "metrics-" + uuid.uuid4().hex
    (tmp / "token").write_text(token + "\n")
    metrics_port, prom_port = free_port(), free_port()
    host = spawn_service(
        [
            "--listen", "127.0.0.1:0",
            "--token-file", str(tmp / "token"),
            "--host-id", f"test-metrics-{uuid.uuid4().hex[:6]}",
            "--state-dir", str(tmp / "state"),
            "--capacity", "2",
            "--pool-size", "1",
            "--max-sessions", "1",
            "--exec-agents", "off",
            "--grader-workers", "0",  # grading in the rollout's thread: no worker processes to start
            "--provider", f"scripted=openai_compatible,base_url={scripted.base_url}",
            "--metrics-listen", f"127.0.0.1:{metrics_port}",
            "--drain-grace", "3",
        ]
    )  # fmt: skip
    config = tmp / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, scrape_timeout: 1s}\n"
        "scrape_configs:\n"
        f"  - {{job_name: skillopt, static_configs: [{{targets: ['127.0.0.1:{metrics_port}']}}]}}\n"
    )
    prom = subprocess.Popen(
        [
            str(PROMETHEUS),
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{prom_port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(tmp / "prometheus.log").open("w"),
    )

    def query(promql: str) -> list[dict[str, Any]]:
        url = f"http://127.0.0.1:{prom_port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        try:
            with urllib.request.urlopen(url, timeout=5) as reply:
                return list(json.load(reply)["data"]["result"])
        except OSError:  # not listening yet
            assert prom.poll() is None, (tmp / "prometheus.log").read_text()[-2000:]
            return []

    scripts_before = dict(_session_scripts.scripts)
    try:
        port = wait_listening(host, 120)
        _served(port, token, sample, _session_scripts)
        yield Scraped(token, f"http://127.0.0.1:{metrics_port}/metrics", query)
    finally:
        _session_scripts.scripts.clear()
        _session_scripts.scripts.update(scripts_before)
        prom.send_signal(signal.SIGTERM)
        host.send_signal(signal.SIGTERM)
        prom.wait(30)
        host.wait(60)


def _equals(expected: dict[str, float]) -> Callable[[dict[str, float]], bool]:
    return lambda got: got == expected


def test_prometheus_scrapes_the_rollouts_served(scraped):
    q = scraped.query
    _poll(q, 'up{job="skillopt"}', lambda got: list(got.values()) == [1.0])
    # Scrapes during the fixture's rollouts saw fewer: each condition is polled until it holds.
    _poll(
        q,
        "sum by (outcome) (skillopt_rollouts_total)",
        _equals({'{"outcome": "model_auth"}': 1.0, '{"outcome": "scored"}': 2.0}),
    )
    _poll(
        q,
        'sum(skillopt_rollouts_total{env="spreadsheetbench",agent="codegen_single",outcome="scored"})',
        _equals({"{}": 2.0}),
    )
    for histogram, at_least in (
        ('skillopt_rollout_duration_seconds_count{env="spreadsheetbench"}', 3),
        ("skillopt_rollout_admission_wait_seconds_count", 3),
        ("skillopt_rollout_container_acquire_seconds_count", 3),
        ("skillopt_rollout_first_instruction_seconds_count", 2),
        ("skillopt_rollout_execution_seconds_count", 2),
        ("skillopt_rollout_grading_seconds_count", 1),
        ('skillopt_gateway_model_call_duration_seconds_count{provider="scripted"}', 3),
    ):
        _poll(q, f"sum({histogram})", lambda got, n=at_least: bool(got) and min(got.values()) >= n)
    _poll(
        q,
        "sum by (provider, kind) (skillopt_gateway_errors_total)",
        _equals({'{"kind": "model_auth", "provider": "scripted"}': 1.0}),
    )
    _poll(
        q,
        "sum by (result) (skillopt_gateway_model_calls_total)",
        lambda got: got.get('{"result": "ok"}') == 2.0 and got.get('{"result": "error"}', 0) >= 1.0,
    )
    _poll(
        q,
        "sum by (type) (skillopt_gateway_tokens_total)",
        lambda got: got.get('{"type": "input"}', 0) > 0 and got.get('{"type": "output"}', 0) > 0,
    )


def test_prometheus_scrapes_the_host_state(scraped):
    q = scraped.query
    live = _poll(q, "sum by (tenant) (skillopt_sessions)", lambda got: list(got.values()) == [1.0])
    (labels,) = [json.loads(k) for k in live]
    assert re.fullmatch(r"t-[0-9a-f]{12}", labels["tenant"])  # the token's hash only
    for name, value in (
        ("skillopt_sessions_created_total", 1.0),
        ("skillopt_sessions_refused_total", 1.0),
        ("skillopt_sessions_max", 1.0),
        ("skillopt_rollout_capacity", 2.0),
        ("skillopt_host_serving", 1.0),
        ("skillopt_rollouts_running", 0.0),
        ("max(skillopt_pool_target_containers)", 1.0),
    ):
        _poll(q, f"sum({name})", _equals({"{}": value}))
    _poll(
        q,
        "sum by (state) (skillopt_pool_containers)",
        lambda got: len(got) == 4 and got['{"state": "leased"}'] >= 1.0,  # the live session's container
    )
    for present in (
        "skillopt_blob_cache_bytes",
        "skillopt_blob_cache_hits_total",
        "skillopt_blob_cache_misses_total",
        'skillopt_engine_errors_total{kind="unreachable"}',
        "skillopt_host_info",
        "skillopt_pool_acquisitions_total",
    ):
        _poll(q, present, lambda got: bool(got))


def test_the_exposition_holds_nothing_secret(scraped, sample):
    with urllib.request.urlopen(scraped.metrics_url, timeout=10) as reply:
        text = reply.read().decode()
    assert "skillopt_rollout_duration_seconds_bucket" in text
    assert scraped.token not in text
    for tid in (SOLVED, WRONG, REFUSED):
        assert sample.task(tid).instruction[:40] not in text
