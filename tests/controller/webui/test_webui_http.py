"""The WebUI's door and its file server, against a real ``skillopt ui`` process over HTTP:
loopback by default, a token for anything else, same-origin JSON actions, no path out of the
runs directory, no secret in any page, and the config system's own messages in the form."""

from __future__ import annotations

import http.client
import json
import secrets
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from skillopt.config import load_config
from skillopt.errors import ConfigError
from skillopt.trainer.rundir import layout
from tests.rundirs import NEWEST, copy_run, step_json, summary_json

REPO = Path(__file__).resolve().parents[3]


def make_run(runs: Path, name: str = "r", log_line: str = "") -> Path:
    """A small run directory in the trainer's layout (what the reader and pages need)."""
    run = runs / name
    (run / "steps/step_0001/rollout/predictions/a1").mkdir(parents=True)
    (run / "skills").mkdir()
    (run / "config.json").write_text(
        json.dumps({"env": {"name": "spreadsheetbench", "agent": "codegen_single"}, "model": {}, "train": {}})
    )
    (run / "train.log").write_text(json.dumps({"event": "hello", "level": "info", "note": log_line}) + "\n")
    (run / "skills/skill_v0000.md").write_text("# skill\n")
    (run / "steps/step_0001/rollout/results.jsonl").write_text(
        json.dumps(
            {
                "id": "a1",
                "hard": 0.0,
                "soft": 0.5,
                "phase": "eval",
                "cases": [
                    {"name": "1", "ok": False, "stage": "eval", "reason": "value@Sheet1!A1: gt=2 pred=1"}
                ],
                "infra_error": None,
            }
        )
        + "\n"
    )
    trace = {
        "code": "print(1)",
        "messages": [
            {"role": "user", "content": "fix A1"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "run_python", "arguments": '{"code": "print(1)"}'}]},
            {"role": "tool", "content": "1", "tool_call_id": "c1", "name": "run_python"},
        ],
        "executions": [
            {"turn": 1, "case": "1", "code": "print(1)", "exit_code": 0, "stdout_tail": "1", "stderr_tail": "warn: x",
             "duration_s": 0.1, "timed_out": False, "oom_killed": False}
        ],
        "case_reports": {"1": "Sheet1!A1: got=1, expected=2 ✗"},
        "notes": {"model_exchanges": json.dumps([{"api": "chat", "status": 200, "seconds": 0.1, "usage": {"prompt_tokens": 7}}])},
    }  # fmt: skip
    (run / "steps/step_0001/rollout/predictions/a1/trace.json").write_text(json.dumps(trace))
    (run / "steps/step_0001/rollout/predictions/a1/page.html").write_text("<script>alert(1)</script>")
    (run / "steps/step_0001/rollout/predictions/a1/out.xlsx").write_bytes(b"PK\x03\x04not really")
    (run / "escape").symlink_to("/etc")
    return run


