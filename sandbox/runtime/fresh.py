"""Clean grading containers without a sandbox service: for ``skillopt score`` and tests.

The service gives agents ``ctx.grading_sandbox`` from its pool; outside a service, this module
gives the same thing straight from a :class:`~sandbox.runtime.docker.runtime.DockerRuntime`
(one hardened, network-less container per call: with a warm pool, a container reset to a
verified clean slate after each call and reused; without, a new one destroyed afterwards).

Usage::

    with local_grading_sandboxes() as fresh:
        with fresh() as box:          # a new container
            box.write_file("x.py", b"print(1)")
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

from sandbox.runtime.lease import LeasedSandbox
from sandbox.runtime.pool import PoolManager
from sandbox.runtime.spec import ContainerSpec, RuntimeConfig

__all__ = ["local_grading_sandboxes"]

#: Everything graded through one factory is one caller's: its containers are recycled for it.
_LOCAL_TENANT = "local-grading"


@contextlib.contextmanager
def local_grading_sandboxes(
    *, spec: ContainerSpec | None = None, output_limit_bytes: int = 256 * 1024, warm: int = 0
) -> Iterator[Callable[[], AbstractContextManager[LeasedSandbox]]]:
    """A factory of fresh grading sandboxes on the local Docker engine.

    Args:
        spec: the containers' spec (default: the hardened default, no network).
        output_limit_bytes: stdout/stderr tail kept per execution.
        warm: keep this many idle containers started ahead (a pool, whose used containers are
            reset for the next call and reused, ``docs/recycling.md``); 0: a new container
            per call, destroyed afterwards.

    Raises:
        SandboxUnavailable: the Docker engine cannot be reached (the message says how to
            start it).
    """
    from sandbox.runtime.docker.runtime import DockerRuntime

    state = tempfile.mkdtemp(prefix="so-grade-", dir="/tmp")
    spec = spec or ContainerSpec()
    try:
        runtime = DockerRuntime(
            RuntimeConfig(host_id=f"grade-{uuid.uuid4().hex[:8]}", state_dir=state, pool_size=warm)
        )
    except BaseException:
        shutil.rmtree(state, ignore_errors=True)
        raise
    runtime.reap(startup=True)  # what killed CLIs and dead hosts left on this engine
    pools = PoolManager(runtime, default_spec=spec) if warm else None

    @contextlib.contextmanager
    def fresh() -> Iterator[LeasedSandbox]:
        handle = (
            pools.acquire(spec, timeout_s=180.0, tenant=_LOCAL_TENANT)
            if pools is not None
            else runtime.create(spec)
        )
        try:
            yield LeasedSandbox(runtime, handle, rollout_id="grading", output_limit_bytes=output_limit_bytes)
        finally:
            if pools is not None:
                pools.release(handle)
            else:
                runtime.destroy(handle)

    try:
        yield fresh
    finally:
        if pools is not None:
            pools.close()
        runtime.close()
        shutil.rmtree(state, ignore_errors=True)
