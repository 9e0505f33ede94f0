#!/usr/bin/env bash
# Idempotent set-up: a .venv with tune and the PostgreSQL driver (workers sharing a study, docs/fleet.md); with
# `test` as the argument (test.sh), the test extras too. Run by demo.sh and test.sh.
#
# Kept short for a first run (the demo's set-up is part of its time): uv installs (below) and the demo installs no
# test tools. Everything is byte-compiled ahead, tune's own package included: where PYTHONDONTWRITEBYTECODE is set
# (container images often set it) Python never caches what it compiles, and every `tune` and every simulator
# start would compile optuna, sqlalchemy, scipy and aiohttp again (3 s of a 4.5 s import here).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
VENV="$ROOT/.venv"
EXTRAS="postgres${1:+,$1}"

if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "setup: Python >= 3.11 is required (found: $("$PYTHON" --version 2>&1))" >&2
  exit 1
fi
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
# Reinstall only when the project's dependencies or this set-up changed, or extras are asked for that are not there
# yet: the stamp holds the hash of both files and one line per set of extras installed with it.
stamp="$VENV/.tune-installed"
want="$(cat "$ROOT/pyproject.toml" "$ROOT/scripts/setup.sh" | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(head -1 "$stamp")" != "$want" ]; then
  echo "$want" > "$stamp.new"
elif ! grep -qxF "$EXTRAS" "$stamp" && ! { [ "$EXTRAS" = postgres ] && grep -qxF "postgres,test" "$stamp"; }; then
  cp "$stamp" "$stamp.new"
fi
# uv fetches and installs in parallel (a cold set-up of the demo's packages in about 3 s instead of pip's 15-40 s).
# It reads no pip configuration, so it is handed the package sources pip is configured with (_pip_to_uv.py);
# where uv cannot be had or fails, pip installs as before.
install_with_uv() {
  "$VENV/bin/python" -m pip install --quiet uv >/dev/null 2>&1 || return 1
  local args=() line
  while IFS= read -r line; do
    case "$line" in SSL_CERT_FILE=*) export SSL_CERT_FILE="${line#SSL_CERT_FILE=}" ;; *) args+=("$line") ;; esac
  done < <("$VENV/bin/python" -m pip config list 2>/dev/null | "$VENV/bin/python" "$ROOT/scripts/_pip_to_uv.py")
  "$VENV/bin/python" -m uv pip install --quiet --python "$VENV/bin/python" --compile-bytecode "${args[@]}" -e "$ROOT[$EXTRAS]"
}
if [ -f "$stamp.new" ]; then
  if ! install_with_uv; then
    echo "setup: uv could not install; pip installs instead" >&2
    "$VENV/bin/python" -m pip install --quiet -e "$ROOT[$EXTRAS]"
  fi
  echo "$EXTRAS" >> "$stamp.new"
  mv "$stamp.new" "$stamp"
fi
# The editable package's own modules: checked against their sources at every set-up, so a pull recompiles what
# it changed (an out-of-date file is compiled again on import, only slower).
"$VENV/bin/python" -m compileall -q -j 0 "$ROOT/tuner" >/dev/null
