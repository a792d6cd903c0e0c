"""``skillopt score``: grade one response to one item of a question-answering benchmark.

A stable contract for callers outside the project::

    skillopt score --env ENV --item ITEM.json --response RESPONSE.txt

``ITEM.json`` is one item exactly as it appears in the env's data files (one element of
``../shared/datasets/<env>/*.json`` or one line of ``*.jsonl``); ``RESPONSE.txt`` the model's
whole reply. stdout gets exactly one JSON object with at least ``hard``, ``soft`` and
``answer`` (the extracted answer; also as ``predicted_answer``), plus ``env``, ``id``,
``task_type``, ``fail_reason`` and the env's metrics (``em``, ``f1``, ``sub_em``, ``gold``...).
Exit status: 0 for right *and* wrong answers; 2 with a message on stderr (and nothing on
stdout) when a file cannot be read, the env is unknown or the item is malformed.

Envs: gsm8k, hotpotqa, livemathematicianbench (labels as in the file: no choice shuffling),
math500, searchqa.
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["register"]

EXIT_UNUSABLE = 2


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``score`` sub-command."""
    parser = subparsers.add_parser(
        "score",
        help="grade one response to one QA item with the env's evaluator (prints one JSON object)",
        description=(
            "Grade RESPONSE against ITEM (one item exactly as in the env's data files) with the env's "
            "trusted evaluator. Prints one JSON object with hard, soft and the extracted answer; exit 0 "
            "for right or wrong, 2 if an input is unusable."
        ),
    )
    parser.add_argument(
        "--env", required=True, help="gsm8k, hotpotqa, livemathematicianbench, math500 or searchqa"
    )
    parser.add_argument("--item", required=True, metavar="ITEM.json", help="one raw item (a JSON object)")
    parser.add_argument("--response", required=True, metavar="RESPONSE.txt", help="the model's reply")
    parser.set_defaults(func=run)


def _fail(message: str) -> int:
    print(f"skillopt score: {message}", file=sys.stderr)
    return EXIT_UNUSABLE


def run(args: argparse.Namespace) -> int:
    """Grade and print; see the module docstring for the output contract."""
    from pathlib import Path

    from skillopt.envs._qa.scoring import score_item
    from skillopt.errors import SkillOptError

    try:
        raw = json.loads(Path(args.item).read_text(encoding="utf-8"))
    except OSError as exc:
        return _fail(f"cannot read item {args.item}: {exc.strerror or exc}")
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return _fail(f"item {args.item} is not JSON: {exc}")
    if isinstance(raw, list) and len(raw) == 1:
        raw = raw[0]
    if not isinstance(raw, dict):
        return _fail(
            f"item {args.item} must hold one JSON object (one item of the data files), got {type(raw).__name__}"
        )
    try:
        response = Path(args.response).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return _fail(f"cannot read response {args.response}: {exc.strerror or exc}")
    try:
        out = score_item(args.env, raw, response)
    except SkillOptError as exc:
        return _fail(exc.message)
    print(json.dumps(out, ensure_ascii=False))
    return 0
