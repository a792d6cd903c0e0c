"""Real SpreadsheetBench rollouts: client → gRPC → hardened container → trusted grader → back.

The target model is the scripted model server speaking the real Chat Completions API; it
serves hand-written solution scripts (``skillopt/testing/fixtures/spreadsheetbench``)."""

from __future__ import annotations

import hashlib
import json
from concurrent.futures import ThreadPoolExecutor

from skillopt.envs.spreadsheetbench.loader import build_task
from skillopt.testing.fixtures.spreadsheetbench import load_catalogue
from skillopt.types import Limits
from tests.sandbox.conftest import fenced, request_for, solution_code

SOLVED = ["32255", "42354", "32902", "66-24", "82-30", "56563", "416-15", "50755"]


def test_real_tasks_are_solved_by_correct_scripts(service, scripts, sample):
    grader = service.running.service.grader
    assert grader is not None
    graded_before = grader.stats().calls
    for task_id in SOLVED:
        scripts.scripts[sample.task(task_id).instruction[:120]] = [fenced(solution_code(task_id))]

    def one(task_id):
        return service.client.run(request_for(sample, task_id), timeout_s=180)

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = dict(zip(SOLVED, pool.map(one, SOLVED), strict=True))
    for task_id, r in results.items():
        assert r.infra_error is None, (task_id, r.infra_error)
        assert r.hard == 1.0 and r.soft == 1.0, (task_id, r.fail_reason, [c.reason for c in r.cases])
        assert r.fail_reason == "" and r.phase == "done"
        assert r.host == service.host_id and r.image_digest.startswith("sha256:")
        assert r.agent_ok and r.n_turns == 1 and r.usage.calls == 1
        assert len(r.cases) == len(sample.task(task_id).cases)
        assert any(a.name.endswith("output.xlsx") for a in r.artifacts)
        assert r.timings_s["total"] >= r.timings_s["exec"] > 0
    # 50755 has three test cases: the same code ran and was graded on each.
    assert len(results["50755"].cases) == 3
    # Every case was graded in the host's grader processes, not on a rollout thread.
    assert grader.stats().calls - graded_before == sum(len(r.cases) for r in results.values())


def test_a_grader_worker_killed_between_rollouts_costs_no_row(service, scripts, sample):
    """A grader process that died while idle (the OOM killer, an operator's kill) is replaced
    before it is used: the next rollout grades as usual."""
    import os
    import signal

    grader = service.running.service.grader
    killed = grader.pids()
    for pid in killed:
        os.kill(pid, signal.SIGKILL)
    for pid in killed:
        os.waitpid(pid, 0)  # wait until each is dead (kill is asynchronous)
    restarts = grader.stats().restarts
    scripts.scripts[sample.task("50755").instruction[:120]] = [fenced(solution_code("50755"))]
    r = service.client.run(request_for(sample, "50755"), timeout_s=120)
    assert r.infra_error is None and r.hard == 1.0, (r.infra_error, r.fail_reason)
    assert len(r.cases) == 3
    assert grader.stats().restarts > restarts
    assert len(grader.pids()) == grader.workers


def test_wrong_script_fails_with_the_first_wrong_cell(service, scripts, sample):
    task_id = "32255"
    catalogue = load_catalogue()
    marker = sample.task(task_id).instruction[:120]
    scripts.scripts[marker] = [fenced(solution_code(task_id, "wrong"))]
    try:
        r = service.client.run(request_for(sample, task_id), timeout_s=120)
    finally:
        del scripts.scripts[marker]
    assert r.infra_error is None
    assert r.hard == 0.0
    assert r.fail_reason.startswith("eval-mismatch: value@"), r.fail_reason
    cell = r.fail_reason.split("value@", 1)[1].split(":", 1)[0]
    assert "!" in cell and any(ch.isdigit() for ch in cell)
    # The analyst's view: a per-cell report with expected values, appended to the conversation.
    verification = r.trace.messages[-1]
    assert verification.role == "system" and "expected=" in verification.content
    assert catalogue["tasks"][task_id]["rule"]


def test_crashing_script_gives_an_exec_error_row(service, scripts, sample):
    task_id = "10747"
    marker = sample.task(task_id).instruction[:120]
    scripts.scripts[marker] = [fenced(solution_code(task_id, "crash"))]
    try:
        r = service.client.run(request_for(sample, task_id), timeout_s=120)
    finally:
        del scripts.scripts[marker]
    assert r.infra_error is None
    assert r.hard == 0.0 and r.phase == "eval"
    assert r.fail_reason.startswith("exec-error: "), r.fail_reason
    assert "KeyError" in r.fail_reason
    assert r.trace.executions[0].exit_code == 1


