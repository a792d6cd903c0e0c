"""``kill -9`` of a controller together with its embedded sandbox leaves the sandbox's containers,
exec-agent network, firewall rules and state dir (with its token) behind: nobody drained. The
next embedded start reaps them; a live embedded sandbox is never touched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import docker

from controller.embedded import embedded_sandbox, reap_dead_embedded
from sandbox.runtime.docker.engine import list_containers
from sandbox.runtime.docker.network import network_name
from sandbox.runtime.labels import LABEL_HOST

REPO = Path(__file__).resolve().parents[2]

_CONTROLLER = """
import sys
from controller.embedded import embedded_sandbox
with embedded_sandbox(capacity=1, pool_size=1) as emb:
    print("EMBEDDED", emb.pid, emb.host_id, flush=True)
    sys.stdin.read()
"""


def _dirs_of(host_id: str) -> list[Path]:
    out = []
    for d in Path("/tmp").glob("so-emb-*"):
        try:
            if (d / "host_id").read_text().strip() == host_id:
                out.append(d)
        except OSError:
            continue  # another sandbox's dir (or one being created)
    return out


def _iptables_rules(name: str) -> list[str]:
    out = subprocess.run(["iptables", "-w", "-S", "INPUT"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if f"skillopt {name}" in line]


def _wait_for_container_start(client: docker.DockerClient, host_id: str, since: float) -> None:
    """Block on Docker's event stream (no polling) until the sandbox started a container."""
    events = client.events(
        since=int(since),
        until=int(time.time()) + 120,
        filters={"type": "container", "event": "start", "label": f"{LABEL_HOST}={host_id}"},
        decode=True,
    )
    try:
        for _ in events:
            return
    finally:
        events.close()
    raise AssertionError(f"the embedded sandbox {host_id} started no container within 120 s")


def test_kill_9_of_controller_and_embedded_sandbox_is_reaped_by_the_next_start(docker_client):
    since = time.time() - 1
    ctl = subprocess.Popen(
        [sys.executable, "-c", _CONTROLLER],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        line = next(line for line in ctl.stdout if line.startswith("EMBEDDED "))
        _, pid_s, host_id = line.split()
        _wait_for_container_start(docker_client, host_id, since)
        state_dirs = _dirs_of(host_id)
        assert len(state_dirs) == 1 and (state_dirs[0] / "token").exists()
        assert docker_client.networks.list(names=[network_name(host_id)])
        assert _iptables_rules(network_name(host_id))
        # Both die at once: nobody drains, nothing is cleaned.
        os.kill(int(pid_s), signal.SIGKILL)
        os.kill(ctl.pid, signal.SIGKILL)
        ctl.wait(30)
    finally:
        if ctl.poll() is None:
            ctl.kill()
    assert list_containers(docker_client, f"{LABEL_HOST}={host_id}")

    # A live embedded sandbox is left alone while the dead one is reaped.
    with embedded_sandbox(capacity=1, pool_size=0) as live:
        assert live.host_id not in reap_dead_embedded()
        assert _dirs_of(live.host_id)
        # (its own start-up already reaped the dead instance)
        assert list_containers(docker_client, f"{LABEL_HOST}={host_id}") == []
        assert docker_client.networks.list(names=[network_name(host_id)]) == []
        assert _iptables_rules(network_name(host_id)) == []
        assert not state_dirs[0].exists()
