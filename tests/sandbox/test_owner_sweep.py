"""Containers whose owning process is gone are swept by any host, whatever their host id:
the owner label, and hosts and CLIs SIGKILLed at random points of creation."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from controller.embedded import spawn_service
from sandbox.runtime.docker.engine import list_containers
from sandbox.runtime.docker.network import network_name
from sandbox.runtime.docker.runtime import DockerRuntime
from sandbox.runtime.labels import LABEL_HOST, LABEL_OWNER
from sandbox.runtime.owner import Owner, current_owner, owner_gone, start_ticks
from sandbox.runtime.spec import RuntimeConfig

REPO = Path(__file__).resolve().parents[2]


def _never(_cid: str) -> str | None:
    raise AssertionError("no engine lookup expected for an owner in this PID namespace")


# -- the owner label (no engine) --------------------------------------------------------------


def test_the_owner_label_round_trips_and_malformed_labels_are_never_gone():
    me = current_owner()
    assert me.pid == os.getpid() and me.start_ticks == start_ticks(os.getpid()) and me.boot_id
    assert Owner.parse(me.label()) == me
    for bad in ("", "o1:x", "o9:a:b:1:2:", "o1:a:b:pid:2:", "garbage"):
        assert Owner.parse(bad) is None
        assert not owner_gone(bad, me, _never)
    assert not owner_gone(None, me, _never)
    assert not owner_gone(me.label(), me, _never)  # this process lives


def test_a_dead_process_a_reused_pid_and_a_zombie_are_gone():
    me = current_owner()
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    alive = Owner(me.boot_id, me.pid_ns, proc.pid, start_ticks(proc.pid) or -1)
    assert not owner_gone(alive.label(), me, _never)
    reused = Owner(me.boot_id, me.pid_ns, proc.pid, alive.start_ticks - 1)  # same PID, other process
    assert owner_gone(reused.label(), me, _never)
    proc.kill()
    proc.stdin.close()
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # dead, not reaped: a zombie
    # A zombie still answers kill(pid, 0) and has its /proc entry.
    assert owner_gone(alive.label(), me, _never)
    proc.wait()
    assert owner_gone(alive.label(), me, _never)


def test_owners_elsewhere_are_decided_by_their_container_or_left_alone():
    me = current_owner()
    in_container = Owner("other-boot", "4026530000", 7, 100, f"{'a' * 64}@2026-12-05T08:00:00Z")
    started = {"a" * 64: "2026-12-05T08:00:00Z"}
    assert not owner_gone(in_container.label(), me, started.get)
    assert owner_gone(in_container.label(), me, {"a" * 64: "2026-12-05T09:00:00Z"}.get)  # restarted
    assert owner_gone(in_container.label(), me, {}.get)  # gone or stopped
    # Another machine (or boot) without a container: nothing here can prove it dead.
    assert not owner_gone(Owner("other-boot", me.pid_ns, 1, 1).label(), me, _never)
    assert not owner_gone(Owner(me.boot_id, "4026530000", 1, 1).label(), me, _never)


# -- hosts and CLIs killed at random points (real engine) -------------------------------------


def _owned_by(docker_client, pids: set[int]) -> list[str]:
    """Containers whose owner label names one of ``pids`` (any host id)."""
    found = []
    for c in list_containers(docker_client, LABEL_OWNER):
        owner = Owner.parse(c.labels.get(LABEL_OWNER, ""))
        if owner is not None and owner.pid in pids:
            found.append(c.name)
    return found


def _networks_and_rules(docker_client, host_ids: set[str]) -> list[str]:
    names = {network_name(h) for h in host_ids}
    rules = subprocess.run(["iptables", "-w", "-S", "INPUT"], capture_output=True, text=True).stdout
    return [n["Name"] for n in docker_client.api.networks() if n["Name"] in names] + [
        line for line in rules.splitlines() if any(f"skillopt {n}" in line for n in names)
    ]


def _sweep_until_clean(sweep, docker_client, pids: set[int], host_ids: set[str]) -> None:
    """Sweep until nothing of the killed owners is left: a create the engine was still serving
    when its client died can land after a sweep (the periodic sweep gets it in production)."""
    deadline = time.monotonic() + 90
    while True:
        sweep()
        left = _owned_by(docker_client, pids) + _networks_and_rules(docker_client, host_ids)
        if not left:
            return
        assert time.monotonic() < deadline, f"not swept: {left}"


def test_hosts_killed_at_random_points_of_creation_leave_an_empty_engine(docker_client, short_tmp):
    token = short_tmp / "token"
    token.write_text(uuid.uuid4().hex)
    pids: set[int] = set()
    host_ids: set[str] = set()
    # Kill once the engine holds N of a host's containers: 0 = during its start-up, 1-2 = while
    # its warm pool of 3 is being created (a create in flight), 3 = started (pool and network).
    for i, wanted in enumerate(random.Random(7).sample(range(4), 4)):
        host_id = f"test-owner-{uuid.uuid4().hex[:6]}"
        proc = spawn_service(
            [
                "--listen", "127.0.0.1:0",
                "--token-file", str(token),
                "--host-id", host_id,
                "--state-dir", str(short_tmp / f"state{i}"),
                "--pool-size", "3",
                "--exec-agents", "auto",
                "--drain-grace", "1",
            ]
        )  # fmt: skip
        try:
            while len(list_containers(docker_client, f"{LABEL_HOST}={host_id}")) < wanted:
                assert proc.poll() is None, "the host exited before it was killed"
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.kill()
            proc.wait(30)
        pids.add(proc.pid)
        host_ids.add(host_id)
    assert _owned_by(docker_client, pids)  # a SIGKILLed host cleans nothing itself

    sweeper = DockerRuntime(
        RuntimeConfig(host_id=f"sweeper-{uuid.uuid4().hex[:6]}", state_dir=str(short_tmp / "sweeper"))
    )
    try:
        _sweep_until_clean(sweeper.reap, docker_client, pids, host_ids)
    finally:
        sweeper.close()


def test_a_killed_cli_leaves_grading_containers_the_next_cli_sweeps(docker_client, tmp_path):
    from sandbox.runtime.fresh import local_grading_sandboxes

    path = tmp_path / "samples.jsonl"
    path.write_text(
        "".join(
            json.dumps({"task_id": f"HumanEval/{i}", "completion": "    while True:\n        pass\n"}) + "\n"
            for i in range(4)
        )
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "controller.cli", "score", "--env", "humaneval", "--samples", str(path), "--workers", "2"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        while not _owned_by(docker_client, {proc.pid}):
            assert proc.poll() is None, "score ended before it held a container"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(30)
    assert _owned_by(docker_client, {proc.pid})  # SIGKILL: no unwinding

    def next_cli() -> None:  # a local grading runtime sweeps as it starts
        with local_grading_sandboxes():
            pass

    _sweep_until_clean(next_cli, docker_client, {proc.pid}, set())