def test_multi_turn_feeds_the_error_back_and_the_fix_passes(service, scripts, sample):
    task_id = "10747"
    marker = sample.task(task_id).instruction[:120]
    scripts.scripts[marker] = [fenced(solution_code(task_id, "crash")), fenced(solution_code(task_id))]
    before = len(service.model.api_requests("chat"))
    try:
        r = service.client.run(request_for(sample, task_id, agent="codegen_multi"), timeout_s=120)
    finally:
        del scripts.scripts[marker]
    assert r.infra_error is None and r.hard == 1.0, r.fail_reason
    assert r.n_turns == 2 and r.usage.calls == 2
    second = service.model.api_requests("chat")[before:][1].body
    feedback = second["messages"][-1]["content"]
    assert "KeyError" in feedback and "failed" in feedback


def test_multi_turn_eval_feedback_hides_expected_values(service, scripts, sample):
    task_id = "32902"
    marker = sample.task(task_id).instruction[:120]
    scripts.scripts[marker] = [fenced(solution_code(task_id, "wrong")), fenced(solution_code(task_id))]
    before = len(service.model.api_requests("chat"))
    try:
        r = service.client.run(
            request_for(sample, task_id, agent="codegen_multi", use_eval_feedback=True), timeout_s=120
        )
    finally:
        del scripts.scripts[marker]
    assert r.hard == 1.0 and r.n_turns == 2, r.fail_reason
    feedback = service.model.api_requests("chat")[before:][1].body["messages"][-1]["content"]
    assert "WRONG" in feedback and "expected" not in feedback.lower()


def test_gold_files_never_enter_the_container(service, scripts, sample):
    task_id = "82-30"
    task = sample.task(task_id)
    _, grading = build_task(task)
    gold = grading.cases[0].files[0].content
    digest = hashlib.sha256(gold).hexdigest()
    code = f"""
import hashlib, json, os
found, scanned = [], 0
for root in ["/"]:
    for dirpath, dirnames, filenames in os.walk(root):
        if dirpath.startswith(("/proc", "/sys", "/dev")):
            dirnames[:] = []
            continue
        for name in filenames:
            path = os.path.join(dirpath, name)
            try:
                if os.path.islink(path) or os.path.getsize(path) != {len(gold)}:
                    continue
                scanned += 1
                if hashlib.sha256(open(path, "rb").read()).hexdigest() == {digest!r}:
                    found.append(path)
            except OSError:
                pass
print(json.dumps({{"found": found, "scanned": scanned}}))
"""
    marker = task.instruction[:120]
    scripts.scripts[marker] = [fenced(code)]
    try:
        r = service.client.run(request_for(sample, task_id), timeout_s=180)
    finally:
        del scripts.scripts[marker]
    assert r.infra_error is None
    report = json.loads(r.trace.executions[0].stdout_tail)
    assert report["found"] == []


def test_the_skill_is_mounted_read_only(service, scripts, sample):
    task_id = "42354"
    code = """
import os
print(open("/skill/SKILL.md").read())
try:
    open("/skill/SKILL.md", "a").write("tamper")
    print("TAMPERED")
except OSError as exc:
    print("read-only", exc.errno)
"""
    marker = sample.task(task_id).instruction[:120]
    scripts.scripts[marker] = [fenced(code)]
    try:
        r = service.client.run(
            request_for(sample, task_id, skill="# Rule\nAlways MARKER-SKILL-42.\n"), timeout_s=120
        )
    finally:
        del scripts.scripts[marker]
    out = r.trace.executions[0].stdout_tail
    assert "MARKER-SKILL-42" in out and "read-only" in out and "TAMPERED" not in out
    # The skill also reaches the model, in the system prompt.
    assert "MARKER-SKILL-42" in r.trace.system_prompt


def test_a_retried_rollout_id_runs_once(service, scripts, sample):
    task_id = "56563"
    scripts.scripts[sample.task(task_id).instruction[:120]] = [fenced(solution_code(task_id))]
    req = request_for(sample, task_id, rollout_id="test/idempotent/56563")
    before = len(service.model.api_requests("chat"))
    first = service.client.run(req, timeout_s=120)
    second = service.client.run(req, timeout_s=120)
    assert first.hard == second.hard == 1.0
    assert first.trace.executions[0].duration_s == second.trace.executions[0].duration_s
    assert len(service.model.api_requests("chat")) - before == 1


def test_oom_in_generated_code_is_a_typed_infra_error(service, scripts, sample):
    task_id = "493-18"
    marker = sample.task(task_id).instruction[:120]
    scripts.scripts[marker] = [fenced("x = []\nwhile True:\n    x.append(bytearray(32 * 1024 * 1024))\n")]
    try:
        r = service.client.run(
            request_for(
                sample, task_id, limits=Limits(wall_time_s=120, exec_timeout_s=60, memory_bytes=256 * 2**20)
            ),
            timeout_s=180,
        )
    finally:
        del scripts.scripts[marker]
    assert r.infra_error is not None and r.infra_error.kind.value == "oom_killed", r
    assert not r.infra_error.is_retryable
    assert r.trace.executions[0].oom_killed
