#!/usr/bin/env bash
# The README's test command: set up what the tests need (Docker engine, images, .venv), then
# run the whole suite against the real Docker engine. Extra arguments go to pytest.
#   scripts/test.sh              # everything
#   scripts/test.sh -k hardening # a subset
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh --tests
# pytest's own exit code is the result: 5 (no tests collected) fails like any other non-zero.
exec .venv/bin/python -m pytest "$@"
