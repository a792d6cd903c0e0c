"""What a session may ask for, checked without a container: the policy on its own."""

from __future__ import annotations

import pytest

from sandbox.runtime.spec import ContainerSpec
from sandbox.service.config import DEFAULT_LIMITS, MAX_LIMITS, SessionConfig
from sandbox.service.session_policy import SESSION_USER, SessionPolicy, SessionRequest
from skillopt.errors import InvalidRequest, SandboxFileTooLarge, UserUnsupported
from skillopt.types import Limits
from skillopt.units import MiB

BASE = ContainerSpec()


def policy(**config) -> SessionPolicy:
    return SessionPolicy(
        SessionConfig(**config),
        host_id="h1",
        base_spec=BASE,
        gateway_spec=None,
        default_limits=DEFAULT_LIMITS,
        max_limits=MAX_LIMITS,
        max_lifetime_cap_s=7200.0,
    )


def test_a_default_request_gets_the_warm_pools_spec_and_the_hosts_defaults():
    granted = policy().admit(SessionRequest())
    assert granted.spec == BASE  # so it takes a warm container
    assert (granted.network, granted.idle_ttl_s, granted.lifetime_s) == ("none", 600.0, 3600.0)
    assert granted.limits.output_bytes == SessionConfig().default_output_bytes


def test_asked_values_are_capped_and_bad_ones_refused():
    p = policy(max_file_bytes=10, max_stdin_bytes=10, max_buffered_bytes=10)
    granted = p.admit(
        SessionRequest(idle_ttl_s=10**9, max_lifetime_s=10**9, limits=Limits(memory_bytes=64 * MiB))
    )
    assert (granted.idle_ttl_s, granted.lifetime_s, granted.spec.memory_bytes) == (
        24 * 3600.0,
        7200.0,
        64 * MiB,
    )
    for bad in (
        SessionRequest(image="elsewhere:latest"),
        SessionRequest(network="host"),
        SessionRequest(network="gateway"),  # this host has no gateway network
        SessionRequest(max_lifetime_s=0.5),
        SessionRequest(idle_ttl_s=float("nan")),
        SessionRequest(labels={"": "x"}),
        SessionRequest(files=(("../escape", b""),)),
    ):
        with pytest.raises(InvalidRequest):
            p.admit(bad)
    with pytest.raises(SandboxFileTooLarge):
        p.admit(SessionRequest(files=(("a", b"123456"), ("b", b"123456"))))


def test_each_command_is_bounded():
    p = policy()
    assert p.exec_timeout(0) == 600.0 and p.exec_timeout(10**9) == 6 * 3600.0
    assert p.output_cap(0) == 10 * MiB and p.output_cap(10**12) == 64 * MiB
    with pytest.raises(InvalidRequest):
        p.exec_timeout(-1)
    p.check_command(user=SESSION_USER, stdin_bytes=0)
    p.check_command(user="1000", stdin_bytes=0)
    with pytest.raises(UserUnsupported):
        p.check_command(user="root", stdin_bytes=0)
    with pytest.raises(InvalidRequest):
        p.check_command(user="", stdin_bytes=SessionConfig().max_stdin_bytes + 1)
