#!/usr/bin/env python3
"""Paired per-seed comparison of fixed repeats against a study file's own repeats (same pruning, same seeds).

``scripts/bench_search.py`` prints aggregates over seeds; medians of 20 seeds move by about half a point between
neighbouring runs, the size of the differences it is asked to judge. This runs the same studies
(:func:`bench_search.run_one`, the real tuning loop against the in-process model, 2% noise) for ``--repeats
fixed`` and ``sequential`` on each seed and compares them seed by seed: the true fraction of the optimum of the
best @30 and of the confirmed recommendation (how many seeds the file wins, loses, ties; the mean difference),
and the benchmark time. Both modes keep the study file's ``[search]`` (its pruning included), so the comparison
is of the repeat modes alone.

Usage::

    .venv/bin/python scripts/bench_paired.py --config studies/coding-agent.toml --seeds 50
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))


def _summary(rows: list[dict[str, float]], key: str) -> str:
    fixed, file = [r[f"fixed_{key}"] for r in rows], [r[f"file_{key}"] for r in rows]
    d = [b - a for a, b in zip(fixed, file, strict=True)]
    wins, losses = sum(x > 1e-9 for x in d), sum(x < -1e-9 for x in d)
    return (
        f"fixed median {statistics.median(fixed):.1%} worst {min(fixed):.1%} | file median "
        f"{statistics.median(file):.1%} worst {min(file):.1%} | mean difference {statistics.fmean(d) * 100:+.2f} "
        f"points | file better on {wins}, worse on {losses}, tied on {len(d) - wins - losses} seeds"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(REPO / "studies" / "coding-agent.toml"))
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", help="also write the per-seed rows to this file")
    args = parser.parse_args()

    import bench_search

    from tuner.config import load_config
    from tuner.sim.inprocess import true_optimum

    optimum, _ = true_optimum(load_config(args.config))
    search: dict[str, Any] = {"fixed_repeats": 2, "fixed_warmup_requests": 1, "cold_start": 0.0}
    tasks = [
        (args.config, "tune", mode, seed, 30, optimum, 0.02, dict(search))
        for mode in ("fixed", "sequential")
        for seed in range(args.seeds)
    ]
    with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
        results = pool.map(bench_search.run_one, tasks, chunksize=1)
    by = {(r["strategy"], r["seed"]): r for r in results}
    rows = []
    for seed in range(args.seeds):
        f, q = by[("tune (fixed)", seed)], by[("tune (sequential)", seed)]
        rows.append(
            {
                "seed": seed,
                "fixed_at30": bench_search.at(f["fractions"], 30),
                "file_at30": bench_search.at(q["fractions"], 30),
                "fixed_confirmed": f["confirmed"],
                "file_confirmed": q["confirmed"],
                "fixed_bench_s": f["bench_s"],
                "file_bench_s": q["bench_s"],
            }
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    print(f"{args.config}, {args.seeds} seeds, both modes with the file's [search]")
    print("best @30:  " + _summary(rows, "at30"))
    print("confirmed: " + _summary(rows, "confirmed"))
    spent = sum(r["file_bench_s"] for r in rows) / sum(r["fixed_bench_s"] for r in rows)
    print(f"benchmark time: the file's repeats take {spent:.1%} of fixed 2's")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
