"""The math-verify worker of :mod:`skillopt.envs.math500.equivalence` (one JSON request per
line on stdin, one reply per line on stdout; exits at end of input).

Request ``{"gold": str, "answer": str}``; reply ``{"equal": bool | null, "error": str}``. Runs in
its own main thread, so math-verify's signal-based timeouts work here.
"""

from __future__ import annotations

import json
import logging
import sys


def main() -> int:
    logging.disable(logging.WARNING)  # math-verify logs parse failures at warning level
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    configs = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]
    for line in sys.stdin:
        try:
            req = json.loads(line)
            gold = parse(f"$\\boxed{{{req['gold']}}}$", extraction_config=configs, parsing_timeout=5)
            answer = parse(f"$\\boxed{{{req['answer']}}}$", extraction_config=configs, parsing_timeout=5)
            equal = bool(gold) and bool(answer) and bool(verify(gold, answer, timeout_seconds=5))
            reply: dict[str, bool | str | None] = {
                "equal": equal,
                "error": "" if gold and answer else "unparsable",
            }
        except Exception as exc:  # a checker failure is a reply, never the end of the worker
            reply = {"equal": None, "error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
