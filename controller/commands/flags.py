"""Flag spellings shared by the sub-commands, old spellings kept as deprecated aliases, and the
sub-commands' parser (:class:`CommandParser`, whose flags may be added when first used).

One spelling per idea across commands (issue 34): ``--memory-mb`` for a memory limit in MiB,
``--out`` for an output directory, ``--endpoints``/``--token-file``/``--tls-*`` for the fleet
(:mod:`controller.fleet.access`). A renamed flag keeps working under its old name, which
says once on stderr what to write instead.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["CommandParser", "add_deprecated_alias"]


class CommandParser(argparse.ArgumentParser):
    """A sub-command's parser, whose arguments may be added when it is first used
    (:meth:`add_arguments_later`): ``skillopt serve`` makes its flags from the host's pydantic
    model, and importing pydantic and building that model (~0.3 s here) would otherwise slow
    the start of every other command."""

    _later: Callable[[argparse.ArgumentParser], None] | None = None

    def add_arguments_later(self, add: Callable[[argparse.ArgumentParser], None]) -> None:
        """Call ``add(self)`` before this parser first parses or shows its help."""
        self._later = add

    def _ready(self) -> None:
        add, self._later = self._later, None
        if add is not None:
            add(self)

    def parse_known_args(self, *args: Any, **kwargs: Any) -> Any:
        self._ready()
        return super().parse_known_args(*args, **kwargs)

    def format_usage(self, *args: Any, **kwargs: Any) -> str:
        self._ready()
        return super().format_usage(*args, **kwargs)

    def format_help(self, *args: Any, **kwargs: Any) -> str:
        self._ready()
        return super().format_help(*args, **kwargs)


class _DeprecatedAlias(argparse.Action):
    """Stores into the new flag's ``dest`` and prints a one-line note naming the new flag."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, new_flag: str, **kwargs: Any) -> None:
        self.new_flag = new_flag
        super().__init__(option_strings, dest, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        print(
            f"{parser.prog}: {option_string} is deprecated; use {self.new_flag} (same meaning)",
            file=sys.stderr,
        )
        setattr(namespace, self.dest, values)


def add_deprecated_alias(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    old_flag: str,
    *,
    new_flag: str,
    dest: str,
    type: Any = None,
) -> None:
    """Accept ``old_flag`` as ``new_flag`` (the same ``dest``), hidden from ``--help``."""
    parser.add_argument(
        old_flag,
        dest=dest,
        type=type,
        action=_DeprecatedAlias,
        new_flag=new_flag,
        default=argparse.SUPPRESS,
        help=argparse.SUPPRESS,
    )
