"""The fleet under faults, with real ``skillopt serve`` processes: a host killed with SIGKILL
mid-batch is left (never waited on, never chosen again) and its rollouts rerun elsewhere; a
host filled by another client is waited for, never dropped; an unreachable host fails in
seconds. Every request ends as exactly one row. Also: hosts found by DNS (``dns:///``) join and
leave the fleet as the name's addresses change."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import signal
import socket
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import docker.errors
import pytest

from controller.client.sandbox_client import ChannelConfig, SandboxClient
from controller.embedded import spawn_service, wait_listening
from controller.fleet.executor import FleetExecutor
from controller.fleet.hosts import FleetEvent, HostHealth
from sandbox.runtime.docker.engine import list_containers
from sandbox.runtime.labels import LABEL_HOST
from skillopt.envs.spreadsheetbench.loader import SAMPLE_ROOT, SpreadsheetBenchData, build_task
from skillopt.errors import SandboxUnavailable
from skillopt.testing.scripted import ScriptedModelServer
from skillopt.testing.simulation import SIM_TARGET, SimulatedTarget, simulation_server
from skillopt.types import Limits, ModelSpec, RolloutRequest, RolloutResult, SkillVersion


@dataclasses.dataclass
class Host:
    proc: subprocess.Popen
    port: int
    host_id: str
    ip: str = "127.0.0.1"

    @property
    def address(self) -> str:
        return f"{self.ip}:{self.port}"


def _serve(tmp: Path, model_url: str, *extra: str, capacity: int = 2, listen: str = "127.0.0.1:0") -> Host:
    host_id = f"fault-{uuid.uuid4().hex[:6]}"
    provider = (
        ["--provider", f"sim=openai_compatible,base_url={model_url},max_retries=0"] if model_url else []
    )
    proc = spawn_service(
        [
            "--listen", listen,
            "--token-file", str(tmp / "token"),
            "--host-id", host_id,
            "--state-dir", str(tmp / host_id),
            "--capacity", str(capacity),
            "--pool-size", str(capacity),
            *provider,
            "--exec-agents", "off",
            "--drain-grace", "2",
            *extra,
        ]
    )  # fmt: skip
    return Host(proc=proc, port=wait_listening(proc, 120), host_id=host_id, ip=listen.rsplit(":", 1)[0])


def _stop(host: Host, docker_client) -> None:
    if host.proc.poll() is None:
        host.proc.send_signal(signal.SIGTERM)
        host.proc.wait(60)
    # A SIGKILLed host cannot clean up after itself; its successor's reaper would. Do it here.
    for c in list_containers(docker_client, f"{LABEL_HOST}={host.host_id}"):
        with contextlib.suppress(docker.errors.NotFound):
            docker_client.api.remove_container(c.id, force=True)


@pytest.fixture
def fleet_tmp(short_tmp) -> Path:
    (short_tmp / "token").write_text(uuid.uuid4().hex)
    return short_tmp


@pytest.fixture(scope="module")
def sim() -> Iterator[ScriptedModelServer]:
    with simulation_server() as server:
        yield server


def _requests(n: int, *, wall_s: float = 120.0) -> list[RolloutRequest]:
    data = SpreadsheetBenchData(SAMPLE_ROOT)
    ids = data.ids
    out = []
    run = uuid.uuid4().hex[:6]
    for k in range(n):
        tid = ids[k % len(ids)]
        task, grading = build_task(data.task(tid))
        out.append(
            RolloutRequest(
                rollout_id=f"faults-{run}/{k}",
                env="spreadsheetbench",
                agent="codegen_single",
                task=dataclasses.replace(task, id=f"{tid}#{k}"),
                grading=grading,
                skill=SkillVersion(content=""),
                model=ModelSpec(provider="sim", model=SIM_TARGET),
                limits=Limits(wall_time_s=wall_s, exec_timeout_s=60),
            )
        )
    return out


def _channel(tmp: Path, address: str) -> ChannelConfig:
    return ChannelConfig(address=address, token=(tmp / "token").read_text())


def test_kill_9_of_one_of_three_hosts_mid_batch_loses_no_row(docker_client, sim, fleet_tmp):
    hosts = [_serve(fleet_tmp, sim.base_url) for _ in range(3)]
    victim = hosts[1]
    rows: list[RolloutResult] = []
    lock = threading.Lock()
    killed = threading.Event()

    def on_result(row: RolloutResult) -> None:
        with lock:
            rows.append(row)
            n = len(rows)
        if n == 12 and not killed.is_set():
            killed.set()
            os.kill(victim.proc.pid, signal.SIGKILL)

    try:
        with FleetExecutor([_channel(fleet_tmp, h.address) for h in hosts], workers=6) as fleet:
            # Mid-batch: after 12 rows, 6 are in flight over the three hosts and 12 wait to be placed.
            requests = _requests(30)
            fleet.run(requests, on_result=on_result, stop=threading.Event())
            state = {h.address: h for h in fleet.hosts_state}[victim.address]
            assert killed.is_set()
            # The dead host was marked down and never chosen again.
            downs = [t for t, health in state.history if health is HostHealth.DOWN]
            assert downs, state.history
            assert state.placements and state.last_placement < downs[0]
            assert state.health is HostHealth.DOWN
            survivors = [s for s in fleet.hosts_state if s.address != victim.address]
            assert all(s.health is HostHealth.UP for s in survivors)
        # Every request ended as exactly one row, none of them infrastructure.
        assert sorted(r.rollout_id for r in rows) == sorted(r.rollout_id for r in requests)
        assert [r.fail_reason for r in rows if r.infra_error is not None] == []
        assert {r.host for r in rows} <= {h.host_id for h in hosts}
    finally:
        for h in hosts:
            _stop(h, docker_client)


def test_a_host_full_of_another_clients_rollouts_is_waited_for_not_dropped(docker_client, fleet_tmp):
    hold = threading.Event()
    arrived = threading.Semaphore(0)

    def responder(req):
        # The other client's rollouts hold their slots until the test lets them go.
        if "HOLD-THE-SLOT" in req.system:
            arrived.release()
            hold.wait(120)
        return None

    with ScriptedModelServer(responders=[responder, SimulatedTarget()]) as server:
        host = _serve(fleet_tmp, server.base_url, capacity=2)
        try:
            other = SandboxClient(_channel(fleet_tmp, host.address))
            holders = [
                dataclasses.replace(r, skill=SkillVersion(content="HOLD-THE-SLOT"))
                for r in _requests(2, wall_s=150)
            ]
            threads = [
                threading.Thread(target=other.run, args=(r,), kwargs={"timeout_s": 200}, daemon=True)
                for r in holders
            ]
            for t in threads:
                t.start()
            for _ in holders:  # both slots are taken (their model calls are in progress)
                assert arrived.acquire(timeout=120)
            full = threading.Event()

            def on_event(e: FleetEvent) -> None:
                if e.kind == "host_full":
                    full.set()
                    hold.set()  # the other client finishes once we have been turned away

            rows: list[RolloutResult] = []
            with FleetExecutor([_channel(fleet_tmp, host.address)], workers=4, on_event=on_event) as fleet:
                requests = _requests(4)
                fleet.run(requests, on_result=rows.append, stop=threading.Event())
            assert full.is_set(), "the host was never full: the test did not test anything"
            assert sorted(r.rollout_id for r in rows) == sorted(r.rollout_id for r in requests)
            assert [r.fail_reason for r in rows if r.infra_error is not None] == []
            for t in threads:
                t.join(60)
            other.close()
        finally:
            hold.set()
            _stop(host, docker_client)


def test_an_unreachable_host_is_left_and_the_others_do_the_work(docker_client, sim, fleet_tmp):
    host = _serve(fleet_tmp, sim.base_url)
    dead = "127.0.0.1:9"  # discard port: nothing listens
    try:
        rows: list[RolloutResult] = []
        with FleetExecutor(
            [_channel(fleet_tmp, dead), _channel(fleet_tmp, host.address)], workers=2
        ) as fleet:
            assert {s.address: s.health for s in fleet.hosts_state}[dead] is HostHealth.DOWN
            fleet.run(_requests(4), on_result=rows.append, stop=threading.Event())
        assert len(rows) == 4 and all(r.infra_error is None for r in rows)
    finally:
        _stop(host, docker_client)


def test_no_reachable_host_is_a_clear_error_not_a_hang(fleet_tmp):
    with pytest.raises(SandboxUnavailable, match="no sandbox host is reachable"):
        FleetExecutor([_channel(fleet_tmp, "127.0.0.1:9")], workers=1)


def test_every_host_gone_mid_run_stops_the_batch_with_a_clear_error(docker_client, sim, fleet_tmp):
    host = _serve(fleet_tmp, sim.base_url, capacity=1)
    try:
        with FleetExecutor([_channel(fleet_tmp, host.address)], workers=1, down_timeout_s=1.0) as fleet:
            os.kill(host.proc.pid, signal.SIGKILL)
            host.proc.wait(30)
            rows: list[RolloutResult] = []
            with pytest.raises(SandboxUnavailable, match="no sandbox host has been reachable"):
                fleet.run(_requests(3), on_result=rows.append, stop=threading.Event())
            assert all(r.infra_error is None for r in rows)
    finally:
        _stop(host, docker_client)


HOSTS_LOCK = Path(tempfile.gettempdir()) / "skillopt-tests-etc-hosts.lock"


def _edit_hosts(name: str, ips: list[str]) -> None:
    """Give ``name`` exactly ``ips`` in /etc/hosts. Tests on other xdist workers edit the file
    too: each edit holds a lock, keeps every other line as it is now (not as it was when the
    test began), and replaces the file in one rename so a lookup never reads it half written."""
    path = Path("/etc/hosts")
    with HOSTS_LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        kept = [line for line in path.read_text().splitlines() if line.split()[1:] != [name]]
        text = "\n".join([*kept, *(f"{ip} {name}" for ip in ips)]) + "\n"
        tmp = path.with_name(f".hosts.{name}")
        tmp.write_text(text)
        tmp.chmod(0o644)
        try:
            os.replace(tmp, path)
        except OSError:  # /etc/hosts is a bind mount (a container): rewrite it in place
            tmp.unlink()
            path.write_text(text)


@contextlib.contextmanager
def _hosts_file_name() -> Iterator[tuple[str, Callable[[list[str]], None]]]:
    """A fresh DNS name in /etc/hosts (glibc reads the file on every lookup); yields the name
    and a setter of its addresses; the name is removed afterwards."""
    name = f"so-fleet-{uuid.uuid4().hex[:8]}.test"
    try:
        yield name, lambda ips: _edit_hosts(name, ips)
    finally:
        _edit_hosts(name, [])


def _free_port(ips: list[str]) -> int:
    """A port free on every address (the hosts of a DNS name share one port)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind((ips[0], 0))
            port = s.getsockname()[1]
        try:
            for ip in ips[1:]:
                with socket.socket() as s2:
                    s2.bind((ip, port))
        except OSError:
            continue
        return port
    raise AssertionError("no common free port")


