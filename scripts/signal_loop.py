"""Stop a running `tune start` at a random moment, N times, and count the runs that did not stop cleanly.

A clean stop exits 130 with the resume hint and prints nothing else: no traceback, no "Task exception was never
retrieved", no "Exception ignored"; and no trial that had its verdict loses it. Each run is a real `tune start`
subprocess against the time-scaled simulator (the fault cases' study file, resumed run after run); the signal
(SIGINT as Ctrl-C, or SIGTERM) comes 0-MAX_S s after the run's first "ready after", so it lands in every phase:
the warm-up, the benchmark's event loop and its tasks, a storage write, the garbage collector, the next restart.
The stderr of every unclean run is kept in OUT_DIR for reading.

    .venv/bin/python scripts/signal_loop.py [N=40] [OUT_DIR=/tmp/signal-loop] [MAX_S=2] [SIGINT|SIGTERM]

Add load beside it (`python3 -c 'while True: pass' &`) to widen the windows a loaded machine opens.
"""

from __future__ import annotations

import random
import signal
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fixtures_faults import Case, stop_after_ready

from tuner.sim.testing import free_port


def main() -> int:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    out = Path(sys.argv[2] if len(sys.argv) > 2 else "/tmp/signal-loop")
    max_s = float(sys.argv[3]) if len(sys.argv) > 3 else 2.0
    signum = signal.Signals[sys.argv[4]] if len(sys.argv) > 4 else signal.SIGINT
    out.mkdir(parents=True, exist_ok=True)
    unclean = 0
    with tempfile.TemporaryDirectory(prefix="signal-loop-") as tmp:
        case = Case(Path(tmp), free_port(), trials=6)
        try:
            for i in range(runs):
                delay = random.uniform(0.0, max_s)
                stop = stop_after_ready(case, delay, signum=signum, trials=runs * 10)
                verdict = "clean" if stop.clean else f"UNCLEAN (exit {stop.rc}, lost {stop.lost})"
                print(f"run {i + 1}: {signum.name} {delay:.2f} s after ready: {verdict}", flush=True)
                if not stop.clean:
                    unclean += 1
                    (out / f"unclean-{i + 1}.txt").write_text(stop.err)
        finally:
            case.cleanup()
    print(f"{runs - unclean} of {runs} stopped cleanly" + (f"; stderr of the others in {out}" if unclean else ""))
    return 1 if unclean else 0


if __name__ == "__main__":
    sys.exit(main())
