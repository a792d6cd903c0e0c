"""gVisor as a wall every untrusted execution can keep: a host serving ``--runtime runsc
--require-runtime`` runs its exec agents and gateway sessions under ``runsc-net`` (gVisor with
socket calls in the container's own network namespace) instead of refusing them, says so in ``Describe`` and ``fleet status``, and a run,
a session and the Inspect provider that require ``gvisor`` isolation are refused by a runc host
before anything runs in it. (The hostile suite runs under both runtimes: its exec egress programs
prove a ``runsc-net`` container reaches the gateway and nothing else.)

Our container contract's guarantees, checked by behaviour inside gVisor (its
``/proc/self/status`` shows no ``NoNewPrivs`` line): see ``test_the_contract_holds_inside_gvisor``.
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import docker
import grpc
import pytest

from controller.client.inspect_provider import SkillOptSandboxConfig
from controller.client.isolation import check_isolation
from controller.client.sandbox_client import ChannelConfig
from controller.client.sessions import SandboxSession, SessionEndpoints
from controller.fleet.executor import FleetExecutor
from controller.fleet.status import probe_fleet
from controller.session import open_session
from sandbox.api import convert
from sandbox.api.status import detail_from_metadata
from sandbox.api.v1 import sandbox_pb2 as pb
from sandbox.api.v1 import sandbox_pb2_grpc as pb_grpc
from sandbox.runtime.docker.engine import list_containers
from sandbox.runtime.labels import LABEL_HOST
from sandbox.runtime.lease import LeasedSandbox
from sandbox.service.isolation import check_isolation as check_host_isolation
from sandbox.service.isolation import check_rollout_isolation
from skillopt.config import load_config
from skillopt.envs.base import TaskItem
from skillopt.envs.spreadsheetbench.loader import build_task
from skillopt.errors import ConfigError, IsolationUnavailable
from skillopt.trainer.rollouts import Rollouts, RolloutSpec
from skillopt.trainer.rundir import ResultRow
from skillopt.types import Limits, ModelSpec, RolloutRequest, SkillVersion
from tests.sandbox.conftest import Service, fenced, solution_code, start_service
from tests.sandbox.test_exec_agents import TASK, exec_request, script

pytestmark = pytest.mark.usefixtures("docker_client")


@pytest.fixture(scope="module")
def gvisor(docker_client, scripted) -> Iterator[Service]:
    if "runsc-net" not in docker_client.info().get("Runtimes", {}):
        pytest.fail(
            "gVisor is not registered: run bash scripts/setup.sh --tests (or --gvisor)", pytrace=False
        )
    yield from start_service(
        scripted, capacity=2, pool_size=1, container_runtime="runsc", require_runtime=True
    )


@pytest.fixture(scope="module")
def runc(docker_client, scripted) -> Iterator[Service]:
    yield from start_service(scripted, capacity=1, pool_size=0)


def _where(svc: Service) -> SessionEndpoints:
    return SessionEndpoints(endpoints=(svc.running.address,), token=svc.token)


def test_every_agent_runs_under_gvisor_on_a_host_that_requires_it(gvisor):
    d = gvisor.client.describe()
    assert d.container_runtime == "runsc" and {"runsc", "runsc-net"} <= set(d.available_runtimes)
    # --require-runtime refuses nothing: the exec agents (Codex, Claude Code) take runsc-net.
    assert not d.unavailable_agents, d.unavailable_agents
    assert set(d.agent_runtimes) == set(d.agents)
    assert set(d.agent_runtimes.values()) == {"runsc", "runsc-net"}
    assert d.agent_runtimes["spreadsheetbench/codex_exec"] == "runsc-net"
    # fleet status shows it per agent.
    (report,) = probe_fleet([ChannelConfig(address=gvisor.running.address, token=gvisor.token)])
    assert report.agent_runtimes == dict(d.agent_runtimes) and report.gvisor


def test_a_gateway_session_runs_under_gvisor_and_reaches_the_gateway(gvisor):
    with SandboxSession.create(_where(gvisor), network="gateway", isolation="gvisor") as s:
        assert s.info.container_runtime == "runsc-net"
        front = gvisor.running.front
        assert front is not None
        # The gateway answers (any HTTP status: it is reached); the egress programs of the
        # hostile suite prove nothing else is.
        probe = (
            "import urllib.request as u\n"
            f"try: u.urlopen({front.url!r}, timeout=10)\n"
            "except u.HTTPError as e: print('answered', e.code)\n"
        )
        r = s.exec(["python3", "-c", probe], timeout=60)
        assert r.exit_code == 0, (r.stdout, r.stderr)


@pytest.mark.parametrize(
    ("agent", "provider"), [("codex_exec", "scripted"), ("claude_code_exec", "scripted-anthropic")]
)
def test_a_real_agent_cli_solves_a_task_under_gvisor(gvisor, scripts, sample, agent, provider):
    """The real Codex CLI and Claude Code under ``runsc-net``, three rollouts each: every one
    runs its commands, hears back from each and is graded. (Under bookworm's own runsc, 2022-12,
    a command sometimes never reported back: Codex 16 of 46 rollouts ended at their wall time;
    setup.sh installs gVisor from bookworm-backports, docker/README.md.)"""
    marker = sample.task(TASK).instruction[:120]
    scripts.scripts[marker] = script(solution_code(TASK))
    rows = [gvisor.client.run(exec_request(sample, agent, provider), timeout_s=240) for _ in range(3)]
    for row in rows:
        assert row.container_runtime == "runsc-net", row.container_runtime
        assert row.infra_error is None and row.hard == 1.0, (row.fail_reason, row.trace.notes)
        assert row.agent_ok and row.n_turns >= 3


def test_required_isolation_is_refused_by_a_runc_host_before_anything_runs(gvisor, runc, tmp_path):
    # A session: the runc host's container is ended unused, the error names its runtime.
    with pytest.raises(ConfigError, match=r"isolation=gvisor: host .* under 'runc', not gvisor"):
        SandboxSession.create(_where(runc), isolation="gvisor")
    assert runc.running.servicer.sessions.count() == 0
    with SandboxSession.create(_where(gvisor), isolation="gvisor") as s:
        assert s.info.container_runtime == "runsc"
    with pytest.raises(ConfigError, match="isolation must be"):
        SandboxSession.create(_where(gvisor), isolation="vm")
    # The Inspect provider takes it from its config (and refuses an unknown level there).
    assert SkillOptSandboxConfig(endpoints=["x:1"], isolation="gvisor").isolation == "gvisor"
    with pytest.raises(ValueError):
        SkillOptSandboxConfig(endpoints=["x:1"], isolation="vm")
    # A run: the fleet's Describe, checked before any rollout (controller.session does).
    cfg = load_config("spreadsheetbench_demo", ["sandbox.isolation=gvisor"])
    agent = f"{cfg.env.name}/{cfg.env.agent}"
    channels = [ChannelConfig(address=s.running.address, token=s.token) for s in (gvisor, runc)]
    refused = rf"sandbox hosts cannot give it: {runc.running.address} runs"
    with FleetExecutor(channels, workers=2) as fleet, pytest.raises(ConfigError, match=refused):
        check_isolation(fleet.agent_runtimes(), cfg.sandbox.isolation, agent)
    with FleetExecutor(channels[:1], workers=1) as fleet:
        check_isolation(fleet.agent_runtimes(), cfg.sandbox.isolation, agent)
    # ... as a run starts (open_session), before any rollout.
    token = tmp_path / "token"
    token.write_text(runc.token)
    run_cfg = load_config(
        "spreadsheetbench_demo",
        [
            "sandbox.isolation=gvisor",
            f"sandbox.endpoints=[{runc.running.address}]",
            f"sandbox.token_file={token}",
            "run.simulate=on",
        ],
    )
    with pytest.raises(ConfigError, match=refused), open_session(run_cfg, out_dir=tmp_path / "run"):
        pytest.fail("the run started")
    with pytest.raises(ConfigError, match=r"sandbox\.isolation"):
        load_config("spreadsheetbench_demo", ["sandbox.isolation=vm"])


#: Run as the container's user inside one gVisor rollout container. /proc/self/status has no
#: NoNewPrivs line under gVisor and Seccomp reads 0: each guarantee is checked by what it stops.
_CONTRACT_PROBE = r"""
import ctypes, errno, json, os, shutil, stat
libc = ctypes.CDLL(None, use_errno=True)
def call(fn):
    r = fn()
    return "ok" if r != -1 else errno.errorcode.get(ctypes.get_errno(), "?")
