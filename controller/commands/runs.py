"""``skillopt runs``: list the runs in a directory, or ask a running one to stop."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from skillopt.errors import ConfigError
from skillopt.gate import format_score

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "runs",
        help="list runs (status, scores, tokens) or stop one at its next stage boundary",
        description=(
            "Read run directories the way the WebUI does (the same reader): status from the run's lock "
            "and summary, scores, tokens, hosts. Examples:\n"
            "  skillopt runs                    # the runs in ./runs\n"
            "  skillopt runs --runs-dir /data/runs --json\n"
            "  skillopt runs stop runs/demo     # stops cleanly at the next stage boundary"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("action", nargs="?", choices=("list", "stop"), default="list")
    p.add_argument("run_dir", nargs="?", help="the run to stop (with `stop`)")
    p.add_argument("--runs-dir", default="runs", help="directory of run directories (default ./runs)")
    p.add_argument("--json", action="store_true", help="print JSON lines instead of a table")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from controller.rundir.lock import request_stop
    from controller.rundir.reader import list_runs

    if args.action == "stop":
        if not args.run_dir:
            print("skillopt runs stop: give the run directory", file=sys.stderr)
            return 2
        try:
            holder = request_stop(Path(args.run_dir), reason="stopped with skillopt runs stop", by="cli")
        except ConfigError as exc:
            print(f"skillopt runs: {exc.message}", file=sys.stderr)
            return 1
        print(f"skillopt runs: asked pid {holder.pid} to stop at its next stage boundary", file=sys.stderr)
        return 0
    infos = [r.info() for r in list_runs(Path(args.runs_dir))]
    if args.json:
        for info in infos:
            print(json.dumps(info.to_dict(), default=str))
        return 0
    if not infos:
        print(f"no runs in {args.runs_dir}", file=sys.stderr)
        return 0
    rows = [("RUN", "STATUS", "ENV", "AGENT", "MODE", "GATE", "BEST [95% CI]", "STEPS", "TOKENS", "STARTED")]
    for i in infos:
        mode = (
            "-"
            if i.simulated is None
            else ("real" if not i.simulated else "noisy sim" if i.noisy else "simulated")
        )
        status = "stopping" if i.stop_requested else i.status.value
        steps = f"{i.steps_done}/{i.total_steps}" if i.total_steps else str(i.steps_done)
        started = time.strftime("%Y-%m-%d %H:%M", time.localtime(i.started_at)) if i.started_at else "-"
        rows.append(
            (
                i.name,
                status,
                i.env,
                i.agent,
                mode,
                i.gate_mode or "-",
                format_score(i.best_score, i.best_score_ci95),
                steps,
                str(i.tokens),
                started,
            )
        )
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    for r in rows:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())
    for i in infos:
        if i.files_changed:
            print(f"{i.name}: package files changed by accepted steps: {' '.join(i.files_changed)}")
    for i in infos:
        if i.damage:
            print(f"\n{i.name}: damaged: {i.damage.advice()}")
            for d in i.damage.problems:
                print(f"  {d.file} {d.problem}; {d.repair}")
    return 0
