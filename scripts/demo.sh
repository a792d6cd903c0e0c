#!/usr/bin/env bash
# The README's main job: a short skill-training run on the vendored SpreadsheetBench sample
# through the embedded local sandbox. With OPENAI_API_KEY (or model.providers_file) set it uses
# the real models; without, it runs the announced offline simulation.
#   scripts/demo.sh [extra skillopt train arguments, e.g. --set train.num_epochs=3]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
out="runs/demo_$(date +%Y%m%d_%H%M%S)"
exec .venv/bin/skillopt train --config spreadsheetbench_demo --out "$out" "$@"
