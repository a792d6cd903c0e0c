"""The hostile-program suite (``hostile_programs.HOSTILE``): every program runs against a real
sandbox service, and each must end in its typed, contained outcome with the service still
healthy and no container or container directory left behind.

In-service agents' programs run as full rollouts over gRPC (the scripted model answers with
the program; the trusted side grades). Exec agents' containers have a network, to the model
gateway only, so the egress probes also run in a container of the exec agents' spec on the
host's firewalled gateway network.
"""

from __future__ import annotations

import dataclasses
import http.server
import json
import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from sandbox.runtime.docker.engine import list_containers
from sandbox.runtime.labels import LABEL_HOST
from sandbox.runtime.lease import LeasedSandbox
from skillopt.agents.sandbox import ExecOutcome
from skillopt.envs.base import ProgressEvent
from skillopt.types import Limits, RolloutResult
from tests.sandbox.conftest import RUNTIMES, Service, fenced, request_for, start_service
from tests.sandbox.hostile_programs import HOSTILE, Hostile
from tests.sandbox.hostile_seam import CLEAN, PROBE, SEAM, Seam

TASK = "32255"  # one test case: each program runs once
SECRET = f"skillopt-hostile-secret-{uuid.uuid4().hex}"
PROVIDER_KEY = f"sk-hostile-provider-key-{uuid.uuid4().hex[:12]}"


@dataclasses.dataclass
class Hostility:
    service: Service
    values: dict[str, str]
    marker: Path
    runtime: str  # "" (runc) or "runsc"


