#!/usr/bin/env bash
# Static checks, zero findings allowed (CI runs them before the tests): ruff's lint rules and
# its format check, then mypy, over the three packages (settings in pyproject.toml).
#   scripts/lint.sh          # after scripts/setup.sh (uses .venv)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[[ -x .venv/bin/mypy ]] || { echo "lint: .venv has no mypy; run: bash scripts/setup.sh" >&2; exit 1; }
now_ms() { date +%s%3N; }
run() {  # one line per check, with its time; the findings when it fails
  local name="$1" t
  shift
  t="$(now_ms)"
  if out="$("$@" 2>&1)"; then
    printf 'lint: %-14s ok (%s s)\n' "$name" "$(awk -v ms=$(( $(now_ms) - t )) 'BEGIN { printf "%.1f", ms / 1000 }')"
  else
    printf 'lint: %-14s FAILED\n%s\n' "$name" "$out" >&2
    return 1
  fi
}
packages=(skillopt sandbox controller)
run "ruff check" .venv/bin/ruff check "${packages[@]}" tests bench
run "ruff format" .venv/bin/ruff format --check "${packages[@]}" tests bench
run "mypy" .venv/bin/mypy