def test_hosts_behind_a_dns_name_join_and_leave_the_fleet(docker_client, sim, fleet_tmp):
    ips = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    port = _free_port(ips)
    with _hosts_file_name() as (name, set_addresses):
        set_addresses(ips[:2])
        hosts = [_serve(fleet_tmp, sim.base_url, listen=f"{ip}:{port}") for ip in ips]
        events: list[FleetEvent] = []
        try:
            channel = ChannelConfig(address=f"dns:///{name}:{port}", token=(fleet_tmp / "token").read_text())
            with FleetExecutor(
                [channel], workers=6, resolve_interval_s=3600, on_event=events.append
            ) as fleet:
                assert sorted(h.address for h in fleet.hosts_state) == [f"{ip}:{port}" for ip in ips[:2]]
                rows: list[RolloutResult] = []
                fleet.run(_requests(8), on_result=rows.append, stop=threading.Event())
                assert {r.host for r in rows} == {h.host_id for h in hosts[:2]}
                # A third address appears, the first one goes: the fleet follows the name.
                set_addresses(ips[1:])
                fleet.resolve()
                assert [e.address for e in events if e.kind == "host_added"] == [f"{ips[2]}:{port}"]
                assert [e.address for e in events if e.kind == "host_removed"] == [f"{ips[0]}:{port}"]
                rows = []
                fleet.run(_requests(12), on_result=rows.append, stop=threading.Event())
                assert {r.host for r in rows} == {h.host_id for h in hosts[1:]}
                assert all(r.infra_error is None for r in rows)
        finally:
            for h in hosts:
                _stop(h, docker_client)
