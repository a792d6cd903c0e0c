"""``skillopt sleep mine``: harvested sessions → tasks of the ``sleep`` env (docs/sleep.md, Mine).

Exit status: 0 tasks written (or, with ``--dry-run``, shown); 1 nothing checkable was mined
(nothing is written; the message counts why); 2 bad usage, no harvest found, or a model miner
without a model.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from skillopt.errors import ConfigError

if TYPE_CHECKING:
    from skillopt.sleep.mine import Miner, MineResult
    from skillopt.sleep.record import HarvestedSession

__all__ = ["mine_parser"]

EXIT_NOTHING = 1
EXIT_USAGE = 2
DEFAULT_HARVEST = Path(".skillopt/sleep/harvest")
DEFAULT_MINED = Path(".skillopt/sleep/mined")


def mine_parser(actions: argparse._SubParsersAction) -> None:
    """``skillopt sleep mine``: harvested sessions in, tasks with checkable references out."""
    m = actions.add_parser(
        "mine",
        help="turn harvested sessions into tasks with checkable references (the sleep env's data)",
        description=(
            "Read the harvest (redacted records), make one task per session with a reference that can "
            "be checked (a command that must succeed, tests that must pass, a file's content, or the "
            "answer the user accepted), split them by session into train / selection / test, and write "
            "them as the sleep env's data plus mined.json. Tasks with no checkable reference are kept "
            "out of the splits (listed in unchecked.json). See docs/sleep.md."
        ),
    )
    m.add_argument(
        "--harvest",
        default=str(DEFAULT_HARVEST),
        metavar="DIR",
        help=f"harvest folder (default ./{DEFAULT_HARVEST})",
    )
    m.add_argument("--out", metavar="DIR", help=f"output folder (default ./{DEFAULT_MINED}/<UTC timestamp>)")
    m.add_argument(
        "--miner", choices=("rules", "model"), default="rules", help="rules (default, no model) or model"
    )
    m.add_argument(
        "--model", metavar="NAME", help="the model the model miner asks (the provider's model name)"
    )
    m.add_argument(
        "--provider",
        metavar="PROFILE",
        help="provider profile of --model (default: the only configured one); see `skillopt models`",
    )
    m.add_argument("--providers", metavar="FILE", help="providers YAML file (profiles with their keys)")
    m.add_argument(
        "--provider-spec",
        action="append",
        default=[],
        metavar="SPEC",
        help="a profile as name=kind,base_url=URL[,api_key_env=VAR] (repeatable)",
    )
    m.add_argument(
        "--seed", type=int, default=0, help="split seed: the same seed gives the same splits (default 0)"
    )
    m.add_argument(
        "--dry-run",
        action="store_true",
        help="write nothing and call no model: show what would be mined (rules) or sent to the model (model)",
    )
    m.set_defaults(func=_mine)


def _model_miner(args: argparse.Namespace) -> Miner:
    from skillopt.sleep.model_miner import ModelMiner

    if not args.model:
        raise ConfigError(
            "--miner model needs --model NAME (and --provider PROFILE when several are configured)"
        )
    if args.dry_run:
        return ModelMiner(None, args.model)
    from skillopt.models.profiles import build_model, load_profiles

    profiles = load_profiles(file=args.providers, specs=args.provider_spec)
    name = args.provider or (next(iter(profiles)) if len(profiles) == 1 else "")
    if name not in profiles:
        known = ", ".join(sorted(profiles)) or "none"
        raise ConfigError(
            f"--provider {args.provider or '(not given)'}: give one of the configured profiles ({known}); "
            "configure one with OPENAI_API_KEY / ANTHROPIC_API_KEY, --providers FILE or --provider-spec"
        )
    return ModelMiner(build_model(profiles[name]), args.model)


def _mine(args: argparse.Namespace) -> int:
    from skillopt.logs import configure_logging
    from skillopt.sleep.mine import MineConfig, NothingMined, mine
    from skillopt.sleep.rules import RuleMiner

    configure_logging(json=False, level="warning")  # stdout holds the summary (and the preview)
    out = Path(args.out) if args.out else DEFAULT_MINED / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    try:
        miner = _model_miner(args) if args.miner == "model" else RuleMiner()
        config = MineConfig(harvest=Path(args.harvest), out=out, seed=args.seed, dry_run=args.dry_run)
        result = mine(config, miner, model=args.model or "", preview=_print_preview if args.dry_run else None)
    except NothingMined as exc:
        print(f"skillopt sleep mine: {exc.message}", file=sys.stderr)
        return EXIT_NOTHING
    except ConfigError as exc:
        print(f"skillopt sleep mine: {exc.message}", file=sys.stderr)
        return EXIT_USAGE
    _print_summary(result, dry_run=args.dry_run)
    return 0


def _print_preview(session: HarvestedSession, sent: str) -> None:
    if sent:
        print(f"--- would send for {session.source} session {session.session_id}")
        print(sent)


def _print_summary(result: MineResult, *, dry_run: bool) -> None:
    m = result.manifest
    lines = [
        f"sessions read: {m.counts['sessions_read']} (corrupt records skipped: {m.counts['corrupt_records']})",
        f"tasks with a checkable reference: {m.counts['checkable']}"
        + (f" ({', '.join(f'{k} {n}' for k, n in m.by_kind.items() if n)})" if m.counts["checkable"] else ""),
        f"tasks without one (kept out of the splits): {m.counts['unchecked']}"
        + (
            f" ({', '.join(f'{k} {n}' for k, n in m.unchecked_reasons.items())})"
            if m.unchecked_reasons
            else ""
        ),
    ]
    for name, split in m.splits.items():
        short = "" if split.tasks >= split.minimum else f"  BELOW the minimum of {split.minimum}"
        lines.append(f"  {name}: {split.tasks} tasks from {len(split.sessions)} sessions{short}")
    for record in m.corrupt_records[:5]:
        lines.append(f"  corrupt record skipped: {record}")
    if m.below_minimum:
        lines.append(
            f"note: {', '.join(m.below_minimum)} below the minimum size: harvest more sessions before "
            "`skillopt sleep run` (a gate on too few tasks decides little)"
        )
    if dry_run:
        for name, tasks in result.tasks.items():
            for it in tasks:
                lines.append(
                    f"  would write {name}: "
                    + json.dumps(it.model_dump(mode="json"), ensure_ascii=False)[:300]
                )
        lines.append("nothing written (--dry-run)")
    else:
        lines.append(
            f"written to {result.out} (train with --set env.name=sleep --set env.data_root={result.out})"
        )
    print("\n".join(lines))
