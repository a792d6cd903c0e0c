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

import argparse
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--connect", required=True, help="unix socket the service listens on")
    parser.add_argument("--preimport", default="openpyxl")
    parser.add_argument("--import-on-demand", default="pandas")
    args = parser.parse_args(argv)
    sys.dont_write_bytecode = True  # the mount is read-only, and nothing may write next to it
    _load_package()
    serve = importlib.import_module(f"{PACKAGE}.serve")
    return serve.start(
        args.connect,
        preimports=[m for m in args.preimport.split(",") if m],
        on_demand=[m for m in args.import_on_demand.split(",") if m],
    )


if __name__ == "__main__":
    sys.exit(main())
