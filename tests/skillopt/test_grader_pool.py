"""GraderPool: grading functions run in worker processes, and every way a worker can fail is
a typed GraderFailed with the pool back at full size."""

from __future__ import annotations

import contextlib
import os
import pickle
import time

import pytest

from skillopt.envs.spreadsheetbench.evaluator import GradingDataError, grade_case
from skillopt.envs.spreadsheetbench.loader import SAMPLE_ROOT, SpreadsheetBenchData, build_task
from skillopt.errors import GraderFailed
from skillopt.grader_pool import GraderPool

MiB = 1024 * 1024


# Module-level, so a worker can import them by name.
def _add(a: int, b: int) -> int:
    return a + b


def _pid() -> int:
    return os.getpid()


def _sleep(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def _exit_now() -> None:
    os._exit(3)


def _allocate(n_bytes: int) -> int:
    return len(bytearray(n_bytes))


def _raise_value_error() -> None:
    raise ValueError("the function's own error")


def _environ() -> dict[str, str]:
    return dict(os.environ)


def _unpicklable_result():
    return lambda: None


@pytest.fixture
def pool():
    with GraderPool(2, preload=["skillopt.envs.spreadsheetbench.evaluator"], timeout_s=60) as p:
        yield p


def test_calls_run_in_other_processes_and_return_their_results(pool):
    assert pool.call(_add, 2, b=3) == 5
    pids = {pool.call(_pid) for _ in range(6)}
    assert os.getpid() not in pids
    assert pids <= set(pool.pids())
    assert pool.stats().calls == 7


def test_a_real_grading_gives_the_same_verdict_as_in_process(pool):
    data = SpreadsheetBenchData(SAMPLE_ROOT)
    task, grading = build_task(data.task(data.ids[0]))
    gold = grading.cases[0].files[0].content
    position = task.attributes["answer_position"]
    assert pool.call(grade_case, gold, gold, position) == grade_case(gold, gold, position)
    assert pool.call(grade_case, task.cases[0].files[0].content, gold, position) == grade_case(
        task.cases[0].files[0].content, gold, position
    )
    # The function's own exceptions come back as themselves.
    with pytest.raises(GradingDataError):
        pool.call(grade_case, gold, b"not a workbook", position)


def test_the_functions_exception_is_reraised_and_the_worker_kept(pool):
    before = set(pool.pids())
    with pytest.raises(ValueError, match="the function's own error"):
        pool.call(_raise_value_error)
    assert set(pool.pids()) == before
    assert pool.stats().restarts == 0


def test_an_overrun_kills_the_worker_and_a_new_one_takes_its_place(pool):
    before = set(pool.pids())
    with pytest.raises(GraderFailed, match=r"longer than 0\.5s"):
        pool.call(_sleep, 30, timeout_s=0.5)
    after = set(pool.pids())
    assert len(after) == 2 and after != before
    assert pool.call(_add, 1, 1) == 2
    stats = pool.stats()
    assert stats.timeouts == 1 and stats.restarts == 1


def test_a_dying_worker_is_a_typed_failure_and_replaced(pool):
    with pytest.raises(GraderFailed, match="exited with status 3") as info:
        pool.call(_exit_now)
    assert info.value.retryable
    assert len(pool.pids()) == 2
    assert pool.call(_add, 2, 2) == 4
    assert pool.stats().crashes == 1


def test_a_memory_bomb_fails_in_the_worker_not_the_caller():
    with GraderPool(1, memory_bytes=512 * MiB) as small:
        with pytest.raises(GraderFailed, match="out of memory"):
            small.call(_allocate, 2048 * MiB)
        assert small.call(_allocate, 16 * MiB) == 16 * MiB


def test_an_unpicklable_result_is_reported(pool):
    with pytest.raises(GraderFailed, match="could not be sent"):
        pool.call(_unpicklable_result)
    assert pool.call(_add, 0, 0) == 0


def test_workers_see_no_secret_of_the_service(pool, monkeypatch):
    # The pool was started before this variable existed; a new worker must not see it either.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-of-the-host")
    with pytest.raises(GraderFailed):
        pool.call(_exit_now)  # forces a replacement worker, started now
    for _ in range(4):
        env = pool.call(_environ)
        assert "OPENAI_API_KEY" not in env
        assert not any("secret" in v for v in env.values())


def test_a_closed_pool_refuses_calls_with_a_clear_error():
    pool = GraderPool(1)
    pids = pool.pids()
    pool.close()
    with pytest.raises(GraderFailed, match="closed"):
        pool.call(_add, 1, 2)
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_zero_workers_is_refused():
    with pytest.raises(ValueError, match="at least one worker"):
        GraderPool(0)


def test_a_worker_killed_while_idle_is_replaced_before_it_is_used(pool):
    for pid in pool.pids():
        os.kill(pid, 9)
    for pid in pool.pids():
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)  # wait until each is dead (kill is asynchronous)
    assert [pool.call(_add, k, 1) for k in range(4)] == [1, 2, 3, 4]
    assert pool.stats().restarts == 2 and pool.stats().crashes == 0


def test_an_argument_that_does_not_pickle_fails_here_and_keeps_the_worker(pool):
    before = set(pool.pids())
    with pytest.raises((pickle.PicklingError, AttributeError)):  # what pickle raises varies
        pool.call(_add, lambda: 1, 2)
    assert set(pool.pids()) == before
    assert [pool.call(_add, 1, 1) for _ in range(3)] == [2, 2, 2]
