#!/usr/bin/env python3
"""Paired per-seed comparison of fixed repeats against a study file's own repeats (same pruning, same seeds).

``scripts/bench_search.py`` prints aggregates over seeds; medians of 20 seeds move by about half a point between
neighbouring runs, the size of the differences it is asked to judge. This runs the same studies
(:func:`bench_search.run_one`, the real tuning loop against the in-process model, 2% noise) for ``--repeats
fixed`` and ``sequential`` on each seed and compares them seed by seed: the true fraction of the optimum of the
best @30 and of the confirmed recommendation (how many seeds the file wins, loses, ties; the mean difference),
and the benchmark time. Both modes keep the study file's ``[search]`` (its pruning included), so the comparison
is of the repeat modes alone. The fixed mode is what study files ran before sequential repeats (2 repeats, a
one-request warm-up before every scenario); with ``--prune-objective-margin off`` it is the tool as it was before
issue 17. Besides each mode's median and worst seed it prints the 10th percentile: the worst of 50 seeds is one
seed's search path, the tenth a steadier view of the tail. The benchmark time is the trials'; the end-of-study
confirmation's is added in a second figure.

Usage::

    .venv/bin/python scripts/bench_paired.py --config studies/coding-agent.toml --seeds 50
    .venv/bin/python scripts/bench_paired.py --config studies/coding-agent.toml --seeds 50 --prune-objective-margin 0.02
    .venv/bin/python scripts/bench_paired.py --config studies/demo.toml --seeds 30 --before
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
        f"fixed {_spread(fixed)} | file {_spread(file)} | mean difference {statistics.fmean(d) * 100:+.2f} "
        f"points | file better on {wins}, worse on {losses}, tied on {len(d) - wins - losses} seeds"
    )


def _spread(values: list[float]) -> str:
    """Median, 10th percentile (the worst tenth of the seeds starts there) and worst seed."""
    low = sorted(values)[len(values) // 10]
    return f"median {statistics.median(values):.1%} p10 {low:.1%} worst {min(values):.1%}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(REPO / "studies" / "coding-agent.toml"))
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", help="also write the per-seed rows to this file")
    parser.add_argument(
        "--prune-objective-margin",
        help="override [search] prune_objective_margin in both modes (a fraction, or 'off')",
    )
    parser.add_argument(
        "--before",
        action="store_true",
        help="the fixed mode as the tool was before issue 17: no pruning on the objective so far",
    )
    args = parser.parse_args()

    import bench_search

    from tuner.config import load_config
    from tuner.sim.inprocess import true_optimum

    optimum, _ = true_optimum(load_config(args.config))
    search: dict[str, Any] = {"fixed_repeats": 2, "fixed_warmup_requests": 1, "cold_start": 0.0}
    if args.prune_objective_margin is not None:
        margin = args.prune_objective_margin
        search["prune_objective_margin"] = None if margin == "off" else float(margin)
    before = {**search, "prune_objective_margin": None} if args.before else search
    tasks = [
        (args.config, "tune", mode, seed, 30, optimum, 0.02, dict(before if mode == "fixed" else search))
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
                "fixed_confirm_s": f["confirm_s"],
                "file_confirm_s": q["confirm_s"],
            }
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    override = search.get("prune_objective_margin", "as in the file")
    override = "off" if override is None else override
    fixed = " (fixed mode: off, the tool before issue 17)" if args.before else ""
    print(
        f"{args.config}, {args.seeds} seeds, both modes with the file's [search], "
        f"prune_objective_margin {override}{fixed}"
    )
    print("best @30:  " + _summary(rows, "at30"))
    print("confirmed: " + _summary(rows, "confirmed"))
    spent = sum(r["file_bench_s"] for r in rows) / sum(r["fixed_bench_s"] for r in rows)
    with_confirmation = sum(r["file_bench_s"] + r["file_confirm_s"] for r in rows) / sum(
        r["fixed_bench_s"] + r["fixed_confirm_s"] for r in rows
    )
    print(
        f"benchmark time: the file's repeats take {spent:.1%} of fixed 2's "
        f"({with_confirmation:.1%} with each mode's end-of-study confirmation)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
