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


def _serve(tmp: Path, host_id: str, base_url: str = "", *extra: str) -> tuple[subprocess.Popen, int]:
    provider = ["--provider", f"sim=openai_compatible,base_url={base_url},max_retries=0"] if base_url else []
    proc = spawn_service(
        [
            "--listen", "127.0.0.1:0",
            "--token-file", str(tmp / "token"),
            "--host-id", host_id,
            "--state-dir", str(tmp / host_id),
            "--capacity", "2",
            "--pool-size", "2",
            *provider,
            *extra,
        ]
    )  # fmt: skip
    return proc, wait_listening(proc, 120)


def _cli(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "OPENAI_API_KEY": ""},
    )


def _stop(procs) -> None:
    for proc, _ in procs:
        proc.terminate()
        proc.wait(60)


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
                    # One step over the train split, gated on 3 selection items: enough rollouts to
                    # spread over both hosts and show the skill learned.
                    "--set",
                    "train.batch_size=10",
                    "--set",
                    "evaluation.sel_env_num=3",
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


def test_the_simulation_over_a_fleet_of_serve_simulate_hosts(docker_client, short_tmp):
    """No keys anywhere: `skillopt serve --simulate` hosts play the target, the controller plays
    the optimizer; train and eval run over --endpoints with the token from sandbox.token_file."""
    (short_tmp / "token").write_text(uuid.uuid4().hex)
    hosts = [f"simfleet-{i}-{uuid.uuid4().hex[:4]}" for i in (1, 2)]
    # `--simulate` and `--simulate noisy` hosts serve both simulated targets: the run chooses.
    procs = [
        _serve(short_tmp, h, "", *flag)
        for h, flag in zip(hosts, (["--simulate"], ["--simulate", "noisy"]), strict=True)
    ]
    plain = [_serve(short_tmp, f"plain-{uuid.uuid4().hex[:4]}")]
    try:
        endpoints = ",".join(f"127.0.0.1:{port}" for _, port in procs)
        token = f"sandbox.token_file={short_tmp / 'token'}"
        out = short_tmp / "run"
        res = _cli(
            "train", "--config", "spreadsheetbench_demo", "--simulate", "on", "--endpoints", endpoints,
            "--out", str(out), "--set", token, "--set", "train.num_epochs=1", "--set", "evaluation.eval_test=false",
            "--set", "train.batch_size=10",  # one step (the eval below repeats the whole selection split)
        )  # fmt: skip
        assert res.returncode == 0, res.stderr[-4000:]
        assert "OFFLINE SIMULATION" in res.stderr
        summary = json.loads((out / "summary.json").read_text())
        assert summary["mode"]["simulated"] is True and sorted(summary["sandbox_hosts"]) == sorted(hosts)
        assert summary["best_selection_hard"] > summary["baseline_selection_hard"]

        ev = short_tmp / "eval"
        res = _cli(
            "eval", "--config", "spreadsheetbench_demo", "--simulate", "on", "--endpoints", endpoints,
            "--skill", str(out / "best_skill.md"), "--split", "val", "--out", str(ev), "--set", token,
        )  # fmt: skip
        assert res.returncode == 0, res.stderr[-4000:]
        report = json.loads((ev / "eval_summary.json").read_text())
        assert report["simulated"] is True and report["n_infra"] == 0
        assert report["hard"] == summary["best_selection_hard"]  # the same skill, the same split
        assert "over 5 scored rollouts (95% intervals); 0 of 5 failed on infrastructure" in res.stderr
        assert report["hard_ci95"][0] <= report["hard"] <= report["hard_ci95"][1]

        # A host that does not serve the simulated target is refused with what to do.
        res = _cli(
            "eval", "--config", "spreadsheetbench_demo", "--simulate", "on",
            "--endpoints", f"127.0.0.1:{plain[0][1]}", "--skill", str(out / "best_skill.md"),
            "--split", "val", "--out", str(short_tmp / "refused"), "--set", token,
        )  # fmt: skip
        assert res.returncode == 1 and "skillopt serve --simulate" in res.stderr, res.stderr[-2000:]
    finally:
        _stop(procs + plain)


def test_eval_exits_non_zero_when_too_many_rows_fail_on_infrastructure(docker_client, short_tmp):
    from skillopt.envs.spreadsheetbench.loader import SAMPLE_ROOT, SpreadsheetBenchData
    from skillopt.testing.scripted import ScriptedModelServer
    from skillopt.testing.simulation import SimulatedTarget

    (short_tmp / "token").write_text(uuid.uuid4().hex)
    data = SpreadsheetBenchData(SAMPLE_ROOT)
    broken = {r.instruction[:80] for r in data.split("val")[:2]}
    failing = {"on": True}

    def provider_down_for_some(req):
        if failing["on"] and any(marker in req.text for marker in broken):
            return {"error": {"status": 503, "message": "upstream overloaded"}}
        return None

    with ScriptedModelServer(responders=[provider_down_for_some, SimulatedTarget()]) as server:
        procs = [_serve(short_tmp, f"infra-{uuid.uuid4().hex[:4]}", server.base_url)]
        try:
            args = (
                "eval", "--config", "spreadsheetbench_demo", "--simulate", "on",
                "--endpoints", f"127.0.0.1:{procs[0][1]}", "--skill", str(REPO / "skillopt/envs/spreadsheetbench/skills/initial.md"),
                "--split", "val", "--out", str(short_tmp / "eval"), "--set", f"sandbox.token_file={short_tmp / 'token'}",
            )  # fmt: skip
            res = _cli(*args)
            assert res.returncode == 1, res.stderr[-3000:]
            report = json.loads((short_tmp / "eval" / "eval_summary.json").read_text())
            assert report["n_infra"] == 2 and report["n_scored"] == 3 and report["ok"] is False
            assert "2 of 5 failed on infrastructure" in res.stderr and "not a measurement" in res.stderr
            # The provider is back: the same --out reruns only the failed rollouts.
            failing["on"] = False
            res = _cli(*args)
            assert res.returncode == 0, res.stderr[-3000:]
            report = json.loads((short_tmp / "eval" / "eval_summary.json").read_text())
            assert report["n_infra"] == 0 and report["n_scored"] == 5 and report["ok"] is True
        finally:
            _stop(procs)
