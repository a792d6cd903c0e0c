"""``skillopt sleep``: learn from the user's own agent sessions (docs/sleep.md).

The actions: ``harvest`` reads Claude Code's and Codex's session transcripts (read-only),
redacts secrets and writes one record per session; ``mine`` turns records into tasks with
checkable references (``sleep_mine.py``); ``run`` harvests, mines, trains on the tasks, gates
on held-out ones and stages a proposal (``sleep_run.py``); ``status``, ``adopt`` and
``revert`` list, install and undo staged proposals (``sleep_stage.py``). Each action is a
function that adds its parser, listed in :data:`_ACTIONS`.

Exit status of ``harvest``: 0 done (sessions that could not be used are listed, not fatal);
2 bad usage, or none of the sources' transcript folders exists.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from controller.commands.sleep_mine import mine_parser
from controller.commands.sleep_run import run_parser
from controller.commands.sleep_stage import adopt_parser, revert_parser, status_parser
from skillopt.errors import ConfigError

if TYPE_CHECKING:
    from skillopt.sleep import HarvestedSession, HarvestResult, Source

__all__ = ["register"]

EXIT_USAGE = 2
DEFAULT_OUT = Path(".skillopt/sleep/harvest")


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``skillopt sleep`` and its actions."""
    p = sub.add_parser(
        "sleep",
        help="learn from your own Claude Code and Codex sessions: harvest, mine, train, stage, adopt",
        description=(
            textwrap.fill(
                "Sleep learns from the agent sessions you already ran. `harvest` reads Claude Code's "
                "and Codex's session files (read-only), takes secrets out, and writes one JSON record "
                "per session under .skillopt/sleep/harvest/; `mine` makes tasks with checkable "
                "references of them; `run` trains your installed skill on those tasks and stages the "
                "result when it beats the live skill on held-out tasks; nothing is installed until "
                "you run `adopt`. Transcripts never leave this machine (a model sees the mined tasks).",
                92,
            )
            + "\n\nExamples:\n"
            "  skillopt sleep harvest --dry-run            # what would be harvested, redacted\n"
            "  skillopt sleep harvest --since 7d --project .\n"
            "  skillopt sleep harvest --source codex --out /tmp/harvest\n"
            "  skillopt sleep run --skill my-skill --since 7d   # then: skillopt sleep status\n"
            "  skillopt sleep adopt --skill my-skill            # after reading REPORT.md"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = p.add_subparsers(dest="sleep_command", metavar="ACTION")
    actions.required = True
    for add in _ACTIONS:
        add(actions)


def _harvest_parser(actions: argparse._SubParsersAction) -> None:
    """``skillopt sleep harvest``: sessions in, redacted records out."""
    h = actions.add_parser(
        "harvest",
        help="read agent session transcripts (read-only), redact secrets, write one record per session",
        description=(
            "Read Claude Code's transcripts ($CLAUDE_CONFIG_DIR/projects, else ~/.claude/projects) and "
            "Codex's ($CODEX_HOME/sessions, else ~/.codex/sessions), read-only. Each session becomes one "
            "redacted JSON record (task, turns, tool calls, outcome signals, skills used) under --out, "
            "listed in index.json. A session already harvested is skipped; one whose file grew is "
            "harvested again. See docs/sleep.md."
        ),
    )
    h.add_argument(
        "--source",
        default="claude-code,codex",
        metavar="LIST",
        help="comma-separated sources to read: claude-code, codex (default both)",
    )
    h.add_argument(
        "--since",
        metavar="WHEN",
        help="only sessions active since then: a span back from now (30m, 24h, 7d, 2w) or an ISO date",
    )
    h.add_argument("--project", metavar="DIR", help="only sessions that worked in DIR or a folder inside it")
    h.add_argument(
        "--out", default=str(DEFAULT_OUT), metavar="DIR", help=f"harvest folder (default ./{DEFAULT_OUT})"
    )
    h.add_argument(
        "--include-tool-output",
        action="store_true",
        help="keep tool outputs in the records (redacted and clipped); left out by default",
    )
    h.add_argument(
        "--dry-run",
        action="store_true",
        help="write nothing: print each session that would be harvested, as a model would read it (redacted)",
    )
    h.set_defaults(func=_harvest)


_ACTIONS: tuple[Callable[[argparse._SubParsersAction], None], ...] = (
    _harvest_parser,
    mine_parser,
    run_parser,
    status_parser,
    adopt_parser,
    revert_parser,
)


def _sources(text: str) -> list[Source]:
    from skillopt.sleep.sources import parse_sources

    return parse_sources(text)


def _harvest(args: argparse.Namespace) -> int:
    from skillopt.logs import configure_logging
    from skillopt.sleep import HarvestConfig, harvest, parse_since, source_root

    configure_logging(json=False, level="warning")  # stdout holds the summary (and the preview)
    try:
        config = HarvestConfig(
            roots={s: source_root(s, os.environ) for s in _sources(args.source)},
            out=Path(args.out),
            since=parse_since(args.since, datetime.now(UTC)) if args.since else None,
            project=Path(args.project).expanduser().resolve() if args.project else None,
            include_tool_output=args.include_tool_output,
            dry_run=args.dry_run,
        )
        result = harvest(config, preview=_print_preview if args.dry_run else None)
    except ConfigError as exc:
        print(f"skillopt sleep harvest: {exc.message}", file=sys.stderr)
        return EXIT_USAGE
    _print_summary(result, config.out, dry_run=args.dry_run)
    return 0


def _print_preview(session: HarvestedSession) -> None:
    from skillopt.sleep import render_session

    print(f"--- would harvest {session.source_path}")
    print(render_session(session))


def _print_summary(result: HarvestResult, out: Path, *, dry_run: bool) -> None:
    verb = "would harvest" if dry_run else "harvested"
    lines = [
        f"sessions seen: {result.seen}",
        f"  {verb}: {len(result.harvested)}"
        + (f" ({result.replaced} replacing an older record of the same session)" if result.replaced else ""),
        f"  skipped, unchanged since the last harvest: {result.unchanged}",
    ]
    for flag, n in sorted(result.filtered.items()):
        lines.append(f"  left out by {flag}: {n}")
    if result.skipped:
        lines.append(f"  skipped, not usable: {len(result.skipped)}")
        by_reason: dict[str, list[str]] = {}
        for s in result.skipped:
            by_reason.setdefault(s.reason, []).append(f"{s.path}: {s.detail}")
        for reason, files in sorted(by_reason.items()):
            lines.append(f"    {reason}: {len(files)}")
            lines += [f"      {f}" for f in files[:5]] + (
                [f"      ... {len(files) - 5} more"] if len(files) > 5 else []
            )
    lines.append(f"lines skipped (corrupt or cut-off JSON): {result.lines_skipped}")
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(result.redactions.items()))
    lines.append(f"secrets redacted: {kinds or 'none'}")
    for source, root in result.missing:
        lines.append(f"note: no {source} transcripts: {root} does not exist")
    if result.index_note:
        lines.append(f"note: {result.index_note}")
    lines.append("nothing written (--dry-run)" if dry_run else f"records in {out} (index.json lists them)")
    print("\n".join(lines))
