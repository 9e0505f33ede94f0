#!/usr/bin/env bash
# Set up, then run the whole test suite (plus ruff and mypy). Extra arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh" test
cd "$ROOT"
# Real peers for the tests: an OpenSSH server (SSH/systemd tests) and a PostgreSQL server (workers sharing a
# study), both started privately on loopback by the tests themselves.
missing=""
[ -x /usr/sbin/sshd ] || missing="$missing openssh-server"
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing="$missing postgresql"
if [ -n "$missing" ] && [ "$(id -u)" = "0" ]; then
  echo "test: installing$missing"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi
# Real inference servers for tests/real (llama.cpp's llama-server and llama-cpp-python, from one build of the
# llama.cpp sources, + SmolLM2-135M): built once, then cached. Their tests skip only when they are absent, so the
# set-up must not be: TUNE_REQUIRE_LLAMA turns a skip into a failure.
"$ROOT/scripts/setup-llama.sh"
export TUNE_REQUIRE_LLAMA=1
.venv/bin/ruff check tuner tests scripts
.venv/bin/mypy
# Most tests wait on real servers and processes rather than compute (the suite keeps 2 cores about half busy
# with 3 workers): 5 workers on 2 cores (see README).
.venv/bin/python -m pytest -n "${TUNE_TEST_WORKERS:-5}" --dist loadgroup "$@"
