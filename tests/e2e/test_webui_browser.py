"""The WebUI in real Chromium (Debian's, driven by Playwright): a run directory written by the
CLI, and a simulated run launched from the page, watched live over SSE, stopped at a stage
boundary, resumed, killed (-9), shown as failed, resumed again to the end; step, rollout and
skill-diff views; an eval launched from the page. Everything under it is real: ``skillopt ui``
and ``skillopt train`` processes, the embedded sandbox over gRPC, Docker containers, grading;
the scripted model server plays the models.

Screenshots go to ``$SKILLOPT_TEST_ARTIFACTS/webui`` (default ``test-artifacts/webui`` in the
repo), with ``metrics.json`` (page load and SSE push latency as measured in the browser).
Every wait is on a page selector or a file the run writes, never on time.
"""

from __future__ import annotations

import json
import math
import os
import signal
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect, sync_playwright

from controller.rundir.reader import RunStatus, run_status
from skillopt.gate import format_score
from tests.rundirs import step_json, summary_json

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("SKILLOPT_TEST_ARTIFACTS", REPO / "test-artifacts")) / "webui"
CHROMIUM = os.environ.get("SKILLOPT_CHROMIUM", "/usr/bin/chromium")  # Debian's, from scripts/setup.sh
# Without the background-networking flags chromium's own connections are refused by the
# closed network and slow everything down.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
LONG = 900_000  # ms: an upper bound for a run stage on a loaded 2-core machine, not a timing
METRICS: dict[str, object] = {}
# The bound of every other wait (a page action: preflight, a launch). Upper bounds only.
expect.set_options(timeout=60_000)


def shot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("webui") / "runs"