def raw_get(url: str, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """A GET with the path sent exactly as written (no client-side dot-segment removal)."""
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    conn.request("GET", path, headers=headers or {})
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, body


def test_any_other_address_than_loopback_needs_a_token(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "controller.cli", "ui", "--host", "0.0.0.0", "--port", "0", "--runs-dir", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert proc.returncode == 2
    assert "refusing to listen on 0.0.0.0 without a token" in proc.stderr
    short = tmp_path / "short"
    short.write_text("abc")
    proc = subprocess.run(
        [sys.executable, "-m", "controller.cli", "ui", "--host", "0.0.0.0", "--token-file", str(short)],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2 and "at least 16 characters" in proc.stderr


def test_with_a_token_every_page_and_stream_needs_it(tmp_path, ui_server_factory):
    token = secrets.token_urlsafe(24)
    (tmp_path / "token").write_text(token + "\n")
    make_run(tmp_path / "runs")
    ui = ui_server_factory(tmp_path / "runs", "--token-file", str(tmp_path / "token"))
    with httpx.Client(base_url=ui.url, timeout=10) as c:
        for path in ("/api/runs", "/events/runs", "/runs/r", "/runs/r/files/train.log", "/new"):
            assert c.get(path).status_code == 401, path
        page = c.get("/runs/r", headers={"Accept": "text/html"})
        assert page.status_code == 303 and page.headers["location"] == "/login"
        assert c.get("/static/app.js").status_code == 200  # assets carry no data
        assert c.get("/login?token=wrong").status_code == 401
        assert c.get("/api/runs", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert c.get("/api/runs", headers={"Authorization": f"Bearer {token}"}).status_code == 200
        login = c.get("/login", params={"token": token})
        assert login.status_code == 303
        cookie = login.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and token not in cookie
        assert c.get("/api/runs").json()["runs"][0]["name"] == "r"  # the session cookie
        assert c.post("/login", data={"token": token}).status_code == 303


def test_loopback_serves_loopback_host_names_only(plain_ui):
    ui = plain_ui
    port = urlsplit(ui.url).port
    assert raw_get(ui.url, "/api/runs", {"Host": f"localhost:{port}"})[0] == 200
    assert raw_get(ui.url, "/api/runs", {"Host": f"127.0.0.1:{port}"})[0] == 200
    status, body = raw_get(ui.url, "/api/runs", {"Host": f"attacker.example:{port}"})  # DNS rebinding
    assert status == 421 and b"loopback only" in body


def test_actions_take_same_origin_json_only(plain_ui):
    ui = plain_ui
    with httpx.Client(base_url=ui.url, timeout=10) as c:
        form = c.post("/api/runs/r/stop", data={"reason": "x"})  # what a cross-site form can send
        assert form.status_code == 415
        cross = c.post("/api/runs/r/stop", json={}, headers={"Origin": "http://attacker.example"})
        assert cross.status_code == 403
        same = c.post("/api/runs/r/stop", json={}, headers={"Origin": ui.url})
        assert same.status_code == 409 and "nothing runs" in same.json()["error"]
        resp = c.get("/runs/r", headers={"Accept": "text/html"})
        assert "script-src 'self'" in resp.headers["content-security-policy"]
        assert resp.headers["x-content-type-options"] == "nosniff"


@pytest.fixture(scope="module")
def plain_ui(tmp_path_factory, module_ui_server_factory):
    """One loopback server over a runs dir with run ``r``, shared by the read-only tests."""
    root = tmp_path_factory.mktemp("plain")
    make_run(root / "runs")
    (root / "secret.txt").write_text("root:x:0:0 outside the runs dir")
    return module_ui_server_factory(root / "runs")


@pytest.mark.parametrize(
    "path",
    [
        "/runs/r/files/../../../../etc/passwd",
        "/runs/r/files/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        "/runs/r/files/..%2f..%2f..%2fetc%2fpasswd",
        "/runs/r/files//etc/passwd",
        "/runs/r/files/escape/passwd",  # a symlink inside the run pointing out of it
        "/runs/..%2f..%2fetc/files/passwd",
        "/runs/%2e%2e/files/etc/passwd",
        "/runs/r/files/.lock",
        "/runs/r/rows?dir=../../../etc",
        "/runs/r/rows?dir=escape",
        "/runs/r/rollout?dir=../../..&id=passwd",
        "/runs/r/skills?a=../../../etc/passwd&b=skills/skill_v0000.md",
    ],
)
def test_the_file_server_never_leaves_the_runs_dir(plain_ui, path):
    status, body = raw_get(plain_ui.url, path)
    assert status in (404, 400), (path, status, body[:200])
    assert b"root:" not in body


def test_files_are_served_as_text_or_downloads_never_as_pages(plain_ui):
    with httpx.Client(base_url=plain_ui.url, timeout=10) as c:
        log = c.get("/runs/r/files/train.log")
        assert log.status_code == 200 and log.headers["content-type"].startswith("text/plain")
        html = c.get("/runs/r/files/steps/step_0001/rollout/predictions/a1/page.html")
        assert html.headers["content-type"] == "application/octet-stream"
        assert "attachment" in html.headers["content-disposition"]
        xlsx = c.get("/runs/r/files/steps/step_0001/rollout/predictions/a1/out.xlsx")
        assert xlsx.status_code == 200 and xlsx.content.startswith(b"PK")
        assert "attachment" in xlsx.headers["content-disposition"]


def test_no_secret_reaches_a_page(tmp_path, ui_server_factory):
    key = "sk-" + secrets.token_hex(24)
    sandbox_token = secrets.token_urlsafe(32)
    make_run(tmp_path, log_line=f"a leaked {key} in a log line")
    ui = ui_server_factory(tmp_path, env={"OPENAI_API_KEY": key, "SKILLOPT_SANDBOX_TOKEN": sandbox_token})
    seen = []
    with httpx.Client(base_url=ui.url, timeout=30) as c:
        for path in ("/", "/new", "/runs/r", "/api/runs", "/api/runs/r", "/runs/r/files/train.log",
                     "/api/configs/spreadsheetbench_demo", "/runs/r/rows?dir=steps/step_0001/rollout"):  # fmt: skip
            resp = c.get(path, headers={"Accept": "text/html"})
            assert resp.status_code == 200, path
            seen.append(resp.text)
        pre = c.post("/api/preflight", json={"config": "spreadsheetbench", "values": {}})
        seen.append(pre.text)
        models = next(ch for ch in pre.json()["checks"] if ch["name"] == "models")
        assert models["ok"] and "OPENAI_API_KEY" in models["detail"]  # where the key is, not what
    for text in seen:
        assert key not in text and sandbox_token not in text
    assert "a leaked *** in a log line" in seen[5]


@pytest.mark.parametrize(
    ("values", "extra"),
    [
        ({"train.batch_size": "abc"}, ""),
        ({"train.batch_size": "0"}, ""),
        ({"evaluation.gate_metric": "best"}, ""),
        ({"optimizer.min_learning_rate": "9"}, ""),
        ({"sandbox.endpoints": "not-an-endpoint"}, ""),
        ({}, "train.batch_sise=3"),
        ({}, "gradient.merge_batch_size=1"),
        ({"train.max_cost_usd": "5"}, ""),  # a budget no price makes bind
    ],
)
def test_the_form_refuses_bad_values_with_the_config_systems_message(plain_ui, values, extra):
    resp = httpx.post(
        f"{plain_ui.url}/api/preflight",
        json={"config": "spreadsheetbench_demo", "values": values, "extra": extra},
    )
    assert resp.status_code == 422
    from controller.webui.forms import FIELDS, _override

    by_key = {f.key: f for f in FIELDS}
    overrides = [_override(by_key[k], v) for k, v in values.items()] + [extra] * bool(extra)
    with pytest.raises(ConfigError) as exc:
        load_config("spreadsheetbench_demo", overrides)
    assert resp.json()["error"] == exc.value.message  # verbatim


def test_preflight_says_when_a_run_is_an_offline_simulation(tmp_path, ui_server_factory):
    ui = ui_server_factory(tmp_path)
    with httpx.Client(base_url=ui.url, timeout=60) as c:
        # A shipped demo config says run.simulate: auto: it launches as shipped, and the check
        # says it is a simulation (no provider key on this machine).
        auto = c.post("/api/preflight", json={"config": "spreadsheetbench_demo", "values": {}}).json()
        models = {ch["name"]: ch for ch in auto["checks"]}["models"]
        assert auto["ok"] and models["ok"], auto
        assert models["detail"].startswith("offline simulation with scripted models: run.simulate: auto")
        assert "run.simulate" not in auto["command"]  # launched exactly as shipped
        off = c.post(
            "/api/preflight", json={"config": "spreadsheetbench_demo", "values": {"run.simulate": "off"}}
        ).json()
        assert not off["ok"] and not {ch["name"]: ch for ch in off["checks"]}["models"]["ok"]
        on = c.post(
            "/api/preflight", json={"config": "spreadsheetbench_demo", "values": {"run.simulate": "on"}}
        ).json()
        assert on["ok"], on
        assert {ch["name"] for ch in on["checks"]} == {"config", "models", "data", "sandbox", "images"}
        assert (
            on["command"].endswith("--set run.simulate=on")
            and "train --config spreadsheetbench_demo" in on["command"]
        )
        fleet = c.post(
            "/api/preflight",
            json={
                "config": "spreadsheetbench_demo",
                "values": {"run.simulate": "on", "sandbox.endpoints": "127.0.0.1:1"},
            },
        ).json()
        sandbox = {ch["name"]: ch for ch in fleet["checks"]}["sandbox"]
        assert not fleet["ok"] and not sandbox["ok"] and "127.0.0.1:1" in sandbox["detail"]
        bad_name = c.post(
            "/api/preflight", json={"config": "spreadsheetbench_demo", "name": "../x", "values": {}}
        )
        assert bad_name.status_code == 422 and "run name" in bad_name.json()["error"]
        (tmp_path / "taken").mkdir()
        taken = c.post(
            "/api/preflight", json={"config": "spreadsheetbench_demo", "name": "taken", "values": {}}
        )
        assert taken.status_code == 422 and "exists already" in taken.json()["error"]


def test_the_rollout_view_shows_tool_calls_executions_and_verification(plain_ui):
    page = httpx.get(
        f"{plain_ui.url}/runs/r/rollout", params={"dir": "steps/step_0001/rollout", "id": "a1"}
    ).text
    for text in (
        "run_python",  # the tool call's name
        "{&#34;code&#34;: &#34;print(1)&#34;}",  # its arguments (escaped, never markup)
        "reply to c1",  # the tool's answer
        "warn: x",  # stderr of the execution
        "Sheet1!A1: got=1, expected=2 ✗",  # the per-cell verification
        "value@Sheet1!A1: gt=2 pred=1",
    ):
        assert text in page, text
    assert (
        "<script>alert"
        not in httpx.get(f"{plain_ui.url}/runs/r/rows", params={"dir": "steps/step_0001/rollout"}).text
    )


def test_a_damaged_run_says_so_and_a_folder_that_is_no_run_is_not_one(tmp_path, ui_server_factory):
    runs = tmp_path / "runs"
    make_run(runs, "broken")
    (runs / "broken" / "runtime_state.json").write_text('{"last_completed_step": 1, "best_sc')  # cut off
    (runs / "empty").mkdir()
    ui = ui_server_factory(runs)
    with httpx.Client(base_url=ui.url, timeout=10) as c:
        info = c.get("/api/runs/broken").json()["info"]
        assert info["status"] == "damaged"
        damage = info["damage"]
        assert damage["problems"][0]["file"] == "runtime_state.json" and not damage["resumable"]
        assert "the run cannot be resumed" in damage["advice"]
        listed = {r["name"]: r["status"] for r in c.get("/api/runs").json()["runs"]}
        assert listed == {"broken": "damaged"}  # the empty folder is not a run
        resume = c.post("/api/runs/broken/resume", json={}, headers={"Origin": ui.url})
        assert resume.status_code == 409 and "is damaged: runtime_state.json" in resume.json()["error"]
        page = c.get("/runs/empty", headers={"Accept": "text/html"})
        assert page.status_code == 404 and "not a run" in page.text


def test_unknown_pages_get_the_styled_error_page_and_a_missing_runs_dir_is_refused(plain_ui, tmp_path):
    with httpx.Client(base_url=plain_ui.url, timeout=10) as c:
        page = c.get("/no/such/page", headers={"Accept": "text/html"})
        assert page.status_code == 404 and "there is no page at /no/such/page" in page.text
        assert '<link rel="stylesheet" href="/static/style.css">' in page.text
        assert c.get("/runs/r/steps/99", headers={"Accept": "text/html"}).status_code == 404
        api = c.get("/api/nothing")
        assert api.status_code == 404 and api.json()["error"] == "there is no page at /api/nothing"
        assert "This page needs JavaScript" in c.get("/", headers={"Accept": "text/html"}).text
    missing = subprocess.run(
        [sys.executable, "-m", "controller.cli", "ui", "--runs-dir", str(tmp_path / "typo")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert missing.returncode == 2 and "is not a directory" in missing.stderr
    assert not (tmp_path / "typo").exists()


def test_the_login_page_does_not_show_the_runs_directory(tmp_path, ui_server_factory):
    (tmp_path / "token").write_text(secrets.token_urlsafe(24) + "\n")
    ui = ui_server_factory(tmp_path / "secret-runs-location", "--token-file", str(tmp_path / "token"))
    page = httpx.get(ui.url + "/login", headers={"Accept": "text/html"}, timeout=10)
    assert page.status_code == 200 and "Log in" in page.text
    assert "secret-runs-location" not in page.text


def test_the_step_page_shows_a_package_candidates_change_per_file(tmp_path, ui_server_factory):
    run = make_run(tmp_path / "runs")
    step = run / "steps/step_0001"
    changes = (
        {"path": "SKILL.md", "status": "changed", "old_size": 90, "new_size": 130, "executable": False,
         "lines_added": 1, "lines_removed": 0, "binary": False},
        {"path": "references/totals.md", "status": "added", "old_size": None, "new_size": 40,
         "executable": False, "lines_added": 3, "lines_removed": 0, "binary": False},
    )  # fmt: skip
    checks = (
        {
            "path": "scripts/helpers.py",
            "ok": False,
            "rule": "python-compile",
            "message": "SyntaxError: line 2",
        },
    )
    record = step_json(1, proposal={"file_changes": changes, "script_checks": checks})
    (step / "step_record.json").write_text(json.dumps(record))
    report = {
        "reports": [
            {"index": 1, "op": "create_file", "file": "scripts/helpers.py", "target": "", "content_preview": "def",
             "status": "skipped_script_check_failed", "matched": None, "error": "python-compile: SyntaxError"},
        ],
        "summary": {"total": 1, "applied": 0, "skipped": 1, "errors": 0, "unmatched": 0},
    }  # fmt: skip
    (step / "edit_apply_report.json").write_text(json.dumps(report))
    ui = ui_server_factory(tmp_path / "runs")
    page = httpx.get(f"{ui.url}/runs/r/steps/1").text
    for text in (
        'id="file-changes"',
        "references/totals.md",
        "+3 / −0",
        'id="script-checks"',
        "failed: python-compile (its edits were dropped)",
        "SyntaxError: line 2",
        "skipped_script_check_failed",
        "<code>scripts/helpers.py</code>",
    ):
        assert text in page, text


def test_resume_and_eval_from_the_page_are_refused_with_the_clis_own_words(tmp_path, ui_server_factory):
    """The page parses the command line it would start with the CLI's parser and loads it with
    the CLI's loader first: what the CLI would refuse, the page refuses with the same message,
    and nothing is started."""
    runs = tmp_path / "runs"
    run = copy_run(NEWEST, runs / "old")
    (run / layout.SUMMARY).write_text(json.dumps(summary_json("stopped")))  # resumable
    config = json.loads((run / layout.CONFIG).read_text())
    config["env"]["data_root"] = str(tmp_path / "moved")  # the run's data is gone from here
    (run / layout.CONFIG).write_text(json.dumps(config))
    ui = ui_server_factory(runs)

    def cli(*args: str) -> str:
        res = subprocess.run(
            [sys.executable, "-m", "controller.cli", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert res.returncode == 2, res.stderr
        return res.stderr

    with httpx.Client(base_url=ui.url, timeout=60, headers={"Origin": ui.url}) as c:
        resume = c.post("/api/runs/old/resume", json={"extra": "train.batch_size=0"})
        assert resume.status_code == 422
        error = resume.json()["error"]
        assert error.startswith("train.batch_size (from --set): must be >= 1")
        assert error in cli("train", "--resume", str(run), "--simulate", "on", "--set", "train.batch_size=0")
        ev = c.post("/api/runs/old/eval", json={"skill": "best_skill.md", "split": "test"})
        assert ev.status_code == 422
        error = ev.json()["error"]
        assert "env.data_root" in error and str(tmp_path / "moved") in error
        assert error in cli("eval", "--run", str(run), "--skill", "best", "--split", "test")
    # Nothing was started: no new eval folder, the launch record is still the fixture's.
    assert [p.name for p in (run / layout.EVALS).iterdir()] == ["test_best_skill"]
    assert json.loads((run / layout.LAUNCH).read_text())["pid"] == 4242
