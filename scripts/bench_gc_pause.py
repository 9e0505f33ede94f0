#!/usr/bin/env python3
"""What a full garbage collection costs the load generator's event loop, with and without the measured window.

`tune start` runs the load in the process that holds the study, and Python's full collections walk every object
of it. This script fills the process as a study does: Optuna with a SQLite study of ``--trials`` trials, each
with the ~150 figures `tune` records, read back as ``study.trials`` (what the views and the sampler hold), then,
for each size, times a full collection (``gc.collect()``) outside a window and inside a
:class:`tuner.bench.MeasuredWindow` (the heap frozen), and the longest stall the window's watch saw of the
loop while the collection ran.

    .venv/bin/python scripts/bench_gc_pause.py [--trials 100,1000] [--repeats 3]

The figure is the pause itself: every request event that arrives during it is stamped that late.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tuner.bench import MeasuredWindow


def _study_heap(trials: int, directory: str) -> list[Any]:
    """A study of ``trials`` finished trials with tune-sized user attrs, and its trials read back."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(storage=f"sqlite:///{directory}/gc-{trials}.db", study_name="gc")
    for number in range(trials):
        trial = study.ask()
        trial.suggest_int("budget", 4, 64)
        for scenario in ("c1", "c8", "c64", "chat-4rps"):
            for figure in range(38):
                trial.set_user_attr(f"{scenario}.figure_{figure}", float(number * figure))
        study.tell(trial, float(number))
    return [study, study.trials]


def _collect_s() -> float:
    start = time.perf_counter()
    gc.collect()
    return time.perf_counter() - start


async def _inside_window() -> tuple[float, float]:
    async with MeasuredWindow() as window:
        await asyncio.sleep(0.05)
        pause = _collect_s()
        await asyncio.sleep(0.05)
    return pause, window.longest_stall_s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=lambda v: [int(x) for x in v.split(",")], default=[100, 1000])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print(f"{'trials':>6}  {'objects':>9}  {'full collection ms':>18}  {'in a window ms':>14}  {'window stall ms':>15}")
    for trials in args.trials:
        with tempfile.TemporaryDirectory() as directory:
            heap = _study_heap(trials, directory)
        tracked = len(gc.get_objects())
        outside = [_collect_s() for _ in range(args.repeats)]
        inside = [asyncio.run(_inside_window()) for _ in range(args.repeats)]
        print(
            f"{trials:>6}  {tracked:>9,}  {statistics.median(outside) * 1000:>18.1f}  "
            f"{statistics.median(p for p, _ in inside) * 1000:>14.1f}  "
            f"{statistics.median(s for _, s in inside) * 1000:>15.1f}"
        )
        del heap
    return 0


if __name__ == "__main__":
    sys.exit(main())
