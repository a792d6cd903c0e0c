"""``docker/compose.yaml`` for real, with Debian's docker-compose (1.29): three sandbox
services come up healthy, a short keyless training run goes over them, an exec agent runs in
one of them, and ``down`` leaves nothing behind (service containers, rollout containers,
networks, firewall rules, per-container state).

The services get provider profiles the way a real fleet does (the providers file as a compose
secret); the profiles point at this test's simulation server, which the services reach on the
host's loopback (they share the host's network namespace, see compose.yaml). A unique project
name, host-id prefix, state root and ports keep a developer's own fleet untouched.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from controller.client.sandbox_client import ChannelConfig, SandboxClient
from sandbox.runtime.docker.engine import list_containers
from sandbox.runtime.docker.network import network_name
from sandbox.runtime.labels import LABEL_HOST
from skillopt.testing.simulation import SIM_ANTHROPIC_PROVIDER, SIM_PROVIDER, SIM_TARGET, simulation_server
from skillopt.types import Limits, ModelSpec
from tests.sandbox.conftest import request_for

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker" / "compose.yaml"


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _compose(
    env: dict[str, str], project: str, *args: str, timeout: int = 300
) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["docker-compose", "-p", project, "-f", str(COMPOSE), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _wait_healthy(
    client: docker.DockerClient, project: str, n: int, since: float, timeout_s: float
) -> set[str]:
    """Names of the project's containers that reported healthy: waits on the engine's
    ``health_status`` events (replayed from ``since``), not by polling."""
    events = client.events(
        since=int(since), filters={"label": f"com.docker.compose.project={project}"}, decode=True
    )
    timer = threading.Timer(timeout_s, events.close)
    timer.start()
    healthy: set[str] = set()
    try:
        for ev in events:
            if ev.get("status", ev.get("Action", "")) == "health_status: healthy":
                healthy.add(ev["Actor"]["Attributes"]["name"])
                if len(healthy) >= n:
                    break
    except Exception:  # the timer closed the stream
        pass
    finally:
        timer.cancel()
        events.close()
    return healthy


@pytest.fixture
def compose_env() -> Iterator[tuple[dict[str, str], str, Path, list[int], str]]:
    tag = uuid.uuid4().hex[:6]
    root = Path(tempfile.mkdtemp(prefix="so-cmp-", dir="/tmp"))  # short: unix socket paths
    project = f"skillopt-test-{tag}"
    prefix = f"cmp{tag}"
    ports = _free_ports(6)  # gRPC, then metrics
    (root / "token").write_text(uuid.uuid4().hex)
    env = {
        **os.environ,
        "SKILLOPT_FLEET_TOKEN_FILE": str(root / "token"),
        "SKILLOPT_FLEET_PROVIDERS_FILE": str(root / "providers.yaml"),
        "SKILLOPT_FLEET_STATE_ROOT": str(root / "state"),
        "SKILLOPT_FLEET_HOST_PREFIX": prefix,
        "SKILLOPT_FLEET_CAPACITY": "2",
        **{f"SKILLOPT_FLEET_PORT_{i + 1}": str(p) for i, p in enumerate(ports[:3])},
        **{f"SKILLOPT_FLEET_METRICS_PORT_{i + 1}": str(p) for i, p in enumerate(ports[3:])},
    }
    try:
        yield env, project, root, ports, prefix
    finally:
        _compose(env, project, "down", "--timeout", "60")
        shutil.rmtree(root, ignore_errors=True)


def test_compose_fleet_trains_runs_exec_agents_and_leaves_nothing(docker_client, compose_env):
    env, project, root, ports, prefix = compose_env
    hosts = [f"{prefix}-{i}" for i in (1, 2, 3)]
    # The service image must hold this checkout's code (no-op when it does).
    built = subprocess.run(
        ["bash", str(REPO / "docker" / "build.sh"), "--only", "service"], capture_output=True, text=True
    )
    assert built.returncode == 0, built.stderr[-3000:]
    with simulation_server() as sim:
        (root / "providers.yaml").write_text(
            yaml.safe_dump(
                {
                    "providers": {
                        SIM_PROVIDER: {
                            "kind": "openai_compatible",
                            "base_url": sim.base_url,
                            "max_retries": 0,
                        },
                        SIM_ANTHROPIC_PROVIDER: {
                            "kind": "anthropic",
                            "base_url": sim.anthropic_base_url,
                            "max_retries": 0,
                        },
                    }
                }
            )
        )
        t_up = time.monotonic()
        since = time.time() - 1
        up = _compose(env, project, "up", "-d")
        assert up.returncode == 0, up.stderr[-3000:]
        healthy = _wait_healthy(docker_client, project, 3, since, timeout_s=180)
        assert len(healthy) == 3, (healthy, _compose(env, project, "logs", "--tail", "30").stdout[-4000:])
        up_s = time.monotonic() - t_up

        endpoints = ",".join(f"127.0.0.1:{p}" for p in ports[:3])
        out = root / "run"
        t_train = time.monotonic()
        res = subprocess.run(
            [
                sys.executable, "-m", "controller.cli", "train", "--config", "spreadsheetbench_demo",
                "--simulate", "on", "--endpoints", endpoints, "--out", str(out),
                "--set", f"sandbox.token_file={root / 'token'}", "--set", "train.num_epochs=1",
                "--set", "evaluation.eval_test=false",
                # One step over the train split, gated on 3 selection items: 16 rollouts over
                # the three hosts, enough to show placement and learning.
                "--set", "train.batch_size=10", "--set", "evaluation.sel_env_num=3",
            ],
            cwd=REPO, capture_output=True, text=True, timeout=900, env={**os.environ, "OPENAI_API_KEY": ""},
        )  # fmt: skip
        train_s = time.monotonic() - t_train
        assert res.returncode == 0, res.stderr[-4000:]
        summary = json.loads((out / "summary.json").read_text())
        assert summary["mode"]["simulated"] is True
        assert set(summary["sandbox_hosts"]) <= set(hosts) and len(summary["sandbox_hosts"]) >= 2
        assert summary["best_selection_hard"] > summary["baseline_selection_hard"]

        # Exec agents work in compose: the firewalled gateway network exists in the host's
        # network namespace, and a Codex rollout goes through it.
        token = (root / "token").read_text()
        from skillopt.envs.spreadsheetbench.loader import SAMPLE_ROOT, SpreadsheetBenchData

        sample = SpreadsheetBenchData(SAMPLE_ROOT)
        with SandboxClient(ChannelConfig(address=f"127.0.0.1:{ports[0]}", token=token)) as client:
            desc = client.describe()
            assert "spreadsheetbench/codex_exec" in desc.agents, dict(desc.unavailable_agents)
            assert "spreadsheetbench/claude_code_exec" in desc.agents
            req = dataclasses.replace(
                request_for(sample, "32255", agent="codex_exec"),
                model=ModelSpec(provider=SIM_PROVIDER, model=SIM_TARGET),
                limits=Limits(wall_time_s=180, exec_timeout_s=60),
            )
            row = client.run(req, timeout_s=240)
        assert row.infra_error is None, (row.fail_reason, row.infra_error)
        assert row.agent_ok and row.host == hosts[0]
        # Each service serves its Prometheus metrics (--metrics-listen): the fleet's rollouts,
        # the Codex rollout on the first host.
        scored: list[dict[str, float]] = []  # per host: agent -> scored spreadsheetbench rollouts
        for port in ports[3:]:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
                text = reply.read().decode()
            scored.append(
                {
                    s.labels["agent"]: s.value
                    for f in text_string_to_metric_families(text)
                    for s in f.samples
                    if s.name == "skillopt_rollouts_total"
                    and s.labels["env"] == "spreadsheetbench"
                    and s.labels["outcome"] == "scored"
                }
            )
        assert sum(sum(host.values()) for host in scored) >= 2, scored
        assert scored[0].get("codex_exec") == 1.0, scored

    t_down = time.monotonic()
    down = _compose(env, project, "down", "--timeout", "60")
    down_s = time.monotonic() - t_down
    assert down.returncode == 0, down.stderr[-3000:]
    # Nothing left: service containers, rollout containers, networks, firewall rules, state.
    assert not list_containers(docker_client, f"com.docker.compose.project={project}")
    for host in hosts:
        assert not list_containers(docker_client, f"{LABEL_HOST}={host}"), host
        assert not docker_client.networks.list(names=[network_name(host)]), host
        state = root / "state" / host
        assert state.is_dir() and not any((state / "c").iterdir()), sorted(
            p.name for p in (state / "c").iterdir()
        )
    assert not docker_client.networks.list(filters={"label": f"com.docker.compose.project={project}"})
    rules = subprocess.run(["iptables", "-w", "-S", "INPUT"], capture_output=True, text=True).stdout
    assert not [line for line in rules.splitlines() if any(network_name(h) in line for h in hosts)]
    print(f"compose fleet: up+healthy {up_s:.1f}s, train {train_s:.1f}s, down {down_s:.1f}s")
    with contextlib.suppress(OSError):
        (root / "timings.json").write_text(json.dumps({"up_s": up_s, "train_s": train_s, "down_s": down_s}))
