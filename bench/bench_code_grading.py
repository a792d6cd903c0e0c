"""Reference-solution sweep of the code envs (a figure, not a test). Run:
``python bench/bench_code_grading.py [--env humaneval|mbpp] [--limit N] [--ids ID,...] [--warm 2]``.

Grades every reference solution of the shared HumanEval / MBPP data with the real grader
(fresh grading containers from a warm pool, a reference run where the plan needs one) and
prints how many pass, the grading modes and the time per item. Timings are noisy on a shared
2-core machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    from sandbox.runtime.fresh import local_grading_sandboxes
    from skillopt.envs._code.env import assemble_program
    from skillopt.envs._code.grading import grade_program
    from skillopt.envs._code.items import CodeGold, CodeTaskPayload, humaneval_item, mbpp_item
    from skillopt.envs._code.plan import plan_tests
    from skillopt.logs import configure_logging
    from skillopt.testing.shared_data import shared_datasets

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", choices=["humaneval", "mbpp", "both"], default="both")
    parser.add_argument("--limit", type=int, default=0, help="first N items per env (0 = all)")
    parser.add_argument("--warm", type=int, default=2, help="idle containers kept ahead")
    parser.add_argument("--ids", default="", help="only these item ids, comma-separated (e.g. mbpp-123)")
    args = parser.parse_args()
    configure_logging(json=True, level="warning")
    shared = shared_datasets()
    if shared is None:
        print("no shared datasets folder (set SKILLOPT_SHARED_DATASETS)", file=sys.stderr)
        return 2
    sources = {
        "humaneval": [
            humaneval_item(json.loads(x))
            for x in (shared / "humaneval" / "HumanEval.jsonl").read_text().splitlines()
        ],
        "mbpp": [mbpp_item(r) for r in json.loads((shared / "mbpp" / "sanitized-mbpp.json").read_text())],
    }
    envs = ["humaneval", "mbpp"] if args.env == "both" else [args.env]
    with local_grading_sandboxes(warm=args.warm) as fresh:
        for env in envs:
            wanted = {i for i in args.ids.split(",") if i}
            items = [it for it in sources[env] if not wanted or it.id in wanted][: args.limit or None]
            if not items:
                continue
            times, failed, modes = [], [], {"probes": 0, "trace": 0}
            t_env = time.monotonic()
            for item in items:
                task = CodeTaskPayload.model_validate(dict(item.task.attributes))
                gold = CodeGold.model_validate(dict(item.grading.attributes))
                plan = plan_tests(
                    gold.test,
                    entry_point=task.entry_point,
                    check_function=gold.check_function,
                    imports=gold.test_imports,
                )
                modes[plan.mode] += 1
                t0 = time.monotonic()
                try:
                    v = grade_program(
                        fresh,
                        assemble_program(gold.reference, task),
                        plan,
                        entry_point=task.entry_point,
                        reference=gold.reference,
                        timeout_s=60,
                    )
                    ok, why = v.hard == 1.0, v.fail_reason
                except Exception as exc:  # a figure: report and go on
                    ok, why = False, f"{type(exc).__name__}: {exc}"
                times.append(time.monotonic() - t0)
                if not ok:
                    failed.append((item.id, why[:200]))
                    print(f"  {env} {item.id}: {why[:200]}", flush=True)
            total = time.monotonic() - t_env
            print(
                f"{env}: {len(items) - len(failed)}/{len(items)} reference solutions pass "
                f"(probes {modes['probes']}, trace {modes['trace']}); "
                f"{statistics.median(times):.2f} s median per item, {total:.0f} s total",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
