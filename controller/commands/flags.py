"""Flag spellings shared by the sub-commands, and old spellings kept as deprecated aliases.

One spelling per idea across commands (issue 34): ``--memory-mb`` for a memory limit in MiB,
``--out`` for an output directory, ``--endpoints``/``--token-file``/``--tls-*`` for the fleet
(:mod:`controller.fleet.access`). A renamed flag keeps working under its old name, which
says once on stderr what to write instead.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["add_deprecated_alias"]


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
