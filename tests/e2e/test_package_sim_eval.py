"""The simulation's package family through the real sandbox: ``skillopt eval --skill DIR`` (a
real subprocess, the embedded service, hardened containers, the package mounted read-only at
``/skill``, trusted grading) on hand-made packages, with the scripted target; and the package
demo's training run, launched from the WebUI (``skillopt train --config
spreadsheetbench_package_demo`` in its own process).

What must hold (issue 33, item 5): a fiscal task is solved only when SKILL.md points to a
reference that states the rule (the same rule in SKILL.md alone does not help, nor a reference
nothing points to); an amount task only when the helper is under ``scripts/`` and works: the
program imports it in the container, so a broken helper makes it crash.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx

from skillopt.testing.fixtures.spreadsheetbench.package import helper_source, package_rules

REPO = Path(__file__).resolve().parents[2]
FISCAL = package_rules()["fiscal-calendar"]
AMOUNTS = package_rules()["european-amounts"]


def _package(root: Path, name: str, body: str, files: dict[str, str]) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: Spreadsheet tasks with openpyxl.\n---\n# Spreadsheet skill\n\n{body}\n"
    )
    for rel, text in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if rel.startswith("scripts/"):
            path.chmod(0o755)
    return folder


def _eval(out: Path, skill: Path, against: Path) -> tuple[dict[str, dict], dict[str, dict]]:
    """Both skills on the val split (2 fiscal + 2 amount tasks): their rows by task id."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "controller.cli",
            "eval",
            "--config",
            "spreadsheetbench_package_demo",
            "--skill",
            str(skill),
            "--against",
            str(against),
            "--split",
            "val",
            "--simulate",
            "on",
            "--out",
            str(out),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OPENAI_API_KEY": ""},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]

    def rows(label: str) -> dict[str, dict]:
        lines = (out / label / "results.jsonl").read_text().splitlines()
        return {r["id"]: r for r in map(json.loads, lines) if r["infra_error"] is None}

    return rows("eval_val"), rows("eval_val_against")


def _passed(rows: dict[str, dict]) -> set[str]:
    return {tid for tid, r in rows.items() if r["hard"] == 1.0}


def test_the_reference_it_read_and_the_helper_it_imported_solve_what_skill_md_alone_cannot(
    tmp_path, docker_client
):
    full = _package(
        tmp_path,
        "full",
        FISCAL.pointer,
        {FISCAL.path: FISCAL.reference_document(), AMOUNTS.path: helper_source(AMOUNTS)},
    )
    plain = tmp_path / "plain.md"  # a one-file skill that states the fiscal rule itself
    plain.write_text(f"# Spreadsheet skill\n\n- {FISCAL.text}\n- {AMOUNTS.text}\n")
    rows, against = _eval(tmp_path / "full_vs_plain", full, plain)
    assert len(rows) == len(against) == 4
    assert _passed(rows) == {"pkg-fiscal-3", "pkg-fiscal-4", "pkg-amount-3", "pkg-amount-4"}
    assert _passed(against) == set()
    assert all(r["fail_reason"].startswith("eval-mismatch") for r in against.values())


def test_a_broken_helper_crashes_the_program_and_an_unpointed_reference_is_never_read(
    tmp_path, docker_client
):
    broken = _package(
        tmp_path,
        "broken",
        FISCAL.pointer,
        {
            FISCAL.path: "# Fiscal calendar\n\nAsk the finance team.\n",
            AMOUNTS.path: helper_source(AMOUNTS, broken=True),
        },
    )
    unpointed = _package(
        tmp_path,
        "unpointed",
        "Use the files of this skill.",
        {FISCAL.path: FISCAL.reference_document(), AMOUNTS.path: helper_source(AMOUNTS)},
    )
    rows, against = _eval(tmp_path / "broken_vs_unpointed", broken, unpointed)
    assert _passed(rows) == set()
    for tid in ("pkg-amount-3", "pkg-amount-4"):  # ran in the container and failed on the import
        assert rows[tid]["fail_reason"].startswith("exec-error") and "SyntaxError" in rows[tid]["fail_reason"]
    for tid in ("pkg-fiscal-3", "pkg-fiscal-4"):  # read the reference; it lacks the rule
        assert rows[tid]["fail_reason"].startswith("eval-mismatch")
    assert _passed(against) == {"pkg-amount-3", "pkg-amount-4"}


