"""Training over a fleet of two remote sandbox hosts (``--endpoints``), with real provider
profiles on both sides pointing at the scripted model server: the same code path as the
embedded default, one host or many."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import yaml

from controller.embedded import spawn_service, wait_listening
from skillopt.testing.simulation import SIM_OPTIMIZER, SIM_TARGET, simulation_server

REPO = Path(__file__).resolve().parents[2]


def _serve(tmp: Path, host_id: str, base_url: str) -> tuple[subprocess.Popen, int]:
    proc = spawn_service(
        [
            "--listen", "127.0.0.1:0",
            "--token-file", str(tmp / "token"),
            "--host-id", host_id,
            "--state-dir", str(tmp / host_id),
            "--capacity", "2",
            "--pool-size", "2",
            "--provider", f"sim=openai_compatible,base_url={base_url},max_retries=0",
        ]
    )  # fmt: skip
    return proc, wait_listening(proc, 120)


def test_training_over_two_remote_hosts(docker_client, short_tmp):
    (short_tmp / "token").write_text(uuid.uuid4().hex)
    hosts = [f"fleet-{i}-{uuid.uuid4().hex[:4]}" for i in (1, 2)]
    with simulation_server() as sim:
        providers = short_tmp / "providers.yaml"
        providers.write_text(
            yaml.safe_dump({"providers": {"sim": {"kind": "openai_compatible", "base_url": sim.base_url}}})
        )
        procs = [_serve(short_tmp, h, sim.base_url) for h in hosts]
        try:
            endpoints = ",".join(f"127.0.0.1:{port}" for _, port in procs)
            out = short_tmp / "run"
            res = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "controller.cli",
                    "train",
                    "--config",
                    "spreadsheetbench_demo",
                    "--endpoints",
                    endpoints,
                    "--out",
                    str(out),
                    "--set",
                    "run.simulate=off",
                    "--set",
                    f"model.providers_file={providers}",
                    "--set",
                    "model.optimizer_provider=sim",
                    "--set",
                    "model.target_provider=sim",
                    "--set",
                    f"model.optimizer={SIM_OPTIMIZER}",
                    "--set",
                    f"model.target={SIM_TARGET}",
                    "--set",
                    f"sandbox.token_file={short_tmp / 'token'}",
                    "--set",
                    "train.num_epochs=1",
                ],
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=900,
                env={**os.environ, "OPENAI_API_KEY": ""},
            )
        finally:
            for proc, _ in procs:
                proc.terminate()
                proc.wait(60)
    assert res.returncode == 0, res.stderr[-4000:]
    assert "OFFLINE SIMULATION" not in res.stderr  # real profiles, real wire, no simulation mode
    summary = json.loads((out / "summary.json").read_text())
    assert sorted(summary["sandbox_hosts"]) == sorted(hosts)  # placement used both hosts
    assert summary["best_selection_hard"] > summary["baseline_selection_hard"]
    rows = [json.loads(line) for p in out.rglob("results.jsonl") for line in p.read_text().splitlines()]
    assert {r["host"] for r in rows} == set(hosts)