out = {
    # PR_GET_NO_NEW_PRIVS: the flag gVisor's kernel enforces on execve of set-id files.
    "no_new_privs": libc.prctl(39, 0, 0, 0, 0),
    "uid": os.getuid(),
    "cap_eff": [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff")][0],
    # What our seccomp profile denies: under gVisor these reach gVisor's kernel, never the host's.
    "mount": call(lambda: libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)),
    "setuid0": call(lambda: libc.setuid(0)),
    "root_write": call(lambda: libc.open(b"/etc/skillopt-probe", os.O_CREAT | os.O_WRONLY, 0o644)),
}
print("REPORT " + json.dumps(out))
"""


def test_the_contract_holds_inside_gvisor(gvisor):
    svc = gvisor.running.service
    runtime = svc.runtime
    handle = runtime.create(svc.config.base_spec)
    try:
        assert runtime.runtime_name(handle.spec) == "runsc"
        box = LeasedSandbox(runtime, handle, rollout_id="gvisor/contract")
        box.write_file("probe.py", _CONTRACT_PROBE.encode())
        out = box.run_python("probe.py", timeout_s=60)
    finally:
        runtime.destroy(handle)
    line = [x for x in out.stdout_tail.splitlines() if x.startswith("REPORT ")]
    assert line, (out.stdout_tail, out.stderr_tail)
    report = json.loads(line[-1][len("REPORT ") :])
    assert report["no_new_privs"] == 1 and report["uid"] == 1000 and int(report["cap_eff"], 16) == 0
    assert (
        report["mount"] == "EPERM"
        and report["setuid0"] != "ok"
        and report["root_write"] in ("EROFS", "EACCES")
    )


def test_ci_registers_gvisor():
    """``.ci/run`` and the README's test command set gVisor up (``--tests`` implies
    ``--gvisor``), so the security suites run under it wherever the suite runs."""
    root = Path(__file__).resolve().parents[2]
    for entry in (root / ".ci" / "run", root / "scripts" / "test.sh"):
        assert "\nbash scripts/setup.sh --tests\n" in entry.read_text(), entry
    assert "--tests) tests=1; gvisor=1 ;;" in (root / "scripts" / "setup.sh").read_text()


def test_the_registered_gvisor_is_a_release_agent_clis_can_run_under(docker_client):
    """Both runtimes run a gVisor from 2024-07 on: bookworm's own 2022-12 release lost agent
    CLIs' wake-ups (docker/README.md, "Isolation levels"), which would show as rollouts that
    time out now and then, not as a clear failure."""
    runtimes = docker_client.info()["Runtimes"]
    for name in ("runsc", "runsc-net"):
        out = subprocess.run(
            [runtimes[name]["path"], "--version"], capture_output=True, text=True, check=True
        )
        date = re.search(r"runsc version (?:0\.0~|release-)(\d{8})", out.stdout)
        assert date and date.group(1) >= "20240729", (name, out.stdout)


def _stub(svc: Service) -> tuple[pb_grpc.SandboxStub, tuple[tuple[str, str], ...], grpc.Channel]:
    channel = grpc.insecure_channel(svc.running.address)
    return pb_grpc.SandboxStub(channel), (("authorization", f"Bearer {svc.token}"),), channel


def _refusal(call) -> tuple[grpc.StatusCode, str, pb.ErrorDetail | None]:
    with pytest.raises(grpc.RpcError) as info:
        result = call()
        list(result) if not isinstance(result, pb.SessionInfo) else result  # a stream fails when read
    err = info.value
    return err.code(), err.details(), detail_from_metadata(err.trailing_metadata())


def test_each_request_says_the_isolation_it_requires_and_a_host_that_cannot_refuses_it(
    gvisor, runc, sample, scripts
):
    """The host's own check (``RunRequest.isolation``, ``CreateSessionRequest.isolation``):
    refused with FAILED_PRECONDITION before any container starts, naming what the host has and
    how to get it; a gVisor host runs it and its row says under what."""
    task, grading = build_task(sample.task("32255"))
    req = RolloutRequest(
        rollout_id=f"iso/{uuid.uuid4().hex[:8]}",
        env="spreadsheetbench",
        agent="codegen_single",
        task=task,
        grading=grading,
        skill=SkillVersion(content="# skill"),
        model=ModelSpec(provider="scripted", model="scripted-target"),
        limits=Limits(wall_time_s=120, exec_timeout_s=60),
        isolation="gvisor",
    )
    created = runc.running.servicer.sessions.created_total
    stub, auth, channel = _stub(runc)
    with channel:
        code, message, detail = _refusal(lambda: stub.Run(convert.request_to_proto(req), metadata=auth))
        assert code == grpc.StatusCode.FAILED_PRECONDITION and detail is not None
        assert detail.reason == pb.ErrorDetail.ISOLATION_UNAVAILABLE and detail.retryable
        assert (
            f"host {runc.host_id} cannot give isolation=gvisor to spreadsheetbench/codegen_single" in message
        )
        assert "under 'runc', not gvisor (runsc/runsc-net; runtimes registered here: " in message
        assert "skillopt serve --runtime runsc" in message
        session = pb.CreateSessionRequest(isolation="gvisor", network="none")
        code, message, detail = _refusal(lambda: stub.CreateSession(session, metadata=auth))
        assert code == grpc.StatusCode.FAILED_PRECONDITION and detail is not None
        assert detail.reason == pb.ErrorDetail.ISOLATION_UNAVAILABLE
        assert "a session on the 'none' network" in message and "skillopt serve --runtime runsc" in message
        code, message, _ = _refusal(
            lambda: stub.Run(convert.request_to_proto(replace(req, isolation="vm")), metadata=auth)
        )
        assert code == grpc.StatusCode.INVALID_ARGUMENT and "isolation must be" in message
    # Before any container: the runc host (no warm pool) never made one, took no session.
    assert runc.running.servicer.admission.get(req.rollout_id) is None
    assert runc.running.servicer.sessions.created_total == created
    assert list_containers(docker.from_env(), f"{LABEL_HOST}={runc.host_id}") == []
    # The client maps it to its typed error (a host refusal: another host may give it).
    with pytest.raises(IsolationUnavailable, match="cannot give isolation=gvisor"):
        runc.client.run(req, timeout_s=60)
    # The gVisor host runs it; the row (and its results.jsonl form) says under what.
    scripts.scripts[task.instruction[:120]] = [fenced(solution_code("32255"))]
    row = gvisor.client.run(req, timeout_s=180)
    assert row.infra_error is None and row.container_runtime == "runsc", row.fail_reason
    assert ResultRow.of(row).to_json()["container_runtime"] == "runsc"
    # An exec agent there runs under runsc-net: accepted as well.
    service = gvisor.running.service
    check_rollout_isolation(
        replace(req, agent="codex_exec"),
        runtime=service.runtime,
        config=service.config,
        exec_spec=service.exec_spec,
    )
    # The run's rollouts carry sandbox.isolation (controller.session sets it on the spec).
    spec = RolloutSpec(run_id="r", env="spreadsheetbench", agent="codegen_single", model=req.model,
                       limits=req.limits, isolation="gvisor")  # fmt: skip
    item = TaskItem(task=task, grading=grading)
    rollouts = Rollouts(None, spec)  # type: ignore[arg-type]  # request() needs no executor
    sent = rollouts.request(item, SkillVersion(content="# skill"), "step", use_eval_feedback=False)
    assert sent.isolation == "gvisor"


def test_a_gvisor_host_whose_networked_containers_fall_back_says_how_to_keep_them_under_it():
    kw = {"host_id": "h1", "available": ("runc", "runsc")}
    with pytest.raises(IsolationUnavailable) as info:
        check_host_isolation("gvisor", runtime="runc", what="a/b", base_runtime="runsc", **kw)
    assert "under 'runc', not gvisor" in info.value.message
    assert "runsc-net: bash scripts/setup.sh --gvisor) and restart it" in info.value.message
    with pytest.raises(IsolationUnavailable, match=r"install gVisor on the host \(bash scripts/setup.sh"):
        check_host_isolation(
            "gvisor", runtime="runc", what="a/b", base_runtime="", host_id="h", available=("runc",)
        )
    check_host_isolation("gvisor", runtime="runsc-net", what="a/b", base_runtime="runsc", **kw)
    check_host_isolation("", runtime="runc", what="a/b", base_runtime="", **kw)
