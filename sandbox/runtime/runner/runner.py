"""The in-container runner: the rollout container's main process.

The runner package (this directory) is bind-mounted read-only at ``/opt/skillopt`` in every
rollout container and started by Docker's init as ``python3 -I /opt/skillopt/runner.py
--connect /control/runner.sock``. It imports the heavy libraries once (``--preimport``, see
``imports.py``), connects to the listening socket the sandbox service created in the control
directory, and then serves requests over that one connection (``serve.py``): write, read and
list files (``files.py``), and execute programs in a forked child (``process.py``,
``child.py``, ``sweep.py``). What is said over the connection is ``protocol.py``, which the
service imports too.

Why a runner instead of ``docker exec``: an exec costs ~50 ms here, a fork from a parent that
already imported openpyxl costs ~2 ms, which makes sandboxed execution faster than a bare host
subprocess (DESIGN §4).

Trust: this process runs as the same unprivileged user as the code it executes, so its word is
not trusted by the service for anything that matters (timeouts and OOM kills are determined on
the host side). The established connection cannot be hijacked by the child: the listening
socket is gone once connected and the child closes the fd right after fork.

Stdlib only: this package runs on the image's Python, not the service's.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys

#: The package's name inside the container. ``-I`` keeps this directory off ``sys.path``, and
#: its modules are imported under this one unlikely name instead, so that a program's own
#: ``protocol.py`` or ``files.py`` is never shadowed by the runner's (already imported) one.
PACKAGE = "_skillopt_runner"


def _load_package() -> None:
    """Import this directory as the package :data:`PACKAGE` (its modules import each other
    relatively, as they do on the service's side as ``sandbox.runtime.runner``)."""
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location(
        PACKAGE, os.path.join(here, "__init__.py"), submodule_search_locations=[here]
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the runner package from {here}")
    package = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = package
    spec.loader.exec_module(package)


def _options(argv: list[str]) -> dict[str, str]:
    """The command line the service builds: ``--connect`` (the unix socket it listens on),
    ``--preimport`` and ``--import-on-demand`` (comma-separated modules). Parsed by hand:
    argparse would add ~5 ms of imports to every container's start."""
    options = {"--connect": "", "--preimport": "openpyxl", "--import-on-demand": "pandas"}
    args = iter(argv)
    for name in args:
        value = next(args, None)
        if name not in options or value is None:
            raise SystemExit(
                f"runner: unexpected argument {name!r}; usage: runner.py --connect SOCKET "
                "[--preimport MODULES] [--import-on-demand MODULES]"
            )
        options[name] = value
    if not options["--connect"]:
        raise SystemExit("runner: --connect SOCKET is required")
    return options


def main(argv: list[str] | None = None) -> int:
    options = _options(sys.argv[1:] if argv is None else argv)
    sys.dont_write_bytecode = True  # the mount is read-only, and nothing may write next to it
    _load_package()
    serve = importlib.import_module(f"{PACKAGE}.serve")
    return serve.start(
        options["--connect"],
        preimports=[m for m in options["--preimport"].split(",") if m],
        on_demand=[m for m in options["--import-on-demand"].split(",") if m],
    )


if __name__ == "__main__":
    sys.exit(main())
