"""Faults under a host mid-batch, with real ``skillopt serve`` processes and a real fleet
client: its container engine restarts, its disk fills up. Rollouts caught by the fault end as
typed infrastructure rows, the host reports NOT_SERVING until it can serve again, the
controller reruns them, and every request ends as exactly one good row.

The engine that restarts is a private ``dockerd`` owned by this test (own data root, exec root,
socket, pid file; no bridge, no iptables), never the shared one; it gets a small image built
from the runtime image's base (python3, openpyxl, pandas: what codegen rollouts use), because
loading the 1 GB runtime image into it costs most of a minute. The full disk is a 64 MiB tmpfs
mounted for the service's state dir (rollout workspaces are tmpfs inside each container, so
the state dir is the host disk a rollout writes to), never the machine's own disk.
"""

from __future__ import annotations

import dataclasses
import io
import os
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from controller.client.sandbox_client import ChannelConfig, SandboxClient
from controller.embedded import spawn_service, wait_listening
from controller.fleet.executor import FleetExecutor
from controller.fleet.hosts import FleetEvent
from skillopt.envs.spreadsheetbench.loader import SAMPLE_ROOT, SpreadsheetBenchData, build_task
from skillopt.errors import Draining
from skillopt.testing.simulation import SIM_TARGET, simulation_server
from skillopt.types import Limits, ModelSpec, RolloutRequest, RolloutResult, SkillVersion

BASE = "skillopt-base:bookworm"
FAULT_IMAGE = "skillopt-faultbox:latest"
# The runtime image's user and mount points, on the bare base (no agent CLIs).
_DOCKERFILE = f"""FROM {BASE}
RUN groupadd --gid 1000 sandbox && useradd --uid 1000 --gid 1000 --home-dir /workspace \\
      --no-create-home --shell /bin/sh sandbox && mkdir -p /workspace /skill /control /opt/skillopt \\
    && chown 1000:1000 /workspace
ENV HOME=/workspace LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1
WORKDIR /workspace
USER 1000:1000
"""


