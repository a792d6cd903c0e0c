"""Inspect AI's own conformance suite for sandbox providers (``inspect_ai.util._sandbox.
self_check``, from the installed, pinned ``inspect-ai``), run against our ``skillopt`` provider
on a real ``serve`` host: every check must pass but ``test_exec_as_user`` (session containers
run as one unprivileged user without the capability to switch users; asking for another user is
a clear ``SandboxUserUnsupportedError``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from inspect_ai.util._sandbox.self_check import *  # noqa: F403 - the checks are the tests

from controller.client.inspect_provider import SkillOptSandboxEnvironment
from controller.client.sessions import AsyncSandboxSession, SandboxSession, SessionEndpoints
from tests.sandbox.conftest import RUNTIMES, start_service

pytestmark = pytest.mark.anyio

#: Checks our sandbox cannot pass by design (DESIGN: no root, no user switching).
EXPECTED_FAILURES = {"test_exec_as_user": "containers run as one non-root user without CAP_SETUID"}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module", params=RUNTIMES)
def host(request, docker_client, scripted):
    yield from start_service(scripted, capacity=2, pool_size=1, container_runtime=request.param)


@pytest.fixture(scope="module")
def shared_session(host) -> Iterator[SandboxSession]:
    """One session for every check, as Inspect's own runner shares one environment."""
    where = SessionEndpoints(endpoints=(host.running.address,), token=host.token)
    with SandboxSession.create(where, labels={"suite": "inspect-self-check"}) as session:
        yield session
    assert host.running.servicer.sessions.count() == 0


@pytest.fixture
async def sandbox_env(request, shared_session):
    reason = EXPECTED_FAILURES.get(request.node.originalname)
    if reason:
        request.applymarker(pytest.mark.xfail(reason=reason, strict=True))
    return SkillOptSandboxEnvironment(AsyncSandboxSession(shared_session))
