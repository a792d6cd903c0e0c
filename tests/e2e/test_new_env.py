"""A benchmark is one folder: ``skillopt/envs/_template`` copied to a new folder and renamed is
discovered, configured, simulated, checked by the env conformance suite and trained by its
demo, with no file edited outside that folder.

The copy goes to a directory of ``SKILLOPT_ENV_PATH`` (env folders kept outside the package),
so the test leaves the source tree as it found it; a folder under ``skillopt/envs/`` is found
the same way.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NAME = "mybench"


def copy_template(root: Path) -> Path:
    """``cp -r skillopt/envs/_template <root>/mybench`` and rename ``template`` in it."""
    target = root / NAME
    shutil.copytree(
        REPO / "skillopt" / "envs" / "_template", target, ignore=shutil.ignore_patterns("__pycache__")
    )
    for path in sorted(target.rglob("*"), key=lambda p: -len(p.parts)):
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            text = text.replace("skillopt.envs._template", f"skillopt.envs.{NAME}")
            text = text.replace("Template", NAME.capitalize()).replace("template", NAME)
            path.write_text(text, encoding="utf-8")
        if "template" in path.name:
            path.rename(path.with_name(path.name.replace("template", NAME)))
    return root


def run(*argv: str, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)


def test_a_copied_template_is_a_benchmark_end_to_end(tmp_path, docker_client):
    plugins = copy_template(tmp_path / "envs")
    env = {**os.environ, "SKILLOPT_ENV_PATH": str(plugins), "OPENAI_API_KEY": "", "PYTHONUNBUFFERED": "1"}
    assert not (REPO / "skillopt" / "envs" / NAME).exists()

    # Discovered, with its configs.
    listed = run(
        sys.executable, "-c", "from skillopt.config import list_builtin_configs as l; print(l())", env=env
    )
    assert f"'{NAME}_demo'" in listed.stdout, listed.stderr

    # The conformance suite runs every check on it, as on the shipped envs.
    checks = run(
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
        "tests/skillopt/envs/test_env_conformance.py", "tests/skillopt/testing/test_qa_fixtures.py", "-k", NAME,
        env=env,
    )  # fmt: skip
    assert checks.returncode == 0, checks.stdout[-4000:] + checks.stderr[-2000:]
    assert " passed" in checks.stdout and " failed" not in checks.stdout, checks.stdout[-2000:]

    # Its demo trains offline on the embedded sandbox and gates.
    out = tmp_path / "run"
    trained = run(
        sys.executable,
        "-m",
        "controller.cli",
        "train",
        "--config",
        f"{NAME}_demo",
        "--out",
        str(out),
        env=env,
    )
    assert trained.returncode == 0, trained.stderr[-4000:]
    assert "OFFLINE SIMULATION" in trained.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["env"]["name"] == NAME
    assert summary["total_accepts"] >= 1 and summary["total_rejects"] >= 1, summary["epoch_stats"]
    assert summary["best_selection_hard"] > summary["baseline_selection_hard"]
    assert summary["test_hard"] > summary["baseline_test_hard"]
