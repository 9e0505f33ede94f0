#!/usr/bin/env bash
# Set up, then tune the bundled simulated server: `tune start --trials 30` on studies/demo.toml.
# Extra arguments go to `tune start` (e.g. --trials 10).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh"
cd "$ROOT"
.venv/bin/tune start --trials 30 "$@"
.venv/bin/tune best
