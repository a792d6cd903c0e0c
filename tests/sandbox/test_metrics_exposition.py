"""The metrics exposition of ``serve(metrics_listen=...)``, read over HTTP from two real hosts in
this process: Prometheus' naming rules, bounded labels, nothing secret, one registry per host;
the metrics list in docs/observability.md and the Grafana dashboard's queries match what a host
exports; ``skillopt serve`` without the flag never imports prometheus-client and with it
refuses clearly when the package is missing or the address is malformed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from skillopt.envs.registry import available_envs, get_env, load_env_data
from skillopt.testing.fixtures.qa import sim_reply
from skillopt.types import InfraErrorKind, SkillVersion
from tests.sandbox.conftest import start_service
from tests.sandbox.test_qa_rollouts import rollouts_for

REPO = Path(__file__).resolve().parents[2]
PROVIDER_KEY = "provider-key-" + os.urandom(8).hex()  # not a real key, never exported
LABELS = {
    "env", "agent", "outcome", "reason", "provider", "result", "type", "kind",
    "image", "spec", "state", "warm", "tenant", "host", "version", "le",
}  # fmt: skip


def scrape(svc) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{svc.running.metrics_port}/metrics", timeout=10) as r:
        return r.read().decode()


@pytest.fixture(scope="module")
def hosts(docker_client, scripted, _session_scripts, tmp_path_factory) -> Iterator[tuple]:
    """Two hosts with metrics in one process; host A served one searchqa rollout."""
    kw = {"metrics_listen": "127.0.0.1:0"}
    gen_a = start_service(scripted, capacity=2, pool_size=0, provider_key=PROVIDER_KEY, server_kw=kw)
    gen_b = start_service(scripted, capacity=2, pool_size=0, server_kw=kw)
    a, b = next(gen_a), next(gen_b)
    env = get_env("searchqa")
    item = load_env_data("searchqa").split("val")[0]
    marker = item.task.instruction[:100]
    reply = sim_reply("searchqa", item, env.user_prompt(env.parse_task(item.task.attributes)), solved=True)
    _session_scripts.scripts[marker] = [{"text": reply}]
    try:
        (row,) = rollouts_for(a, "searchqa").run(
            [item], SkillVersion(content="# Skill\n"), tmp_path_factory.mktemp("r"), label="eval"
        )
        assert row.infra_error is None and row.hard == 1.0
        yield a, b, item
    finally:
        _session_scripts.scripts.pop(marker, None)
        next(gen_a, None)
        next(gen_b, None)


def families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_names_units_and_bounded_labels(hosts):
    a, _, _ = hosts
    fams = families(scrape(a))
    outcomes = {"scored", "internal"} | {str(k) for k in InfraErrorKind}
    pairs = {(n, agent) for n in available_envs() for agent in get_env(n).agents}
    for name, fam in fams.items():
        assert re.fullmatch(r"skillopt_[a-z_]+", name), name
        if fam.type == "histogram":
            assert name.endswith("_seconds"), name  # the unit in the name
        if fam.type == "counter":
            assert all(s.name.endswith("_total") for s in fam.samples), name  # no _created series
        for sample in fam.samples:
            assert set(sample.labels) <= LABELS, (name, sample.labels)
            labels = sample.labels
            if "outcome" in labels:
                assert labels["outcome"] in outcomes
            if "env" in labels:
                assert (labels["env"], labels["agent"]) in pairs
            if "tenant" in labels:
                assert re.fullmatch(r"t-[0-9a-f]{12}|local", labels["tenant"])
    rollouts = fams["skillopt_rollouts"]
    assert [(s.labels, s.value) for s in rollouts.samples if s.name == "skillopt_rollouts_total"] == [
        ({"env": "searchqa", "agent": "qa", "outcome": "scored"}, 1.0)
    ]
    duration = fams["skillopt_rollout_duration_seconds"]
    assert any(s.name.endswith("_count") and s.value == 1.0 for s in duration.samples)
    calls = fams["skillopt_gateway_model_calls"]
    assert [s.labels for s in calls.samples if s.name.endswith("_total")] == [
        {"provider": "scripted", "result": "ok"}
    ]


def test_nothing_secret_is_exported(hosts):
    a, _, item = hosts
    text = scrape(a)
    for secret in (a.token, PROVIDER_KEY, item.task.instruction[:40], str(item.task.attributes)[:40]):
        assert secret not in text


def test_each_host_has_its_own_registry(hosts):
    a, b, _ = hosts
    assert a.running.metrics_port != b.running.metrics_port
    mine = families(scrape(b))
    assert not [s for s in mine["skillopt_rollouts"].samples if s.name == "skillopt_rollouts_total"]
    (info,) = mine["skillopt_host_info"].samples
    assert info.labels["host"] == b.host_id


def _documented() -> set[str]:
    """Metric names in docs/observability.md's metrics table (its first column)."""
    text = (REPO / "docs" / "observability.md").read_text()
    section = text.split("## Metrics", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `(skillopt_[a-z_]+)`", section, re.M))


def _exported(text: str, *, histogram_series: bool = True) -> set[str]:
    """Every metric a host exports, by the names queries use (counters with ``_total``,
    histograms also by their ``_bucket``, ``_count`` and ``_sum`` series), observed yet or not."""
    names: set[str] = set()
    for f in text_string_to_metric_families(text):
        if f.type == "counter":
            names.add(f.name + "_total")
            continue
        names.add(f.name)
        if f.type == "histogram" and histogram_series:
            names |= {f.name + s for s in ("_bucket", "_count", "_sum")}
    return names


def test_the_docs_list_every_metric_exported(hosts):
    a, _, _ = hosts
    exported = _exported(scrape(a), histogram_series=False)
    assert _documented() == exported


def test_the_grafana_dashboard_queries_only_metrics_we_export(hosts):
    a, _, _ = hosts
    dashboard = json.loads((REPO / "docker" / "grafana" / "skillopt-fleet.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    exprs += [v["definition"] for v in dashboard["templating"]["list"] if "definition" in v]
    used = {m for e in exprs for m in re.findall(r"\b(skillopt_[a-z_]+)", e)}
    exported = _exported(scrape(a))
    assert used and used <= exported, used - exported
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])


def _serve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", "serve", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def test_serve_refuses_a_bad_address_and_imports_prometheus_client_only_with_the_flag():
    # One interpreter: the modules a host runs import without it, and a malformed address is
    # refused before it would be imported (or anything started).
    code = (
        "import sys, sandbox.server.serve, sandbox.server.servicer, sandbox.gateway.core\n"
        "from controller.cli import main\n"
        "assert 'prometheus_client' not in sys.modules, 'imported without the flag'\n"
        "assert main(['serve', '--metrics-listen', '9464']) == 2\n"
        "assert 'prometheus_client' not in sys.modules, 'imported for a refused address'\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "--metrics-listen '9464': expected HOST:PORT" in out.stderr, out.stderr


def test_the_flag_without_prometheus_client_is_refused_with_how_to_install_it(tmp_path):
    missing = tmp_path / "prometheus_client"
    missing.mkdir()
    (missing / "__init__.py").write_text("raise ImportError('not installed here')\n")
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", str(REPO))])
    out = _serve("--metrics-listen", "127.0.0.1:9464", env={"PYTHONPATH": path})
    assert out.returncode == 2 and "pip install 'skillopt[metrics]'" in out.stderr, out.stderr
