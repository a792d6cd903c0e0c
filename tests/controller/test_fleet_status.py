"""``skillopt fleet status`` against real hosts, and a run pinned to one runtime image digest:
hosts that run another image are refused (or, by choice, only warned about)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from controller.client.sandbox_client import ChannelConfig
from controller.fleet.executor import FleetExecutor
from controller.session import _pin_environment
from sandbox.runtime.spec import DEFAULT_IMAGE
from skillopt.config import load_config
from skillopt.errors import ConfigError
from tests.controller.test_fleet_faults import _hosts_file_name, _serve, _stop

REPO = Path(__file__).resolve().parents[2]


def _status(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", "fleet", "status", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def other_image(docker_client):
    """A runtime image with another digest (the same image plus a label)."""
    tag = f"skillopt-runtime:pin-test-{uuid.uuid4().hex[:6]}"
    docker_client.images.build(
        fileobj=io.BytesIO(f"FROM {DEFAULT_IMAGE}\nLABEL org.skillopt.pin-test={tag}\n".encode()),
        tag=tag,
        rm=True,
    )
    yield tag
    docker_client.images.remove(tag, force=True)


@pytest.fixture
def fleet_dir(short_tmp) -> Path:
    (short_tmp / "token").write_text(uuid.uuid4().hex)
    return short_tmp


def test_fleet_status_reports_every_host_and_fails_on_a_dead_one(docker_client, fleet_dir):
    hosts = [_serve(fleet_dir, "") for _ in range(2)]
    token = ["--token-file", str(fleet_dir / "token")]
    try:
        endpoints = ",".join(h.address for h in hosts)
        res = _status("--endpoints", endpoints, *token, "--json")
        assert res.returncode == 0, res.stdout + res.stderr
        report = json.loads(res.stdout)
        assert report["ok"] is True and report["problems"] == []
        by_addr = {h["address"]: h for h in report["hosts"]}
        for h in hosts:
            r = by_addr[h.address]
            assert r["health"] == "SERVING" and r["host"] == h.host_id and r["capacity"] == 2
            assert (r["sessions"], r["max_sessions"]) == (0, 64)  # the general sandbox API's count
            assert (r["skill_package_max_files"], r["skill_package_max_bytes"]) == (200, 8 * 1024 * 1024)
            assert r["image_digests"][DEFAULT_IMAGE].startswith("sha256:") and r["version"]
            assert r["gvisor"] == ("runsc" in r["available_runtimes"]) and r["engine_version"].startswith(
                "Docker"
            )
            assert {"codex-version", "claude-version"} <= {
                k.removeprefix("org.skillopt.") for k in r["image_labels"]
            }
        # The human table says the same.
        res = _status("--endpoints", endpoints, *token)
        assert res.returncode == 0 and "fleet: ok" in res.stdout and hosts[0].host_id in res.stdout
        assert "200 files, 8 MiB" in res.stdout  # the skill packages each host mounts
        # A wrong token: the host serves health but refuses us.
        (fleet_dir / "bad").write_text("not-the-token")
        res = _status("--endpoints", hosts[0].address, "--token-file", str(fleet_dir / "bad"))
        assert res.returncode == 1 and "refuses us" in res.stdout
        os.kill(hosts[1].proc.pid, signal.SIGKILL)
        hosts[1].proc.wait(30)
        res = _status("--endpoints", endpoints, *token)
        assert res.returncode == 1
        assert f"problem: {hosts[1].address}: down" in res.stdout
    finally:
        for h in hosts:
            _stop(h, docker_client)


def test_fleet_status_expands_a_dns_name_and_flags_differing_images(docker_client, fleet_dir, other_image):
    with _hosts_file_name() as (name, set_addresses):
        set_addresses(["127.0.0.2", "127.0.0.3"])
        from tests.controller.test_fleet_faults import _free_port

        port = _free_port(["127.0.0.2", "127.0.0.3"])
        a = _serve(fleet_dir, "", listen=f"127.0.0.2:{port}")
        b = _serve(fleet_dir, "", "--image", other_image, listen=f"127.0.0.3:{port}")
        try:
            res = _status(
                "--endpoints", f"dns:///{name}:{port}", "--token-file", str(fleet_dir / "token"), "--json"
            )
            report = json.loads(res.stdout)
            assert res.returncode == 1
            assert sorted(h["address"] for h in report["hosts"]) == [f"127.0.0.2:{port}", f"127.0.0.3:{port}"]
            assert any("differ in runtime image digest" in p for p in report["problems"]), report["problems"]
        finally:
            _stop(a, docker_client)
            _stop(b, docker_client)


def test_a_run_is_pinned_to_one_runtime_image(docker_client, fleet_dir, other_image):
    same = _serve(fleet_dir, "")
    other = _serve(fleet_dir, "", "--image", other_image)
    token = (fleet_dir / "token").read_text()
    channels = [ChannelConfig(address=h.address, token=token) for h in (same, other)]
    refuse = load_config("spreadsheetbench_demo", [])
    warn = load_config("spreadsheetbench_demo", ["sandbox.image_digest_policy=warn"])
    try:
        with FleetExecutor(channels, workers=2) as fleet:
            digests = fleet.image_digests()
            pin = digests[same.address][DEFAULT_IMAGE]
            # A fresh run on hosts that differ is refused outright.
            with pytest.raises(ConfigError, match="different runtime images"):
                _pin_environment(fleet, refuse, "")
            # A resumed run keeps its pin: the other host is left out of placement.
            env = _pin_environment(fleet, refuse, pin)
            assert env["runtime_image_digest"] == pin
            state = {h.address: h for h in fleet.hosts_state}
            assert state[other.address].excluded and not state[same.address].excluded
            # With "warn" the other host is used, and said to differ.
            env = _pin_environment(fleet, warn, pin)
            assert not state[other.address].excluded
        with (
            FleetExecutor(channels[1:], workers=1) as fleet,
            pytest.raises(ConfigError, match="no reachable sandbox host runs this run's runtime image"),
        ):
            _pin_environment(fleet, refuse, pin)
    finally:
        _stop(same, docker_client)
        _stop(other, docker_client)


def test_a_textworld_run_pins_its_game_image_like_the_runtime_image(docker_client, fleet_dir):
    from skillopt.envs.textworld.spec import IMAGE as GAME_IMAGE

    host = _serve(fleet_dir, "")
    token = (fleet_dir / "token").read_text()
    channels = [ChannelConfig(address=host.address, token=token)]
    refuse = load_config("textworld_demo", [])
    warn = load_config("textworld_demo", ["sandbox.image_digest_policy=warn"])
    try:
        with FleetExecutor(channels, workers=1) as fleet:
            game = fleet.agent_image_digests()[host.address][GAME_IMAGE]
            assert game.startswith("sha256:")  # Describe reports the game image's digest
            env = _pin_environment(fleet, refuse, "")
            assert env["agent_image"] == GAME_IMAGE and env["agent_image_digest"] == game
            runtime = env["runtime_image_digest"]
            # A resumed run started on another build of the game image: this host is left out.
            other = "sha256:" + "0" * 64
            with pytest.raises(ConfigError, match=f"and {GAME_IMAGE} {other}"):
                _pin_environment(fleet, refuse, runtime, other)
            assert fleet.hosts_state[0].excluded.endswith(f"not the run's {other}")
            _pin_environment(fleet, warn, runtime, other)  # warn: used, and said to differ
            assert not fleet.hosts_state[0].excluded
        # A run on the runtime image alone pins no game image.
        with FleetExecutor(channels, workers=1) as fleet:
            env = _pin_environment(fleet, load_config("searchqa_demo", []), "")
            assert "agent_image" not in env
    finally:
        _stop(host, docker_client)