@pytest.fixture(scope="module")
def cli_run(runs, docker_client) -> Path:
    """A run written by `skillopt train` in a terminal (one step: batch 10 of the 10 train items)."""
    out = runs / "from_cli"
    proc = subprocess.run(
        [sys.executable, "-m", "controller.cli", "train", "--config", "spreadsheetbench_demo", "--out", str(out),
         "--set", "train.num_epochs=1", "--set", "evaluation.eval_test=false", "--set", "train.batch_size=10"],
        cwd=REPO, capture_output=True, text=True, timeout=1200,
        env={**os.environ, "OPENAI_API_KEY": "", "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def ui(runs, cli_run, module_ui_server_factory):
    return module_ui_server_factory(runs)


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        # launch() gives the browser a fresh temporary profile of its own.
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "metrics.json").write_text(json.dumps(METRICS, indent=2) + "\n")
    print(f"\nwebui metrics: {json.dumps(METRICS)}")


@pytest.fixture
def page(browser):
    ctx = browser.new_context(viewport={"width": 1360, "height": 900}, accept_downloads=True)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    # Script errors fail the test; the browser's own note on a refused request (the form's 422
    # replies are the point of one test) is not a script error.
    page.on(
        "console",
        lambda m: (
            errors.append(f"{m.text} at {m.location.get('url', '')} (page {page.url})")
            if m.type == "error"
            and not m.text.startswith("Failed to load resource: the server responded with a status of 4")
            # An event stream cut by a navigation away from its page (the page is gone; a
            # live page's EventSource reconnects by itself).
            and not ("ERR_INCOMPLETE_CHUNKED_ENCODING" in m.text and "/events/" in m.location.get("url", ""))
            else None
        ),
    )
    yield page
    ctx.close()
    assert not errors, errors


def test_a_run_directory_written_by_the_cli(page, ui, cli_run):
    page.goto(ui.url + "/")
    row = page.locator('#runs tr[data-run="from_cli"]')
    expect(row.locator(".pill")).to_have_text("finished")
    expect(row).to_contain_text("simulated")
    expect(row).to_contain_text("codegen_single")
    shot(page, "01_runs_list")

    row.locator("a").first.click()
    expect(page).to_have_url(f"{ui.url}/runs/from_cli")
    expect(page.locator("#status")).to_have_text("finished")
    expect(page.locator("#steps tbody tr")).to_have_count(1)
    expect(page.locator("#curve circle.acc, #curve g.rej")).to_have_count(1)  # the one gate decision
    # The selection curve's 95% band and the candidate's interval bar.
    expect(page.locator("#curve path.band")).to_have_count(1)
    expect(page.locator("#curve line.cibar")).to_have_count(1)
    # The run's cacheable prefix share, overall and per role, as summary.json has it.
    summary = json.loads((cli_run / "summary.json").read_text())
    pct = {
        r: math.floor(m["share"] * 100 + 0.5) for r, m in summary["cacheable_prefix"].items()
    }  # JS rounding
    overall = math.floor(summary["cacheable_prefix_share"] * 100 + 0.5)
    expect(page.locator("#prefix-share")).to_have_text(
        f"{overall}% (target {pct['target']}%, optimizer {pct['optimizer']}%)"
    )
    load_ms = page.evaluate("performance.getEntriesByType('navigation')[0].duration")
    METRICS["run_page_load_ms"] = round(load_ms, 1)
    shot(page, "02_cli_run")

    # Step view: edits proposed, merged, ranked, applied, the skill diff, the gate.
    page.locator('#steps tr[data-step="1"] a', has_text="view").click()
    expect(page.locator("h1")).to_have_text("Step 1")
    record = json.loads((cli_run / "steps/step_0001/step_record.json").read_text())
    expect(page.locator("#gate-action")).to_have_text(record["action"])
    expect(page.locator("#candidate-score")).to_have_text(
        format_score(record["candidate_gate_score"], record["candidate_gate_score_ci95"])
    )
    test = record["gate_test"]
    expect(page.locator("#gate-test")).to_contain_text(f"{test['name']} test over {test['n']} items")
    expect(page.locator("#gate-test")).to_contain_text(f"p = {test['p_value']:.3g}")
    expect(page.locator("#proposed details")).not_to_have_count(0)
    expect(page.locator("#merged tbody tr")).to_have_count(record["n_edits_merged"])
    expect(page.locator("#ranked tbody tr")).to_have_count(record["n_edits_ranked"])
    expect(page.locator("#applied")).to_contain_text(f"{record['edit_apply_summary']['applied']} of")
    expect(page.locator("#skill-diff tr.d-add")).not_to_have_count(0)
    shot(page, "03_step_view")

    # Rollout view: conversation, code, executions, per-case verification, files.
    page.locator("#rollouts a", has_text="steps/step_0001/rollout").first.click()
    rows = [
        json.loads(line)
        for line in (cli_run / "steps/step_0001/rollout/results.jsonl").read_text().splitlines()
    ]
    expect(page.locator("#rows tbody tr")).to_have_count(len(rows))
    failed = next(r for r in rows if r["hard"] < 1)
    page.locator("#rows a", has_text=failed["id"]).click()
    expect(page.locator("#verdict")).to_have_text("fail")
    expect(page.locator("#verification")).to_contain_text(failed["cases"][0]["reason"][:40])
    expect(page.locator("#conversation details.role-assistant")).not_to_have_count(0)
    expect(page.locator("#code pre")).to_contain_text("OUTPUT_PATH")
    expect(page.locator("#executions summary").first).to_contain_text("exit")
    expect(page.locator("#exchanges tbody tr")).not_to_have_count(0)
    shot(page, "04_rollout_view")
    with page.expect_download() as download:
        page.locator("#files a", has_text="output.xlsx").first.click()
    assert Path(download.value.path()).read_bytes()[:2] == b"PK"  # the produced workbook


def test_the_new_run_form_shows_the_config_systems_messages(page, ui):
    page.goto(ui.url + "/new")
    expect(page.locator("#new-run")).to_have_attribute("data-loaded", "spreadsheetbench")
    page.select_option("#config", "spreadsheetbench_demo")
    expect(page.locator("#new-run")).to_have_attribute("data-loaded", "spreadsheetbench_demo")
    page.fill('[data-key="train.batch_size"]', "abc")
    page.fill("#extra", "")
    page.click("#preflight")
    expect(page.locator("#form-error")).to_have_text(
        "train.batch_size (from --set): expected an integer, got string 'abc'"
    )
    # ... and next to its field.
    beside = page.locator('label:has([data-key="train.batch_size"]) .field-error')
    expect(beside).to_have_text("train.batch_size (from --set): expected an integer, got string 'abc'")
    expect(page.locator('[data-key="train.batch_size"]')).to_have_attribute("aria-invalid", "true")
    page.fill('[data-key="train.batch_size"]', "5")
    page.fill("#extra", "train.batch_sise=3")
    page.click("#preflight")
    expect(page.locator("#form-error")).to_have_text(
        "unknown key 'train.batch_sise' in --set; did you mean 'train.batch_size'?"
    )
    expect(page.locator(".field-error")).to_have_count(0)  # not a field's message
    shot(page, "05_new_run_refused")


@pytest.mark.timeout(3000)
def test_launch_watch_stop_resume_kill_resume_and_compare(page, ui, runs):
    page.goto(ui.url + "/new")
    page.select_option("#config", "spreadsheetbench_demo")
    expect(page.locator("#new-run")).to_have_attribute("data-loaded", "spreadsheetbench_demo")
    page.fill("#run-name", "from_page")
    page.fill('[data-key="train.num_epochs"]', "1")
    page.uncheck('[data-key="evaluation.eval_test"]')
    # The demo config as shipped (run.simulate: auto, no provider key here): it launches, and
    # the check says it is an offline simulation.
    expect(page.locator('[data-key="run.simulate"]')).to_have_value("auto")
    page.click("#preflight")
    expect(page.locator("#checks li.ok")).to_have_count(5)
    expect(page.locator('#checks li[data-check="data"]')).to_contain_text("train")
    expect(page.locator('#checks li[data-check="models"]')).to_contain_text("offline simulation")
    expect(page.locator("#command")).not_to_contain_text("run.simulate")
    shot(page, "06_preflight")
    page.click("#launch")
    expect(page).to_have_url(f"{ui.url}/runs/from_page")
    run = runs / "from_page"

    # Live, pushed: the page is never reloaded (the marker survives) while the run advances.
    page.evaluate(
        """() => {
        window.__marker = 1; window.__lat = []; let last = "";
        new MutationObserver(() => {
          const d = document.body.dataset;
          if (d.liveUpdated && d.liveUpdated !== last) {
            last = d.liveUpdated; window.__lat.push(Number(d.received) - Number(d.liveUpdated) * 1000);
          }
        }).observe(document.body, { attributes: true, attributeFilter: ["data-received"] });
      }"""
    )
    expect(page.locator("#status")).to_have_text("running", timeout=LONG)
    expect(page.locator("#phase")).to_contain_text("baseline", timeout=LONG)
    expect(page.locator("#where")).to_contain_text("step 1/2", timeout=LONG)
    expect(page.locator('#pipeline li[data-stage="rollout"]')).to_have_class("active", timeout=LONG)
    expect(page.locator("#rows-done")).not_to_have_text("0", timeout=LONG)
    expect(page.locator("#hosts tbody tr")).to_have_count(1)
    expect(page.locator("#hosts tbody td").first).to_contain_text("embedded-")
    shot(page, "07_live_rollout")

    # Stop: honoured at the next stage boundary, the run directory says stopped.
    page.click("#stop")
    expect(page.locator("#status")).to_have_text("stopped", timeout=LONG)
    expect(page.locator("#stop-reason")).to_contain_text("stop requested (webui)")
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "stopped" and "stop requested (webui)" in summary["stop_reason"]
    assert json.loads((run / "runtime_state.json").read_text())["last_completed_step"] <= 1
    expect(page.locator("#resume")).to_be_visible()
    shot(page, "08_stopped")

    # Resume, then kill -9 the training process mid-step: the page shows it failed.
    page.click("#resume")
    expect(page.locator("#status")).to_have_text("running", timeout=LONG)
    expect(page.locator('#steps tbody tr[data-step="1"]:not(.pending)')).to_have_count(1, timeout=LONG)
    expect(page.locator("#where")).to_contain_text("step 2/2", timeout=LONG)
    expect(page.locator("#curve circle.acc, #curve g.rej")).to_have_count(1)
    info = run_status(run)
    assert info.status is RunStatus.RUNNING and info.pid
    os.kill(info.pid, signal.SIGKILL)
    expect(page.locator("#status")).to_have_text("failed", timeout=LONG)
    expect(page.locator("#stop-reason")).to_contain_text("Failed")
    shot(page, "09_killed_failed")

    page.click("#resume")
    expect(page.locator("#status")).to_have_text("finished", timeout=LONG)
    expect(page.locator("#steps tbody tr:not(.pending)")).to_have_count(2)
    assert page.evaluate("window.__marker") == 1
    lat = page.evaluate("window.__lat")
    if lat:
        METRICS["sse_push_ms"] = {
            "n": len(lat),
            "median": round(statistics.median(lat), 1),
            "p90": round(sorted(lat)[int(0.9 * (len(lat) - 1))], 1),
            "max": round(max(lat), 1),
        }
    shot(page, "10_finished")
    assert json.loads((run / "summary.json").read_text())["status"] == "complete"

    # Skill history: compare the initial skill with the last one.
    page.select_option("#skill-a", "skills/skill_v0000.md")
    page.select_option("#skill-b", "skills/skill_v0002.md")
    page.click("#compare button")
    expect(page.locator("h1")).to_have_text("Skill history")
    expect(page.locator("table.diff tr.d-add")).not_to_have_count(0)
    expect(page.locator("#diff-title")).to_contain_text("skills/skill_v0000.md")
    shot(page, "11_skill_diff")


def test_eval_of_a_skill_version_from_the_page(page, ui, cli_run):
    page.goto(ui.url + "/runs/from_cli")
    page.select_option("#eval-skill", "best_skill.md")
    page.select_option("#eval-split", "test")
    page.click("#eval-form button")
    row = page.locator("#evals tbody tr").first
    expect(row.locator(".pill")).to_have_text("finished", timeout=LONG)
    summary = json.loads(next((cli_run / "evals").glob("test_best_skill_*/eval_summary.json")).read_text())
    assert summary["split"] == "test" and summary["simulated"] is True and summary["n_items"] == 3
    assert summary["skill"].endswith("best_skill/skillopt-target")  # the whole package the run wrote
    expect(row).to_contain_text(f"{summary['hard']:.3f}")
    shot(page, "12_eval")
    # The eval's row opens its page: the score with its interval, per category, per row.
    row.locator("a", has_text="open").click()
    expect(page.locator("#eval-hard")).to_have_text(format_score(summary["hard"], summary["hard_ci95"]))
    expect(page.locator("#eval-prefix-share")).to_have_text(f"{summary['cacheable_prefix_share'] * 100:.0f}%")
    expect(page.locator("#eval-categories tbody tr")).to_have_count(len(summary["by_task_type"]))
    expect(page.locator("#rows tbody tr")).to_have_count(3)
    shot(page, "eval_page")
    page.locator("#rows tbody tr a").first.click()
    expect(page.locator("h1")).to_contain_text("Rollout")


def test_damaged_runs_are_shown_as_damaged(page, tmp_path, ui_server_factory):
    """Each truncated file of a finished run: the runs list and the run page say ``damaged``,
    name the file and the problem, what the directory still proves and what to do; Resume is
    offered only where ``--resume`` can repair; an empty folder is not a run."""
    from tests.controller.rundir.test_damage import cut, finished

    runs = tmp_path / "runs"
    files = {
        "history": "history.json",
        "state": "runtime_state.json",
        "summary": "summary.json",
        "record": "steps/step_0001/step_record.json",
    }
    for name, rel in files.items():
        cut(finished(runs, name) / rel)
    (runs / "empty").mkdir()
    ui = ui_server_factory(runs)
    page.goto(ui.url + "/")
    for name in files:
        expect(page.locator(f'tr[data-run="{name}"] .pill')).to_have_text("damaged")
    expect(page.locator('tr[data-run="empty"]')).to_have_count(0)
    for name, rel in files.items():
        page.goto(f"{ui.url}/runs/{name}")
        expect(page.locator("#status")).to_have_text("damaged")
        box = page.locator("#damage")
        expect(box).to_contain_text(rel)
        expect(box).to_contain_text("is not valid JSON")
        expect(box).to_contain_text("still proves steps 1-1 committed")
        expect(page.locator("#resume")).to_be_visible(visible=name != "state")
        if name == "history":
            # The committed step is still shown, from its own record.
            expect(page.locator("#steps")).not_to_contain_text("not committed")
            shot(page, "damaged-run")
    page.goto(ui.url + "/runs/empty")
    expect(page.locator("body")).to_contain_text("not a run")


def test_narrow_windows_error_pages_and_pages_without_javascript(browser, tmp_path, ui_server_factory):
    from tests.controller.rundir.test_damage import finished

    runs = tmp_path / "runs"
    finished(runs, "small")
    ui = ui_server_factory(runs)
    narrow = browser.new_context(viewport={"width": 420, "height": 800})
    try:
        page = narrow.new_page()
        page.goto(ui.url + "/runs/small")
        expect(page.locator("#steps tbody tr")).to_have_count(1)
        # The page does not grow wider than the window: tables scroll inside their cards.
        assert page.evaluate("document.documentElement.scrollWidth") <= 420
        page.goto(ui.url + "/no/such/page")
        expect(page.locator("#error-message")).to_have_text("there is no page at /no/such/page")
        expect(page.locator("header.top .brand")).to_be_visible()  # the styled page, not a bare text
    finally:
        narrow.close()
    no_js = browser.new_context(java_script_enabled=False)
    try:
        page = no_js.new_page()
        page.goto(ui.url + "/")
        expect(page.get_by_text("This page needs JavaScript")).to_be_visible()
    finally:
        no_js.close()


def test_compare_three_runs_from_the_list(page, tmp_path, ui_server_factory):
    """Pick three runs in the list → one page: their curves overlaid, the configs side by side
    with the differing keys marked, scores with intervals, the best skills' diffs; the URL
    holds the selection."""
    from tests.controller.rundir.test_damage import finished

    runs = tmp_path / "runs"
    for i, name in enumerate(("base", "bigger_batch", "slower_lr")):
        run = finished(runs, name)
        cfg = json.loads((run / "config.json").read_text())
        cfg["train"] = {"num_epochs": 1, "batch_size": 10 * (2 if name == "bigger_batch" else 1)}
        cfg["optimizer"] = {"learning_rate": 2 if name == "slower_lr" else 4}
        (run / "config.json").write_text(json.dumps(cfg))
        history = [
            step_json(s, current_score=min(1.0, 0.2 + 0.15 * s * (i + 1)), action="accept") for s in (1, 2, 3)
        ]
        (run / "history.json").write_text(json.dumps(history))
        state = json.loads((run / "runtime_state.json").read_text())
        (run / "runtime_state.json").write_text(json.dumps({**state, "last_completed_step": 3}))
        for s in history:
            rec = run / f"steps/step_{s['step']:04d}/step_record.json"
            rec.parent.mkdir(parents=True, exist_ok=True)
            rec.write_text(json.dumps(s))
        summary = summary_json(
            best_selection_score=0.5 + 0.1 * i, best_selection_score_ci95=(0.3, 0.7 + 0.1 * i), test_hard=0.4
        )
        (run / "summary.json").write_text(json.dumps(summary))
        (run / "best_skill.md").write_text(f"# Skill\n- shared rule\n- rule of {name}\n")
    ui = ui_server_factory(runs)
    page.goto(ui.url + "/")
    for name in ("base", "bigger_batch", "slower_lr"):
        page.check(f'tr[data-run="{name}"] input.pick')
    button = page.locator("#compare-runs")
    expect(button).to_have_text("Compare 3 runs")
    button.click()
    expect(page).to_have_url(ui.url + "/compare?runs=base,bigger_batch,slower_lr")
    expect(page.locator("#compare-curve path.cur")).to_have_count(3)
    expect(page.locator("#compare-legend li")).to_have_count(3)
    expect(page.locator("#compare-scores tbody tr")).to_have_count(3)
    expect(page.locator('#compare-scores tr[data-run="slower_lr"]')).to_contain_text("0.700 [0.300, 0.900]")
    expect(page.locator('#compare-config tr.differs[data-key="train.batch_size"]')).to_contain_text("20")
    expect(page.locator('#compare-config tr.differs[data-key="optimizer.learning_rate"]')).to_have_count(1)
    expect(page.locator('#compare-config tr.same[data-key="env.name"]')).to_have_count(1)
    expect(page.locator("#differing")).to_contain_text("2 of")
    expect(page.locator(".skill-diff")).to_have_count(2)
    expect(page.locator('.skill-diff[data-run="slower_lr"] tr.d-add')).to_contain_text("rule of slower_lr")
    shot(page, "compare")
    page.goto(ui.url + "/compare?runs=base")
    expect(page.locator("#error-message")).to_contain_text("compare two to 8 different runs")


def test_the_trainers_evaluations_have_pages_and_rows_export(page, tmp_path, ui_server_factory):
    import httpx

    from tests.controller.rundir.test_damage import finished

    runs = tmp_path / "runs"
    run = finished(runs, "r")
    rows = [
        {"id": "a", "task_type": "easy", "hard": 1.0, "soft": 1.0, "fail_reason": "", "n_turns": 1, "infra_error": None},
        {"id": "b", "task_type": "hard", "hard": 0.0, "soft": 0.5, "fail_reason": "EM=0", "n_turns": 2, "infra_error": None},
    ]  # fmt: skip
    for rel in ("test_eval_baseline", "test_eval"):
        (run / rel).mkdir()
        (run / rel / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (run / rel / "summary.json").write_text(json.dumps({
            "hard": 0.5, "hard_ci95": [0.1, 0.9], "soft": 0.75, "soft_ci95": [0.4, 1.0], "n": 2, "n_infra": 0,
            "easy": {"total": 1, "hard_acc": 1.0, "hard_acc_ci95": [0.2, 1.0]},
            "hard_qs": {"total": 1, "hard_acc": 0.0, "hard_acc_ci95": [0.0, 0.8]},
            "overall": {"total": 2, "hard_acc": 0.5, "hard_acc_ci95": [0.1, 0.9]},
        }))  # fmt: skip
    ui = ui_server_factory(runs)
    page.goto(ui.url + "/runs/r")
    links = page.locator("a.eval-link")
    expect(links).to_have_text(["test eval: initial skill", "test eval: best skill"])
    links.nth(1).click()
    expect(page.locator("#eval-hard")).to_have_text("0.500 [0.100, 0.900]")
    expect(page.locator("#eval-categories tbody tr")).to_have_count(2)
    expect(page.locator('#eval-categories tr[data-category="easy"]')).to_contain_text("1.000 [0.200, 1.000]")
    csv_text = httpx.get(ui.url + page.locator("#export-csv").get_attribute("href"), timeout=10)
    assert csv_text.status_code == 200 and csv_text.text.splitlines()[0].startswith("id,task_type,hard,soft")
    assert csv_text.text.splitlines()[2].startswith("b,hard,0.0,0.5,EM=0")
    jsonl = httpx.get(ui.url + page.locator("#export-jsonl").get_attribute("href"), timeout=10)
    assert [json.loads(x)["id"] for x in jsonl.text.splitlines()] == ["a", "b"]
    assert "attachment" in jsonl.headers["content-disposition"]


def test_the_runs_list_sorts_filters_searches_tags_archives_and_deletes(page, tmp_path, ui_server_factory):
    """500 runs: the list shows them all, sorts by a column, filters by env and status,
    searches names, tags and notes; a run gets a note and tags on its page, is archived
    (hidden unless asked for) and deleted after a confirmation."""
    from tests.controller.rundir.test_damage import finished

    runs = tmp_path / "runs"
    for i in range(500):
        run = finished(runs, f"run_{i:03d}")
        if i % 2:
            cfg = json.loads((run / "config.json").read_text())
            cfg["env"]["name"] = "searchqa"
            (run / "config.json").write_text(json.dumps(cfg))
        state = json.loads((run / "runtime_state.json").read_text())
        (run / "runtime_state.json").write_text(json.dumps({**state, "best_score": (i * 37 % 500) / 500}))
    ui = ui_server_factory(runs)
    page.goto(ui.url + "/")
    expect(page.locator("#runs tbody tr")).to_have_count(500)
    # From the navigation's start to the 500 rows drawn (an upper bound: Playwright's check of
    # the count comes after the drawing).
    METRICS["runs_list_500_first_render_ms"] = round(page.evaluate("performance.now()"))
    expect(page.locator("#runs-count")).to_have_text("500 runs")
    page.click('#runs th[data-sort="best_score"]')  # highest first
    expect(page.locator("#runs tbody tr").first).to_have_attribute("data-run", "run_027")
    page.click('#runs th[data-sort="best_score"]')  # again: lowest first
    expect(page.locator("#runs tbody tr").first).to_have_attribute("data-run", "run_000")
    page.select_option("#f-env", "searchqa")
    expect(page.locator("#runs-count")).to_have_text("250 of 500 runs")
    page.select_option("#f-env", "")
    page.fill("#runs-search", "run_12")
    expect(page.locator("#runs tbody tr")).to_have_count(10)  # run_120..run_129
    page.fill("#runs-search", "")
    # A note and tags from the run's page; the search finds them.
    page.goto(ui.url + "/runs/run_042")
    page.fill("#note", "the lr sweep's best")
    page.fill("#tags", "sweep, lr:2")
    page.click("#save-notes")
    expect(page.locator("#notes-saved")).to_have_text("saved")
    assert json.loads((runs / "run_042" / "notes.json").read_text())["tags"] == ["sweep", "lr:2"]
    page.fill("#tags", "bad tag!")
    page.click("#save-notes")
    expect(page.locator("#notes-error")).to_contain_text("a tag is 1-40 letters")
    page.goto(ui.url + "/")
    page.fill("#runs-search", "sweep")
    expect(page.locator("#runs tbody tr")).to_have_count(1)
    expect(page.locator('tr[data-run="run_042"] .tag')).to_have_text(["sweep", "lr:2"])
    page.fill("#runs-search", "lr sweep")
    expect(page.locator("#runs tbody tr")).to_have_count(1)
    # Archive hides it from the list; "show archived" brings it back.
    page.goto(ui.url + "/runs/run_042")
    page.click("#archive")
    expect(page.locator("#archive")).to_have_text("Unarchive")
    page.goto(ui.url + "/")
    expect(page.locator("#runs-count")).to_have_text("499 of 500 runs")
    page.check("#f-archived")
    expect(page.locator('tr.archived[data-run="run_042"]')).to_have_count(1)
    # Delete asks first; dismissing keeps the run, accepting removes its directory.
    page.goto(ui.url + "/runs/run_007")
    page.once("dialog", lambda d: d.dismiss())
    page.click("#delete")
    assert (runs / "run_007").is_dir()
    page.once("dialog", lambda d: d.accept())
    page.click("#delete")
    expect(page).to_have_url(ui.url + "/")
    assert not (runs / "run_007").exists()
    expect(page.locator("#runs-count")).to_have_text("498 of 499 runs")


def test_chart_marks_tell_their_step_and_open_it(page, tmp_path, ui_server_factory):
    from tests.controller.rundir.test_damage import finished

    runs = tmp_path / "runs"
    run = finished(runs, "c")
    history = [
        step_json(s, current_score=cur, action=action, tokens={"analyst": {"prompt_tokens": 1000 * s, "completion_tokens": 10}},
                  selection={"candidate_score": cand, "candidate_score_ci95": ci, "gate_reason": reason})
        for s, cur, cand, ci, action, reason in (
            (1, 0.5, 0.5, (0.3, 0.7), "accept_new_best", "new_best"),
            (2, 0.5, 0.4, (0.2, 0.6), "reject", "not_above_current"),
            (3, 0.7, 0.7, (0.5, 0.9), "accept_new_best", "new_best"),
        )
    ]  # fmt: skip
    (run / "history.json").write_text(json.dumps(history))
    state = json.loads((run / "runtime_state.json").read_text())
    (run / "runtime_state.json").write_text(json.dumps({**state, "last_completed_step": 3}))
    for h in history:
        (run / f"steps/step_{h['step']:04d}").mkdir(parents=True, exist_ok=True)
        (run / f"steps/step_{h['step']:04d}/step_record.json").write_text(json.dumps(h))
    ui = ui_server_factory(runs)
    page.goto(ui.url + "/runs/c")
    marks = page.locator("#curve .mark")
    expect(marks).to_have_count(3)
    expect(page.locator('#curve .mark[data-step="2"] title')).to_have_text(
        "step 2 (epoch 1): candidate 0.400 [0.200, 0.600] → reject; current skill 0.500 (not_above_current). Click: the step."
    )
    expect(page.locator("#curve .axis-title")).to_have_text(["step", "selection score"])
    expect(page.locator("#tokens-chart .tokbar")).to_have_count(3)
    # Tokens of the step (the optimizer's from its record, the target's from its rollout rows)
    # and the cost so far, at the run's prices (make_run: $1 in, $2 out per million).
    expect(page.locator('#tokens-chart .tokbar[data-step="3"] title')).to_contain_text(
        "step 3: 3,010 tokens (optimizer 3,010, target 0), $0.0030; $0.0061 so far"
    )
    page.locator('#curve .mark[data-step="2"]').click()
    expect(page).to_have_url(ui.url + "/runs/c/steps/2")
