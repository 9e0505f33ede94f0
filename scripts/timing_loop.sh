#!/usr/bin/env bash
# Run the tests that watch wall-clock events (start-up phases, pacing, timeouts, signals at moments of a run) N
# times in a row beside two busy loops, and count the outcomes. The race loop's sibling (scripts/race_loop.sh):
# a test here must hold on a machine whose both cores are taken by something else.
#
#   ./scripts/timing_loop.sh [N=10] [OUT_DIR=/tmp/timing] [pytest selection ...]
#
# Without a selection it runs the files below: every test that reads a pass's latency or a server's timing among
# them. A test that plants a one-time event in a server during a measured pass runs twice in each iteration, the
# second time with its first counted pass run again on purpose (the `client_rerun` fixture, tests/conftest.py);
# the summary counts those. Each iteration's PASSED/FAILED lines go to OUT_DIR/timing-I.txt, its whole output to
# OUT_DIR/full-I.txt, and one line per iteration to OUT_DIR/summary.txt.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
N="${1:-10}"
OUT="${2:-/tmp/timing}"
shift 2 2>/dev/null || shift $#
FILES=("$@")
if [ ${#FILES[@]} -eq 0 ]; then
  FILES=(
    tests/sim/test_readiness.py tests/sim/test_startup.py tests/sim/test_api.py
    tests/sim/test_faults.py
    tests/target/readiness/test_wait.py tests/target/test_verify.py
    tests/bench/test_http.py tests/bench/test_workers.py tests/bench/test_alarm.py tests/bench/test_open_loop.py
    tests/bench/test_cli.py tests/bench/test_benchmark_contract.py
    tests/real/test_llama_server.py tests/real/test_llama_cpp.py
    tests/gate/test_sandbox.py tests/gate/test_humaneval_gate.py
    tests/cli/test_detach.py tests/cli/test_notify.py tests/cli/test_resume.py
    tests/study/test_interrupt.py tests/study/test_signals.py
  )
fi
mkdir -p "$OUT"
cd "$ROOT" || exit 2
python3 -c 'while True: pass' &
BUSY1=$!
python3 -c 'while True: pass' &
BUSY2=$!
trap 'kill $BUSY1 $BUSY2' EXIT
for i in $(seq 1 "$N"); do
  start=$(date +%s)
  .venv/bin/python -m pytest -q -rA -p no:cacheprovider -n 2 "${FILES[@]}" > "$OUT/full-$i.txt" 2>&1
  grep -E "^(PASSED|FAILED|ERROR) " "$OUT/full-$i.txt" > "$OUT/timing-$i.txt"
  forced="$(grep -c "^PASSED .*client-rerun" "$OUT/timing-$i.txt") passed, $(grep -cE "^(FAILED|ERROR) .*client-rerun" "$OUT/timing-$i.txt") failed"
  echo "iteration $i: $(tail -1 "$OUT/full-$i.txt") ($(( $(date +%s) - start )) s); forced client reruns: $forced" \
    | tee -a "$OUT/summary.txt"
done
