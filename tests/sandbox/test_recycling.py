"""Container recycling's policy (issue 47, ``docs/recycling.md``): which used containers the pool
resets and gives back to their tenant, which it destroys, and that another tenant never lands in
a recycled one. Real Docker throughout; what a reset guarantees is the conformance suite's
(``sandbox/runtime/conformance/recycling.py``) and the hostile seam tests'."""

from __future__ import annotations

import secrets
import shutil
import tempfile
import uuid
from collections.abc import Iterator

import pytest
from sandbox_fusion import RunCodeRequest, run_code

from sandbox.runtime.docker.runtime import DockerRuntime
from sandbox.runtime.pool import PoolManager
from sandbox.runtime.spec import ContainerSpec, RuntimeConfig
from tests.sandbox.conftest import start_service

SPEC = ContainerSpec()


@pytest.fixture
def make_pools(docker_client) -> Iterator:
    """A runtime and its pools with a given recycling policy (no warm pool: every container
    counted is one the test asked for; idle room for 4 reset ones)."""
    made: list[tuple[PoolManager, DockerRuntime, str]] = []

    def make(**policy) -> PoolManager:
        state = tempfile.mkdtemp(prefix="so-recy-", dir="/tmp")
        rt = DockerRuntime(
            RuntimeConfig(
                host_id=f"test-recy-{uuid.uuid4().hex[:6]}",
                state_dir=state,
                pool_size=0,
                max_idle_containers=4,  # room for reset containers: they count against the idle cap
                **policy,
            )
        )
        pools = PoolManager(rt)
        made.append((pools, rt, state))
        return pools

    yield make
    for pools, rt, state in made:
        pools.close()
        rt.close()
        shutil.rmtree(state, ignore_errors=True)


def _use(pools: PoolManager, tenant: str, argv: tuple[str, ...] = ("true",), **exec_kw) -> str:
    """One execution of ``tenant`` in a container of the pool; the container's name (once its
    reset or removal is over)."""
    handle = pools.acquire(SPEC, timeout_s=120, tenant=tenant)
    box = pools.runtime.lease(handle, f"test/{tenant}")
    box.run_command(list(argv), timeout_s=exec_kw.pop("timeout_s", 30), **exec_kw)
    pools.release(handle)
    assert pools.wait_released(timeout_s=60)
    return handle.name


def test_a_tenants_container_serves_it_again_until_the_bound(make_pools):
    pools = make_pools(reuse_max_executions=3)
    names = [_use(pools, "t-a") for _ in range(4)]
    assert names[0] == names[1] == names[2] != names[3]  # 3 executions, then a fresh one
    assert pools.holds(names[3]) == "recycled" and pools.holds(names[0]) == ""
    stats = pools.recycle_stats()
    assert stats.resets_total == 3 and stats.not_reused == {"max-executions": 1}, stats


def test_another_tenant_never_gets_it_and_none_without_a_tenant(make_pools):
    pools = make_pools()
    first = _use(pools, "t-a")
    assert pools.holds(first) == "recycled"
    other = _use(pools, "t-b")  # t-a's container is idle, and still not t-b's
    assert other != first and pools.holds(first) == "recycled"
    assert _use(pools, "t-a") == first
    anonymous = _use(pools, "")  # no tenant: never reused
    assert anonymous not in (first, other) and pools.holds(anonymous) == ""
    assert pools.recycle_stats().not_reused == {"no-tenant": 1}


def test_a_killed_execution_or_a_policy_of_zero_destroys_the_container(make_pools):
    pools = make_pools()
    timed_out = _use(pools, "t-a", ("sleep", "30"), timeout_s=0.5)
    assert pools.holds(timed_out) == "" and pools.recycle_stats().not_reused == {"timeout": 1}
    off = make_pools(reuse_max_executions=0)
    first = _use(off, "t-a")
    assert _use(off, "t-a") != first and off.recycle_stats().not_reused == {"off": 2}


IDENTITY = (
    "import os\n"
    "cg = [l.split()[3] for l in open('/proc/self/mountinfo') if l.split()[4] == '/sys/fs/cgroup/memory']\n"
    "print(cg, os.stat('/workspace').st_dev, open('/proc/1/stat').read().rsplit(')', 1)[1].split()[19])\n"
)


def _container_of(endpoint: str, pools: PoolManager) -> str:
    """Which container a code run at ``endpoint`` ran in (once its reset is over)."""
    resp = run_code(RunCodeRequest(code=IDENTITY, language="python"), endpoint=endpoint, max_attempts=1)
    assert resp.status == "Success", resp
    assert pools.wait_released(timeout_s=60)
    return resp.run_result.stdout


def test_over_http_a_tenant_is_recycled_alone(docker_client, scripted):
    """Two tokens on one host's SandboxFusion door: each token's code runs reuse its own
    containers (the same one, run after run), and the other token's, idle and reset, is never
    handed to it."""
    other = secrets.token_urlsafe(16)
    for svc in start_service(
        scripted,
        capacity=2,
        pool_size=1,
        runtime_kw={"max_idle_containers": 4},  # room for both tokens' reset containers
        server_kw={"http_listen": "127.0.0.1:0", "tenants": ((other, 0),)},
    ):
        pools = svc.running.service.pools
        a_url, b_url = (f"http://127.0.0.1:{svc.running.http_port}/t/{t}" for t in (svc.token, other))
        a = _container_of(a_url, pools)
        assert _container_of(a_url, pools) == a  # recycled for its token
        b = _container_of(b_url, pools)
        assert b != a
        assert _container_of(b_url, pools) == b and _container_of(a_url, pools) == a  # each kept its own
