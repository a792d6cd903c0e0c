#!/usr/bin/env bash
# The README's test command: set up what the tests need (Docker engine, images, .venv), then
# run the whole suite against the real Docker engine. Extra arguments go to pytest.
#   scripts/test.sh              # everything
#   scripts/test.sh -k hardening # a subset
#   scripts/test.sh -n 0 tests/x # one process (no workers)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh --tests
# The suite runs on several workers (pytest-xdist): most of it waits on Docker, subprocesses
# and sockets, so more workers than cores pay. --dist loadfile keeps each file on one worker, so
# a module-scoped fixture (a training run, a sandbox service) is still set up once per file;
# --no-loadscope-reorder keeps tests/conftest.py's order (the slowest files first: xdist would
# otherwise hand out the files with the most tests first, and the e2e files last).
# SKILLOPT_TEST_WORKERS=0 runs in this one process; a -n given in the arguments wins.
# pytest's own exit code is the result: 5 (no tests collected) fails like any other non-zero.
# Byte-compile the sources once: the suite starts some 700 Python processes (CLI runs, sandbox
# hosts), and where PYTHONDONTWRITEBYTECODE is set (this machine's shells set it) each would
# compile every module it imports from source again (0.3-0.6 s of CPU each).
.venv/bin/python -m compileall -q -j 0 skillopt controller sandbox tests >/dev/null
exec .venv/bin/python -m pytest -n "${SKILLOPT_TEST_WORKERS:-3}" --dist loadfile --no-loadscope-reorder "$@"
