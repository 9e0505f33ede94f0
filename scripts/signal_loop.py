"""SIGTERM a running `tune start` at a random moment, N times, and count the runs that did not stop cleanly.

A clean stop exits 130 with the resume hint. Each run is a real `tune start` subprocess against the time-scaled
simulator (the fault cases' study file, 6 trials); the signal comes 0-3 s after its first trial became RUNNING,
so it lands in every phase: the launch, the benchmark, a storage write, the garbage collector. The stderr of
every unclean run is kept in OUT_DIR for reading.

    .venv/bin/python scripts/signal_loop.py [N=40] [OUT_DIR=/tmp/signal-loop]

Add load beside it (`python3 -c 'while True: pass' &`) to widen the windows a loaded machine opens.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fixtures_faults import Case

from tuner.sim.testing import free_port


def main() -> int:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    out = Path(sys.argv[2] if len(sys.argv) > 2 else "/tmp/signal-loop")
    out.mkdir(parents=True, exist_ok=True)
    unclean = 0
    for i in range(runs):
        with tempfile.TemporaryDirectory(prefix="signal-loop-") as tmp:
            case = Case(Path(tmp), free_port(), trials=6)
            try:
                proc = case.spawn()
                case.wait_running(proc)
                delay = random.uniform(0.0, 3.0)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=delay)
                signalled = proc.poll() is None  # 6 trials outlast 3 s; a run that ended has nothing to stop
                if signalled:
                    os.kill(proc.pid, signal.SIGTERM)
                _, err = proc.communicate(timeout=120)
            finally:
                case.cleanup()
        clean = not signalled or (proc.returncode == 130 and "Resume with: tune start" in err)
        print(f"run {i + 1}: signal after {delay:.2f} s: {'clean' if clean else f'UNCLEAN (exit {proc.returncode})'}")
        if not clean:
            unclean += 1
            (out / f"unclean-{i + 1}.txt").write_text(err)
    print(f"{runs - unclean} of {runs} stopped cleanly" + (f"; stderr of the others in {out}" if unclean else ""))
    return 1 if unclean else 0


if __name__ == "__main__":
    sys.exit(main())