@dataclasses.dataclass
class PrivateDockerd:
    root: Path
    proc: subprocess.Popen | None = None

    @property
    def host(self) -> str:
        return f"unix://{self.root}/docker.sock"

    def start(self, timeout_s: float = 120.0) -> None:
        """Start it and wait for its own "API listen on" log line.

        It runs in a network namespace of its own (``unshare --net``): a dockerd started with
        ``--bridge=none`` deletes the default bridge interface ``docker0`` of the namespace it
        runs in, which would take the host engine's bridge away (every later ``docker build``
        fails "could not find bridge docker0"). Only its unix socket is used."""
        self.proc = subprocess.Popen(
            [
                "unshare",
                "--net",
                "--",
                "dockerd",
                f"--data-root={self.root}/data",
                f"--exec-root={self.root}/exec",
                f"--pidfile={self.root}/dockerd.pid",
                f"-H={self.host}",
                "--bridge=none",
                "--iptables=false",
                "--ip-masq=false",
                f"--cgroup-parent=skillopt-private-{self.root.name}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        ready = threading.Event()

        def follow() -> None:
            assert self.proc is not None and self.proc.stderr is not None
            for line in self.proc.stderr:
                if "API listen on" in line:
                    ready.set()
            # keep draining so the daemon never blocks on a full pipe

        threading.Thread(target=follow, daemon=True).start()
        assert ready.wait(timeout_s), "the private dockerd did not come up"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(120)

    def client(self) -> docker.DockerClient:
        return docker.DockerClient(base_url=self.host)


@pytest.fixture(scope="module")
def private_dockerd(docker_client) -> Iterator[PrivateDockerd]:
    root = Path(tempfile.mkdtemp(prefix="so-dd-", dir="/tmp"))
    d = PrivateDockerd(root)
    bridge = Path("/sys/class/net/docker0")
    had_bridge = bridge.exists()
    t0 = time.monotonic()
    docker_client.images.build(fileobj=io.BytesIO(_DOCKERFILE.encode()), tag=FAULT_IMAGE, rm=True)
    d.start()
    try:
        t1 = time.monotonic()
        save = subprocess.Popen(["docker", "save", FAULT_IMAGE], stdout=subprocess.PIPE)
        load = subprocess.run(
            ["docker", "-H", d.host, "load", "-q"], stdin=save.stdout, capture_output=True, text=True
        )
        save.wait(300)
        assert load.returncode == 0 and save.returncode == 0, load.stderr
        print(f"private dockerd: image build {t1 - t0:.1f}s, load {time.monotonic() - t1:.1f}s")
        yield d
    finally:
        d.stop()
        subprocess.run(["umount", "-R", str(root / "exec")], capture_output=True)
        subprocess.run(["rm", "-rf", "--one-file-system", str(root)], capture_output=True)
    # The host engine keeps its bridge (builds and bridged containers need it).
    assert bridge.exists() or not had_bridge, "the private dockerd took the host's docker0 away"


def _requests(n: int, tag: str) -> list[RolloutRequest]:
    data = SpreadsheetBenchData(SAMPLE_ROOT)
    out = []
    for k in range(n):
        tid = data.ids[k % len(data.ids)]
        task, grading = build_task(data.task(tid))
        out.append(
            RolloutRequest(
                rollout_id=f"{tag}/{k}",
                env="spreadsheetbench",
                agent="codegen_single",
                task=dataclasses.replace(task, id=f"{tid}#{k}"),
                grading=grading,
                skill=SkillVersion(content=""),
                model=ModelSpec(provider="sim", model=SIM_TARGET),
                limits=Limits(wall_time_s=180, exec_timeout_s=60),
            )
        )
    return out


def _serve(
    tmp: Path, state: Path, model_url: str, *, image: str, docker_host: str = "", capacity: int = 2
) -> tuple[subprocess.Popen, int]:
    env_host = os.environ.get("DOCKER_HOST")
    if docker_host:
        os.environ["DOCKER_HOST"] = docker_host  # spawn_service passes our environment on
    try:
        proc = spawn_service(
            [
                "--listen", "127.0.0.1:0", "--token-file", str(tmp / "token"),
                "--host-id", f"fault-{uuid.uuid4().hex[:6]}", "--state-dir", str(state),
                "--capacity", str(capacity), "--pool-size", "2", "--image", image,
                "--provider", f"sim=openai_compatible,base_url={model_url},max_retries=0",
                "--exec-agents", "off", "--drain-grace", "5",
            ]
        )  # fmt: skip
    finally:
        if docker_host:
            if env_host is None:
                os.environ.pop("DOCKER_HOST", None)
            else:
                os.environ["DOCKER_HOST"] = env_host
    return proc, wait_listening(proc, 180)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)


def _run_batch(address: str, token: str, requests, on_result, on_event) -> list[RolloutResult]:
    rows: list[RolloutResult] = []

    def collect(row: RolloutResult) -> None:
        rows.append(row)
        on_result(row, len(rows))

    with FleetExecutor(
        [ChannelConfig(address=address, token=token)], workers=2, max_attempts=5, on_event=on_event
    ) as fleet:
        fleet.run(requests, on_result=collect, stop=threading.Event())
    return rows


def test_dockerd_restart_mid_batch_loses_nothing(private_dockerd, short_tmp):
    (short_tmp / "token").write_text(uuid.uuid4().hex)
    token = (short_tmp / "token").read_text()
    events: list[FleetEvent] = []
    restarted = threading.Event()
    timings: dict[str, float] = {}
    # The rollouts after the second row wait for their model reply until the engine is down,
    # so the restart lands mid-batch (rollouts on reused containers finish a batch of 8 faster
    # than the engine stops).
    hold, engine_down = threading.Event(), threading.Event()

    def wait_for_the_fault(_request) -> None:
        if hold.is_set():
            engine_down.wait(120)
        return None  # the simulation answers

    with simulation_server(before=[wait_for_the_fault]) as sim:
        proc, port = _serve(
            short_tmp, short_tmp / "state", sim.base_url, image=FAULT_IMAGE, docker_host=private_dockerd.host
        )
        client = SandboxClient(ChannelConfig(address=f"127.0.0.1:{port}", token=token))
        try:

            def restart() -> None:
                t0 = time.monotonic()
                private_dockerd.stop()  # its containers (in-flight rollouts, warm pool) die with it
                engine_down.set()
                # The host notices on its own and says so on the health stream.
                assert client.wait_until_not_serving(timeout_s=60)
                private_dockerd.start()
                timings["restart_s"] = time.monotonic() - t0
                restarted.set()

            def on_result(row: RolloutResult, n: int) -> None:
                if n == 2 and not hold.is_set():
                    hold.set()
                    threading.Thread(target=restart, daemon=True).start()

            requests = _requests(8, f"dockerd-{uuid.uuid4().hex[:4]}")
            t0 = time.monotonic()
            rows = _run_batch(f"127.0.0.1:{port}", token, requests, on_result, events.append)
            timings["batch_s"] = time.monotonic() - t0
            assert restarted.wait(120)
            assert "retry" in [e.kind for e in events]  # the fault hit rollouts in flight
            # Nothing lost, nothing doubled, nothing left as an infrastructure failure.
            assert sorted(r.rollout_id for r in rows) == sorted(r.rollout_id for r in requests)
            assert [(r.rollout_id, r.fail_reason) for r in rows if r.infra_error is not None] == []
            # The service survived and serves again on the restarted engine (its watch notices
            # the engine's return on its next check, which may come after the batch ended).
            assert proc.poll() is None and client.wait_until_serving(timeout_s=60)
            assert (
                client.run(_requests(1, f"after-{uuid.uuid4().hex[:4]}")[0], timeout_s=180).infra_error
                is None
            )
        finally:
            client.close()
            _stop(proc)
    print(f"dockerd restart: {timings}, fleet events {[e.kind for e in events]}")


def test_a_full_disk_mid_batch_gives_typed_errors_and_the_host_survives(docker_client, short_tmp):
    (short_tmp / "token").write_text(uuid.uuid4().hex)
    token = (short_tmp / "token").read_text()
    disk = short_tmp / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m,nr_inodes=4096", "tmpfs", str(disk)], check=True)
    filler = disk / "filler"
    filled, refused = threading.Event(), threading.Event()
    events: list[FleetEvent] = []
    try:
        with simulation_server() as sim:
            # One slot more than the batch uses: the probe rollout below must not find it full.
            proc, port = _serve(
                short_tmp, disk / "state", sim.base_url, image="skillopt-runtime:latest", capacity=3
            )
            client = SandboxClient(ChannelConfig(address=f"127.0.0.1:{port}", token=token))
            try:

                def fill_then_free() -> None:
                    with open(filler, "wb") as fh:  # until ENOSPC: the disk is full
                        try:
                            while True:
                                fh.write(b"\0" * (1 << 20))
                                fh.flush()
                        except OSError:
                            pass
                    try:
                        # A rollout sent now is refused at the door, typed, with the reason (one
                        # already running fails as a typed, retryable row: the batch shows it).
                        req = _requests(1, f"full-{uuid.uuid4().hex[:4]}")[0]
                        with pytest.raises(Draining, match="state dir"):
                            client.run(req, timeout_s=180)
                        assert client.wait_until_not_serving(timeout_s=60)  # and the host says so
                        refused.set()
                    finally:
                        filler.unlink()
                        filled.set()

                def on_result(row: RolloutResult, n: int) -> None:
                    if n == 2 and not filled.is_set():
                        threading.Thread(target=fill_then_free, daemon=True).start()

                requests = _requests(8, f"disk-{uuid.uuid4().hex[:4]}")
                rows = _run_batch(f"127.0.0.1:{port}", token, requests, on_result, events.append)
                assert filled.wait(180) and refused.is_set()
                assert sorted(r.rollout_id for r in rows) == sorted(r.rollout_id for r in requests)
                assert [(r.rollout_id, r.fail_reason) for r in rows if r.infra_error is not None] == []
                assert proc.poll() is None and client.healthy()
            finally:
                client.close()
                _stop(proc)
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)
    print(f"full disk: fleet events {[e.kind for e in events]}")