@pytest.fixture(scope="module", params=RUNTIMES)
def hostility(request, docker_client, scripted) -> Iterator[Hostility]:
    # A secret in the service process's environment, a marker file on the host, a listener on
    # every host interface: none of them may be reachable from a rollout container.
    os.environ["SKILLOPT_HOSTILE_SECRET"] = SECRET
    marker = Path("/tmp") / f"skillopt-hostile-marker-{uuid.uuid4().hex[:8]}"
    marker.write_text(SECRET)
    listener = http.server.ThreadingHTTPServer(("0.0.0.0", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=listener.serve_forever, daemon=True).start()
    try:
        for svc in start_service(
            scripted, capacity=2, pool_size=2, provider_key=PROVIDER_KEY, container_runtime=request.param
        ):
            front = svc.running.front
            assert front is not None, "exec agents must be available on the test host (root, iptables)"
            gateway_ip, gateway_port = front.url.split("//", 1)[1].rsplit(":", 1)
            values = {
                "__SERVICE_PORT__": str(svc.running.port),
                "__HOST_PORT__": str(listener.server_address[1]),
                "__GATEWAY_IP__": gateway_ip,
                "__GATEWAY_PORT__": gateway_port.rstrip("/").split("/")[0],
                "__SECRET__": SECRET,
                "__PROVIDER_KEY__": PROVIDER_KEY,
                "__HOST_MARKER__": marker.name,
            }
            yield Hostility(service=svc, values=values, marker=marker, runtime=request.param)
    finally:
        listener.shutdown()
        marker.unlink(missing_ok=True)
        os.environ.pop("SKILLOPT_HOSTILE_SECRET", None)


def _report(stdout: str) -> dict:
    lines = [line for line in stdout.splitlines() if line.startswith("REPORT {")]
    return json.loads(lines[-1][len("REPORT ") :]) if lines else {}


def _wait_destroyed(client: docker.DockerClient, name: str, since: float, timeout_s: float = 60.0) -> None:
    """Block until container ``name`` is gone, on the engine's own ``destroy`` event (the pool
    removes a used container in the background). Events from ``since`` on are replayed, so a
    removal that already happened is seen at once."""
    if not client.api.containers(all=True, filters={"name": f"^{name}$"}):
        return
    events = client.events(since=int(since), filters={"container": name, "event": "destroy"}, decode=True)
    timer = threading.Timer(timeout_s, events.close)
    timer.start()
    try:
        for _ in events:
            return
    finally:
        timer.cancel()
        events.close()
    assert not client.api.containers(all=True, filters={"name": f"^{name}$"}), f"{name} leaked"


def _assert_contained(h: Hostility, docker_client: docker.DockerClient, container: str, since: float) -> None:
    """The service is healthy, idle, and the program's container is either gone with its
    directory, or reset to a verified clean slate and kept for the tenant's next rollout (the
    seam tests below show what the next rollout sees of it)."""
    svc = h.service
    assert svc.client.healthy()
    desc = svc.client.describe()
    assert desc.running == 0 and desc.free_slots == desc.capacity
    pools = svc.running.service.pools
    assert pools.wait_released(timeout_s=60)
    if pools.holds(container) == "recycled":
        return
    _wait_destroyed(docker_client, container, since)
    assert pools.wait_released(timeout_s=60)  # its removal may have begun after the first wait
    state_dir = svc.running.service.runtime.state_dir
    short = container.rsplit("-", 1)[-1]
    assert not (state_dir / "c" / short).exists(), "the container's host directory leaked"
    # No dead container of this host is left behind (pool containers are all up).
    left = list_containers(docker_client, f"{LABEL_HOST}={svc.host_id}")
    assert all(c.state in ("created", "running") for c in left), [(c.name, c.state) for c in left]


def _run_codegen(h: Hostility, scripts, sample, prog: Hostile) -> tuple[RolloutResult, str]:
    return _rollout(h, scripts, sample, prog.name, prog.program(h.values), prog.limits)


def _rollout(
    h: Hostility, scripts, sample, name: str, code: str, limits_kw: dict[str, Any] | None = None
) -> tuple[RolloutResult, str]:
    """``code`` as the solution of a codegen rollout over gRPC (the scripted model answers
    with it); the row and the name of the container it ran in."""
    marker = f"HOSTILE-{name}-{uuid.uuid4().hex[:6]}"
    scripts.scripts[marker] = [fenced(code)]
    limits = Limits(**{"wall_time_s": 120, "exec_timeout_s": 30, **(limits_kw or {})})
    service = h.service.running.service
    # Start from a warm container, as a loaded host would (a cold start under load can eat a
    # short wall time before the program even runs).
    spec = service.config.base_spec.with_limits(memory_bytes=limits.memory_bytes, cpus=limits.cpus)
    service.pools.prewarm(spec)
    assert service.pools.wait_ready(spec, 1, timeout_s=120)
    containers: list[str] = []

    def on_event(ev: ProgressEvent) -> None:
        if ev.phase == "sandbox_ready":
            containers.append(ev.detail.split()[1])

    try:
        row = h.service.client.run(
            request_for(sample, TASK, skill=f"# {marker}\n", limits=limits), timeout_s=240, on_event=on_event
        )
    finally:
        del scripts.scripts[marker]
    assert containers, ("the rollout never got a container", row.fail_reason, row.infra_error)
    return row, containers[0]


def _run_exec(h: Hostility, prog: Hostile) -> tuple[ExecOutcome, str]:
    svc = h.service.running.service
    runtime = svc.runtime
    handle = runtime.create(svc.exec_spec)
    # Under gVisor exec containers take its networked sibling runtime (scripts/setup.sh --gvisor).
    assert runtime.runtime_name(handle.spec) == ("runsc-net" if h.runtime == "runsc" else "runc")
    try:
        box = LeasedSandbox(runtime, handle, rollout_id=f"hostile/{prog.name}")
        box.write_file("prog.py", prog.program(h.values).encode())
        return box.run_python("prog.py", timeout_s=60), handle.name
    finally:
        runtime.destroy(handle)


@pytest.mark.parametrize("prog", HOSTILE, ids=[p.name for p in HOSTILE])
def test_hostile_program_is_contained(hostility, docker_client, scripts, sample, prog: Hostile):
    since = time.time() - 1
    prog = prog.under(hostility.runtime)  # the outcome pinned for this runtime (why: at the program)
    if prog.where == "exec":
        outcome, container = _run_exec(hostility, prog)
        assert outcome.exit_code == 0 and not outcome.timed_out, (outcome.stdout_tail, outcome.stderr_tail)
        assert _report(outcome.stdout_tail) == prog.report, outcome.stderr_tail[-2000:]
        _assert_contained(hostility, docker_client, container, since)
        return

    row, container = _run_codegen(hostility, scripts, sample, prog)
    assert row.container_runtime == (hostility.runtime or "runc")
    execs = row.trace.executions
    detail = (
        row.fail_reason,
        row.infra_error,
        [(e.stdout_tail[-500:], e.stderr_tail[-1500:]) for e in execs],
    )
    # The typed outcome: an infra error of an expected kind, or a scored row with a reason.
    outcomes = prog.infra if isinstance(prog.infra, tuple) else (prog.infra,)
    if row.infra_error is None:
        assert None in outcomes, detail
        assert row.hard == 0.0 and row.fail_reason, detail
    else:
        assert row.infra_error.kind.value in outcomes, detail
    assert row.fail_reason.startswith(prog.fail), detail
    assert prog.fail_contains in row.fail_reason, detail
    if prog.report:
        assert execs, detail
        assert _report(execs[0].stdout_tail) == prog.report, detail
    for key, want in prog.execution.items():
        if key == "tail_bounded":
            limit = row.trace.executions[0]
            assert (
                len(limit.stdout_tail.encode()) <= 64 * 1024 and len(limit.stderr_tail.encode()) <= 64 * 1024
            )
        else:
            assert getattr(execs[0], key) == want, (key, detail)
    _assert_contained(hostility, docker_client, container, since)


def test_the_suite_is_systematic():
    """At least 25 programs, names unique, every family of the brief present."""
    names = [p.name for p in HOSTILE]
    assert len(names) >= 25 and len(set(names)) == len(names)
    for family in (
        "egress_dns",
        "egress_bridge_and_host",
        "host_files",
        "other_processes_environ",
        "docker_socket",
        "fork_bomb",
        "thread_bomb",
        "memory_bomb",
        "disk_fill_workspace",
        "disk_fill_tmp",
        "inode_exhaustion",
        "runaway_output",
        "infinite_loop",
        "sleep_past_the_deadline",
        "setuid_tricks",
        "capabilities",
        "mount_and_namespaces",
        "proc_and_sys_writes",
        "write_outside_workspace",
        "symlink_output",
        "hardlink_output",
        "kill_pid1_and_everyone",
        "zip_bomb_for_the_grader",
        "billion_laughs_for_the_grader",
        "exec_egress_dns",
        "exec_egress_bridge_and_host",
    ):
        assert family in names, family


@pytest.mark.parametrize("seam", SEAM, ids=[s.name for s in SEAM])
def test_the_tenants_next_rollout_sees_nothing_of_the_last(hostility, scripts, sample, seam: Seam):
    """Container recycling's seam (issue 47): a program tries to leave something for the
    tenant's next rollout, or to make its verdict wrong; the next rollout (the probe) runs in
    the recycled container when the reset held (or in another one when it refused), sees
    nothing of the program, and is graded as in a new container (it writes no output: nothing
    to grade, whatever the program planted)."""
    seam = seam.under(hostility.runtime)
    row, _ = _rollout(hostility, scripts, sample, seam.name, seam.program())
    left = _report(row.trace.executions[0].stdout_tail) if row.trace.executions else {}
    detail = (row.fail_reason, row.infra_error, [e.stderr_tail[-1500:] for e in row.trace.executions])
    if seam.infra:  # the program's rollout itself failed, typed (its container goes)
        assert row.infra_error is not None and row.infra_error.kind.value == seam.infra, detail
    else:
        assert left.get("left"), detail
    assert hostility.service.running.service.pools.wait_released(timeout_s=60)  # its reset is done
    probe_row, _ = _rollout(hostility, scripts, sample, f"probe-after-{seam.name}", PROBE)
    execs = probe_row.trace.executions
    probe = _report(execs[0].stdout_tail) if execs else {}
    detail = (probe_row.fail_reason, probe_row.infra_error, [e.stderr_tail[-1500:] for e in execs])
    assert probe, detail
    assert (probe["container"] == left.get("container")) is seam.reuse, (left, probe)
    assert {k: probe[k] for k in CLEAN} == CLEAN, probe
    assert probe["nofile"] == 1024 and probe["cpus"] == len(os.sched_getaffinity(0)), probe
    assert not probe["json_from"].startswith("/workspace"), probe
    assert probe_row.infra_error is None and probe_row.fail_reason.startswith("output-not-found"), detail