def test_the_package_demo_accepts_a_reference_then_a_working_script_and_the_check_drops_the_broken_one(
    tmp_path, docker_client, ui_server_factory
):
    """The demo launched from the WebUI (which runs ``skillopt train --config
    spreadsheetbench_package_demo``, offline), for its first epoch (what is checked here
    happens there; the second epoch only rolls out more): step 1 proposes the reference (with
    SKILL.md's pointer) and a helper with a syntax error; the sandbox check drops the helper,
    the gate accepts the reference. Step 2, told by the step buffer, proposes the working
    helper: checked, accepted. No version the gate saw holds the broken helper, and the step
    pages show the change per file."""
    ui = ui_server_factory(tmp_path / "runs")
    with httpx.Client(base_url=ui.url, timeout=30) as c:
        launched = c.post(
            "/api/launch",
            json={
                "config": "spreadsheetbench_package_demo",
                "name": "pkg",
                "values": {"train.num_epochs": 1},
            },
            headers={"Origin": ui.url},
        )
        assert launched.status_code == 200, launched.text
        status = _wait_done(c, "pkg")
        assert status == "finished", (status, (tmp_path / "runs/pkg/train.log").read_text()[-4000:])
        step_one = c.get("/runs/pkg/steps/1").text
    out = tmp_path / "runs" / "pkg"
    assert json.loads((out / "runtime_state.json").read_text())["mode"]["simulated"] is True
    history = json.loads((out / "history.json").read_text())
    first, second = history[0], history[1]

    def changes(rec: dict) -> dict[str, str]:
        return {c["path"]: c["status"] for c in rec.get("file_changes") or ()}

    # Step 1: the broken helper failed its check (so its edit never reached the gate) and the
    # reference passed the gate.
    assert [(c["path"], c["ok"], c["rule"]) for c in first["script_checks"]] == [
        (AMOUNTS.path, False, "python-compile")
    ]
    assert first["action"].startswith("accept")
    assert changes(first) == {"SKILL.md": "changed", FISCAL.path: "added"}
    # Step 2: the working helper passed its check (compile and --self-test) and the gate.
    assert [(c["path"], c["ok"]) for c in second["script_checks"]] == [(AMOUNTS.path, True)]
    assert second["action"].startswith("accept") and changes(second)[AMOUNTS.path] == "added"
    assert first["selection_hard"] == 0.5 and second["selection_hard"] == 1.0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["baseline_selection_hard"] == 0.0 and summary["best_selection_hard"] == 1.0
    # The broken helper is in no version of the skill (every candidate the gate evaluated).
    broken_line = "def parse_amount(text)\n"
    assert broken_line in helper_source(AMOUNTS, broken=True)
    versions = [p.read_text() for p in sorted((out / "skills").iterdir())]
    assert len(versions) == 1 + len(history) and not any(broken_line in v for v in versions)
    # The best package, as written: the reference, the pointer, the executable working helper.
    [best] = (out / "best_skill").iterdir()
    assert (best / FISCAL.path).read_text() == FISCAL.reference_document()
    assert FISCAL.pointer in (best / "SKILL.md").read_text()
    helper = best / AMOUNTS.path
    assert helper.read_text() == helper_source(AMOUNTS) and os.access(helper, os.X_OK)
    # The WebUI's step page: the files the candidate changed and the script check that failed.
    assert 'id="file-changes"' in step_one and FISCAL.path in step_one
    assert "failed: python-compile (its edits were dropped)" in step_one


def _wait_done(c: httpx.Client, name: str) -> str:
    """The run's status once it stopped running, from the WebUI's own event stream."""
    with c.stream("GET", f"/events/runs/{name}", timeout=900) as events:
        for line in events.iter_lines():
            if not line.startswith("data: {"):
                continue
            status = json.loads(line[len("data: ") :])["info"]["status"]
            if status not in ("running", "starting"):
                return str(status)
    raise AssertionError("the event stream ended before the run did")


def test_a_users_script_that_fails_its_check_is_refused_before_any_rollout(tmp_path, docker_client):
    """The initial package's scripts are checked in a sandbox before the baseline: a self-test
    that never ends stops the run with the file and the rule, and no rollout ran."""
    skill = _package(
        tmp_path,
        "looping-skill",
        "# Amounts\n- Use scripts/loop.py.\n",
        {"scripts/loop.py": "import sys\nif '--self-test' in sys.argv:\n    while True:\n        pass\n"},
    )
    out = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable, "-m", "controller.cli", "train", "--config", "spreadsheetbench_package_demo",
            "--out", str(out), "--set", f"env.skill_init={skill}",
            "--set", "optimizer.script_self_test_timeout_s=2",
        ],
        cwd=REPO, capture_output=True, text=True, timeout=600,
        env={**os.environ, "OPENAI_API_KEY": ""}, check=False,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "scripts/loop.py" in proc.stderr and "self-test-timeout" in proc.stderr, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert not list(out.glob("**/results.jsonl"))  # no rollout ran
