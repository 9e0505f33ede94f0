#!/usr/bin/env bash
# Set up, then run the whole test suite (plus ruff and mypy). Extra arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh"
cd "$ROOT"
# The SSH/systemd tests run against a real OpenSSH server on loopback.
if [ ! -x /usr/sbin/sshd ] && [ "$(id -u)" = "0" ]; then
  echo "test: installing openssh-server for the SSH tests"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server >/dev/null
fi
.venv/bin/ruff check tuner tests scripts
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
