"""``skillopt`` command line: the composition root.

Each sub-command lives in ``controller/commands/<name>.py`` and exposes
``register(subparsers) -> None``, which adds its parser and sets ``func(args) -> int``.
Configuration is parsed once here and passed down as typed objects.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from controller.commands.flags import CommandParser

__all__ = ["build_parser", "main", "parse_args", "start_tracing"]

# Order is the order shown in ``skillopt --help``.
_COMMANDS = (
    "train",
    "eval",
    "runs",
    "skill",
    "config",
    "models",
    "data",
    "ui",
    "serve",
    "fleet",
    "sandbox",
    "grade",
    "score",
    "sleep",
)


class _RefusingParser(CommandParser):
    """A parser whose bad command line is a :class:`~skillopt.errors.ConfigError`, not an exit
    (:func:`parse_args`; its sub-command parsers are of this class too)."""

    def error(self, message: str) -> NoReturn:
        from skillopt.errors import ConfigError

        raise ConfigError(f"{self.prog}: {message}")


def build_parser(*, refusing: bool = False) -> argparse.ArgumentParser:
    """The ``skillopt`` parser (``refusing``: a bad command line raises instead of exiting)."""
    parser = (_RefusingParser if refusing else argparse.ArgumentParser)(
        prog="skillopt",
        description=(
            "Train an agent's SKILL.md with epochs, batches, an edit budget and a validation gate; "
            "every rollout runs in a hardened Docker sandbox reached over gRPC."
        ),
    )
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=_RefusingParser if refusing else CommandParser
    )
    sub.required = True
    for name in _COMMANDS:
        try:
            module = importlib.import_module(f"controller.commands.{name}")
        except ModuleNotFoundError as exc:  # a command not built yet
            if exc.name != f"controller.commands.{name}":
                raise
            continue
        module.register(sub)
    return parser


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """``skillopt ARGV...`` parsed by the CLI's own parser, for a caller that builds a command
    line and checks it before running it (the WebUI's launch, resume and eval)::

        args = parse_args(["train", "--resume", "runs/demo"])
        cfg, out = controller.commands.train.load(args)

    Raises:
        ConfigError: a bad command line (what argparse would print before exiting).
    """
    return build_parser(refusing=True).parse_args(list(argv))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command != "serve" and not start_tracing("skillopt-controller"):  # a host traces as itself
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`skillopt skill show … | head`): not an error of ours. Point
        # stdout at /dev/null so the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def start_tracing(service: str, **attributes: str) -> bool:
    """Start tracing when the ``OTEL_*`` variables ask for it (docs/observability.md); False
    (said on stderr) when they ask for what cannot be had."""
    from skillopt.errors import ConfigError
    from skillopt.observability import tracing

    try:
        tracing.configure(service, attributes=attributes)
    except ConfigError as exc:
        print(f"skillopt: {exc.message}", file=sys.stderr)
        return False
    return True


if __name__ == "__main__":
    raise SystemExit(main())
