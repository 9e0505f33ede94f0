#!/usr/bin/env bash
# Run the fleet's race-sensitive tests N times in a row with one core kept busy, and count the outcomes.
#
#   ./scripts/race_loop.sh [N=20] [OUT_DIR=/tmp/race]
#
# A busy loop (`python -c 'while True: pass'`) competes for the CPU the whole time, so claims, slots, heartbeats
# and the workers' start-up race the way they do on a loaded machine. Each iteration's PASSED/FAILED lines go to
# OUT_DIR/race-I.txt and one line per iteration to OUT_DIR/summary.txt.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
N="${1:-20}"
OUT="${2:-/tmp/race}"
mkdir -p "$OUT"
cd "$ROOT" || exit 2
python3 -c 'while True: pass' &
BUSY=$!
trap 'kill $BUSY' EXIT
SEL='test_exactly_one_racer_wins_each_claim or test_slots_cap_the_total or test_starting_points_are_claimed_once'
SEL+=' or test_one_worker_confirms or test_workers_share_a_study or test_sigkilled_worker'
SEL+=' or test_eight_model_workers or test_one_start_runs_a_worker_per_host or test_ctrl_c_stops_every_worker'
SEL+=' or test_sigterm_stops_workers'
for i in $(seq 1 "$N"); do
  start=$(date +%s)
  .venv/bin/python -m pytest -q -rA tests/study/test_fleet.py tests/study/test_workers.py \
    tests/remote/test_fleet_launch.py -k "$SEL" > "$OUT/full-$i.txt" 2>&1
  grep -E "^(PASSED|FAILED|ERROR) " "$OUT/full-$i.txt" > "$OUT/race-$i.txt"
  echo "iteration $i: $(tail -1 "$OUT/full-$i.txt") ($(( $(date +%s) - start )) s)" | tee -a "$OUT/summary.txt"
done
