"""A real sandbox service on a real socket, with the scripted model server as the target."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from controller.client.sandbox_client import ChannelConfig, SandboxClient
from sandbox.runtime.spec import ContainerSpec, RuntimeConfig
from sandbox.server.serve import RunningServer, ServerConfig, serve
from sandbox.service.config import ServiceConfig
from skillopt.envs.spreadsheetbench.loader import SpreadsheetBenchData, build_task
from skillopt.models.profiles import ProviderProfile
from skillopt.testing.fixtures.spreadsheetbench import solution_code
from skillopt.testing.scripted import ScriptedModelServer
from skillopt.types import Limits, ModelSpec, RolloutRequest, SkillVersion

MiB = 1024 * 1024


@dataclass
class Service:
    running: RunningServer
    client: SandboxClient
    token: str
    model: ScriptedModelServer
    host_id: str


@pytest.fixture(scope="session")
def scripted() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as srv:
        yield srv


def start_service(
    scripted: ScriptedModelServer,
    *,
    capacity: int = 4,
    pool_size: int = 2,
    server_kw: dict | None = None,
    provider_key: str = "",
    provider_timeout_s: float = 120.0,
    runtime_kw: dict | None = None,
    container_runtime: str = "",
    **service_kw,
) -> Iterator[Service]:
    state = tempfile.mkdtemp(prefix="so-svc-", dir="/tmp")
    host_id = f"test-{uuid.uuid4().hex[:8]}"
    token = uuid.uuid4().hex
    config = ServerConfig(
        listen="127.0.0.1:0",
        token=token,
        runtime=RuntimeConfig(host_id=host_id, state_dir=state, pool_size=pool_size, **(runtime_kw or {})),
        service=ServiceConfig(
            host_id=host_id,
            capacity=capacity,
            base_spec=ContainerSpec(runtime=container_runtime),
            **service_kw,
        ),
        providers={
            "scripted": ProviderProfile(
                name="scripted",
                kind="openai_compatible",
                base_url=scripted.base_url,
                max_retries=0,
                api_key=provider_key,
                timeout_s=provider_timeout_s,
            ),
            "scripted-anthropic": ProviderProfile(
                name="scripted-anthropic",
                kind="anthropic",
                base_url=scripted.anthropic_base_url,
                max_retries=0,
                api_key=provider_key,
                timeout_s=provider_timeout_s,
            ),
        },
        drain_grace_s=5.0,
        **(server_kw or {}),
    )
    with serve(config) as running:
        client = SandboxClient(ChannelConfig(address=running.address, token=token))
        try:
            yield Service(running=running, client=client, token=token, model=scripted, host_id=host_id)
        finally:
            client.close()
    shutil.rmtree(state, ignore_errors=True)


#: The OCI runtimes the security suites run under: "" = the engine default (runc) and gVisor
#: (``scripts/setup.sh --gvisor``, which CI's ``.ci/run`` passes). Module fixtures take one as a
#: param, so each runtime's host is started once and shared by the module's cases.
RUNTIMES = [pytest.param("", id="runc"), pytest.param("runsc", id="runsc")]


@pytest.fixture(scope="module")
def service(docker_client, scripted) -> Iterator[Service]:
    yield from start_service(scripted, max_file_bytes=4 * MiB)


@pytest.fixture(scope="session")
def sample() -> SpreadsheetBenchData:
    from skillopt.envs.spreadsheetbench.loader import SAMPLE_ROOT

    return SpreadsheetBenchData(SAMPLE_ROOT)


def fenced(code: str) -> str:
    return f"Here is the script.\n\n```python\n{code}\n```\n"


class TaskScripts:
    """A responder: requests whose prompt holds a registered marker get that script's replies,
    one per turn (the scripted server's stateless turn index), clamped to the last."""

    def __init__(self) -> None:
        self.scripts: dict[str, list] = {}

    def __call__(self, req):
        text = req.text
        for marker, replies in self.scripts.items():
            if marker in text:
                return replies[min(req.turn, len(replies) - 1)]
        return None


@pytest.fixture(scope="session")
def _session_scripts(scripted) -> TaskScripts:
    responder = TaskScripts()
    scripted.add_responder(responder)
    return responder


@pytest.fixture
def scripts(_session_scripts) -> Iterator[TaskScripts]:
    """The session's task scripts; what a test registers is forgotten after it (a script left
    behind would answer a later test's request for the same task)."""
    before = dict(_session_scripts.scripts)
    yield _session_scripts
    _session_scripts.scripts.clear()
    _session_scripts.scripts.update(before)


def request_for(
    sample: SpreadsheetBenchData,
    task_id: str,
    *,
    agent: str = "codegen_single",
    rollout_id: str | None = None,
    skill: str = "",
    limits: Limits | None = None,
    use_eval_feedback: bool = False,
) -> RolloutRequest:
    task, grading = build_task(sample.task(task_id))
    return RolloutRequest(
        rollout_id=rollout_id or f"test/{task_id}/{uuid.uuid4().hex[:8]}",
        env="spreadsheetbench",
        agent=agent,
        task=task,
        grading=grading,
        skill=SkillVersion(content=skill),
        model=ModelSpec(provider="scripted", model="scripted-target"),
        limits=limits or Limits(wall_time_s=120, exec_timeout_s=60),
        use_eval_feedback=use_eval_feedback,
    )


def rss_bytes(pid: int | str = "self") -> int:
    """Resident memory of a process (this one by default), from /proc."""
    from pathlib import Path

    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


__all__ = ["Service", "TaskScripts", "fenced", "request_for", "rss_bytes", "solution_code", "start_service"]
