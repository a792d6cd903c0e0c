"""Docker against the runtime contract's conformance suite, under runc and under gVisor
(``runsc``, registered by ``scripts/setup.sh --gvisor``): every check must pass under both.

A new runtime (a remote VM, a Kubernetes pod) gets a test like this one, with its own
``KNOWN_FAILURES`` (empty here, and it should stay so).
"""

from __future__ import annotations

import inspect
import shutil
import tempfile
import uuid
from collections.abc import Iterator

import pytest

from sandbox.runtime.base import RolloutSandbox, SandboxRuntime, SessionSandbox
from sandbox.runtime.conformance import CHECKS, Conformance
from sandbox.runtime.docker.engine import list_containers
from sandbox.runtime.docker.runtime import DockerRuntime
from sandbox.runtime.spec import ContainerSpec, RuntimeConfig
from skillopt.errors import ContainerStartFailed
from tests.sandbox.conftest import RUNTIMES

KNOWN_FAILURES: set[str] = set()


@pytest.fixture(scope="module")
def runtime(docker_client) -> Iterator[DockerRuntime]:
    state = tempfile.mkdtemp(prefix="so-conf-", dir="/tmp")
    rt = DockerRuntime(
        RuntimeConfig(host_id=f"test-conformance-{uuid.uuid4().hex[:6]}", state_dir=state, pool_size=0)
    )
    rt.reap(startup=True)
    yield rt
    rt.close()
    shutil.rmtree(state, ignore_errors=True)


def test_the_suite_covers_the_contract():
    assert len(CHECKS) >= 10
    assert issubclass(DockerRuntime, SandboxRuntime)
    checks = "".join(inspect.getsource(check) for check in CHECKS.values())
    for method in sorted(SessionSandbox.__abstractmethods__ - RolloutSandbox.__abstractmethods__):
        assert f".{method}(" in checks, f"no conformance check drives SessionSandbox.{method}"


@pytest.fixture(scope="module", params=RUNTIMES)
def conformance(request, runtime) -> Iterator[Conformance]:
    c = Conformance(runtime, ContainerSpec(runtime=request.param))
    yield c
    c.close()
    assert runtime.live_count() == 0  # every check cleaned up after itself


#: Checks gVisor cannot pass, and why (strict: one that starts passing fails, to be removed).
#: None now: the one there was (bookworm's own runsc rejects statx's AT_NO_AUTOMOUNT, so ls and
#: stat failed) is met by a newer gVisor and the runtime image's docker/runtime/gvisor_compat.c.
RUNSC_EXPECTED_FAILURES: dict[str, str] = {}


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_docker_runtime_conforms(request, conformance, name):
    if conformance.spec.runtime == "runsc" and name in RUNSC_EXPECTED_FAILURES:
        request.applymarker(pytest.mark.xfail(reason=RUNSC_EXPECTED_FAILURES[name], strict=True))
    if name in KNOWN_FAILURES:
        pytest.fail(f"{name} is a known failure of the docker runtime: fix it")
    CHECKS[name](conformance)


def test_closing_aborts_creations_and_leaves_nothing(docker_client, short_tmp):
    host_id = f"test-conf-close-{uuid.uuid4().hex[:6]}"
    rt = DockerRuntime(RuntimeConfig(host_id=host_id, state_dir=str(short_tmp), pool_size=0))
    handle = rt.create(ContainerSpec())
    rt.abort_creations()
    with pytest.raises(ContainerStartFailed, match="closing"):
        rt.create(ContainerSpec())
    rt.close()
    assert not rt.alive(handle)
    assert list_containers(docker_client, f"skillopt.host={host_id}") == []


def test_pandas_is_imported_into_the_runner_only_when_a_program_uses_it(runtime):
    """On-demand imports: the runner's parent loads pandas the first time a program mentions
    it (so later forks have it), never for programs that do not, and never blocks on a hostile
    "program" file (a FIFO)."""
    handle = runtime.create(ContainerSpec())
    try:
        box = runtime.lease(handle, "test/on-demand")
        probe = b"import sys\nprint('pandas' in sys.modules)\n"
        box.write_file("probe.py", probe)
        box.write_file(
            "uses.py", probe + b"import numpy as np, pandas as pd\nprint(pd.DataFrame({'a': [1]}).shape)\n"
        )
        # A FIFO as the program: the parent's scan must not block on it (the child then blocks
        # reading it and is killed at its timeout, as any program would be).
        box.run_command(["mkfifo", "fifo.py"], timeout_s=30)
        out = box.run_python("fifo.py", timeout_s=1.5)
        assert out.timed_out, out
        assert box.run_python("probe.py", timeout_s=60).stdout_tail.split() == ["False"]
        assert box.run_python("uses.py", timeout_s=60).stdout_tail.split() == ["True", "(1,", "1)"]
        assert box.run_python("probe.py", timeout_s=60).stdout_tail.split() == ["True"]
    finally:
        runtime.destroy(handle)


_NUMERIC_PROBE = b"""import subprocess, sys
print("numpy" in sys.modules)
import numpy as np, openpyxl
from openpyxl.cell import cell
plain = subprocess.run(
    [sys.executable, "-c", "import openpyxl.cell.cell as c; print(sorted(map(repr, set(c.KNOWN_TYPES))))"],
    capture_output=True, text=True,
).stdout.strip()
print(sorted(map(repr, set(cell.KNOWN_TYPES))) == eval(plain), openpyxl.NUMPY)
wb = openpyxl.Workbook()
wb.active["A1"], wb.active["A2"] = np.int64(7), np.float32(2.5)
wb.save("n.xlsx")
print([c.value for c in openpyxl.load_workbook("n.xlsx").active["A"]])
"""


def test_openpyxl_is_preimported_without_numpy_and_gets_numpy_types_when_it_arrives(runtime):
    """The runner hides numpy while it preimports openpyxl (half of openpyxl's import cost);
    once a program imports numpy, openpyxl treats numpy scalars exactly as a plain import of
    openpyxl does (same known cell types; a numpy value is written as a number)."""
    handle = runtime.create(ContainerSpec())
    try:
        box = runtime.lease(handle, "test/numpy-deferred")
        box.write_file("probe.py", _NUMERIC_PROBE)
        out = box.run_python("probe.py", timeout_s=60)
        assert out.exit_code == 0, out.stderr_tail
        assert out.stdout_tail.split("\n")[:3] == ["False", "True True", "[7, 2.5]"]
    finally:
        runtime.destroy(handle)
