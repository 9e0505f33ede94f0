#!/usr/bin/env python3
"""Compare search strategies on a study file against the simulator's ground truth.

Every strategy runs the real tuning loop (:func:`tuner.study.run_study`: ask/tell, baseline first, duplicate
and constraint handling, the TrialRunner story) against the in-process model (:mod:`tuner.sim.inprocess`), with 2%
benchmark noise, over several seeds. A strategy is judged by the TRUE (noise-free) value of the config it
would report as best (best by *measured* score) after 10, 20 and 30 trials, as a fraction of the true optimum
found by enumerating the whole space.

Strategies:
  tune    TPE (multivariate, grouped) + baseline trial 0 + branch coverage + regression pruning (`tune`'s defaults)
  random  random search + baseline trial 0 + branch coverage, no pruning
  grid    the seed session's sweep: baseline + b8t4/none, b16t4/2048, b4t4/2048, b12t6/2048 (= the baseline)

Two study files make two different tests: studies/demo.toml (the default) is easy, a tenth of random samples are
within 2% of its optimum; studies/coding-agent.toml is the hard case, about 1% of its space is.

``--repeats fixed,sequential`` compares repeat modes with the same seeds: ``fixed`` runs ``--fixed-repeats`` (2)
repeats per scenario with no early stop and ``--fixed-warmup-requests`` (1) warm-up requests before each scenario
(what study files did before sequential repeats and ``warmup = "auto"``), ``sequential`` the study file's
``min_repeats``..``max_repeats`` policy (``tuner.bench.SequentialPolicy``) and its warm-up setting,
``sequential-always`` the same with the fixed mode's warm-ups. The benchmark time column leaves out the
end-of-study confirmation, which has its own column (and "confirmed best" its own quality), and gives each mode's
share of the first mode's time. ``--cold-start 0.2`` makes the model a server whose first pass at each batch size
is 20% slower (one that needs its warm-ups).

Usage::

    .venv/bin/python scripts/bench_search.py --seeds 20 --trials 30
    .venv/bin/python scripts/bench_search.py --config studies/coding-agent.toml
    .venv/bin/python scripts/bench_search.py --strategies tune --repeats fixed,sequential-always,sequential --seeds 10
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import multiprocessing
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


STRATEGIES = ("tune", "random", "grid")
CHECKPOINTS = (10, 20, 30)
TARGET = 0.98
#: The seed session's 4-point sweep (budget, top-k, draft window); everything else stays at the base command.
GRID = ((8, 4, "none"), (16, 4, 2048), (4, 4, 2048), (12, 6, 2048))


def repeats_config(config: Any, mode: str, fixed: int, warmup_requests: int = 1) -> Any:
    """``fixed``: ``fixed`` repeats per scenario, no early stop, ``warmup_requests`` warm-up requests before
    every scenario (main before sequential repeats); ``sequential``: the study file's min_repeats..max_repeats
    policy (defaults 2..6, +-2%) and its warm-up; ``sequential:0.03``: the same with another ``precision``;
    ``sequential-always``: sequential repeats with the fixed mode's warm-ups."""
    always = dataclasses.replace(config.benchmark, warmup="always", warmup_requests=warmup_requests)
    if mode == "fixed":
        return dataclasses.replace(config, benchmark=dataclasses.replace(always, repeats=fixed))
    name, _, precision = mode.partition(":")
    if name == "sequential-always":
        name, config = "sequential", dataclasses.replace(config, benchmark=always)
    if name == "sequential":
        bench = config.benchmark
        if bench.min_repeats == bench.max_repeats:
            bench = dataclasses.replace(bench, repeats=None, min_repeats=2, max_repeats=6)
        if precision:
            bench = dataclasses.replace(bench, precision=float(precision))
        return dataclasses.replace(config, benchmark=bench)
    raise ValueError(f"unknown repeats mode {mode!r}")


def strategy_config(config: Any, strategy: str, seed: int, **search: Any) -> tuple[Any, int | None]:
    """The study config a strategy runs with, and its fixed trial count (None: the requested budget)."""
    study = dataclasses.replace(config.study, seed=seed)
    if strategy == "tune":
        s = dataclasses.replace(config.search, sampler="tpe", pruning=True, **search)
        return dataclasses.replace(config, study=study, search=s), None
    if strategy == "random":
        s = dataclasses.replace(config.search, sampler="random", pruning=False)
        return dataclasses.replace(config, study=study, search=s), None
    seeds = []
    for budget, topk, window in GRID:
        params = {**config.baseline, "budget": budget, "topk": topk, "draft_window": window}
        if "algorithm" in params:  # a space that also offers DFLASH: the sweep was DDTREE's
            params["algorithm"] = "DDTREE"
        if params != config.baseline and params not in seeds:
            seeds.append(params)
    s = dataclasses.replace(config.search, seed_trials=tuple(seeds), pruning=False)
    return dataclasses.replace(config, study=study, search=s), 1 + len(seeds)


def run_one(task: tuple[str, str, str, int, int, float, float, dict[str, Any]]) -> dict[str, Any]:
    """One strategy x repeats mode x seed: the true fraction of the optimum reached after each counted trial."""
    import optuna

    from tuner.config import load_config
    from tuner.search import pruning_savings
    from tuner.sim.inprocess import run_inprocess, true_objective
    from tuner.trials import is_counted, is_feasible

    config_path, strategy, mode, seed, trials, optimum, noise, search = task
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)  # TPE's group=True
    fixed_repeats, fixed_warmup = search.pop("fixed_repeats", 2), search.pop("fixed_warmup_requests", 1)
    base = repeats_config(load_config(config_path), mode, fixed_repeats, fixed_warmup)
    cold_start = search.pop("cold_start", 0.0)
    config, fixed = strategy_config(base, strategy, seed, **search)
    n = fixed or trials
    with tempfile.TemporaryDirectory(prefix="bench-search-", dir=_fast_tmp()) as tmp:
        t0 = time.monotonic()
        run = run_inprocess(
            config, storage=f"sqlite:///{tmp}/study.db", trials=n, noise=noise, seed=seed, cold_start=cold_start
        )
        wall = time.monotonic() - t0
        study = optuna.load_study(study_name=run.study_name, storage=run.storage)
        counted = [t for t in study.get_trials(deepcopy=False) if is_counted(t)]
        fractions: list[float] = []
        best_value, best_true = -math.inf, 0.0
        cache: dict[tuple[Any, ...], float] = {}
        for t in counted:
            if is_feasible(t) and t.values[0] > best_value:
                key = tuple(sorted(t.params.items()))
                if key not in cache:
                    cache[key] = true_objective(config, t.params)
                best_value, best_true = t.values[0], cache[key]
            fractions.append(best_true / optimum)
        trials_labels = list(run.clock.trials)
        repeats = [
            len(t.user_attrs.get(f"{sc.name}.repeats", []))
            for t in counted
            for sc in config.benchmark.scenarios
            if f"{sc.name}.repeats" in t.user_attrs
        ]
        return {
            "strategy": f"{strategy} ({mode})",
            "seed": seed,
            "repeats": statistics.fmean(repeats) if repeats else 0.0,
            "fractions": fractions,
            "pruned": sum(1 for t in counted if t.user_attrs.get("pruning_saved_s") is not None),
            "failed": sum(
                1 for t in counted if t.state.name == "PRUNED" and t.user_attrs.get("pruning_saved_s") is None
            ),
            "saved_s": pruning_savings(study),
            "bench_s": sum(run.clock.seconds(lab, what="benchmark") for lab in trials_labels if not _confirm(lab)),
            "confirm_s": sum(run.clock.seconds(lab, what="benchmark") for lab in trials_labels if _confirm(lab)),
            "confirmed": _confirmed_fraction(study, config, optimum, cache),
            "finalists_best": _finalists_best_fraction(study, config, optimum, cache),
            "total_s": run.clock.seconds(),
            "wall_s": wall,
        }


def _confirm(label: str) -> bool:
    return label.startswith("confirm-")


def _confirmed_fraction(study: Any, config: Any, optimum: float, cache: dict[tuple[Any, ...], float]) -> float:
    """True value of the config the study recommends after its end-of-study confirmation."""
    from tuner.sim.inprocess import true_objective
    from tuner.trials import recommended

    rec = recommended(study)
    if rec is None:
        return 0.0
    t = rec.trial
    key = tuple(sorted(t.params.items()))
    if key not in cache:
        cache[key] = true_objective(config, t.params)
    return cache[key] / optimum


def _finalists_best_fraction(
    study: Any, config: Any, optimum: float, cache: dict[tuple[Any, ...], float]
) -> float | None:
    """True value of the best config the confirmation re-measured (what a perfect confirmation would pick);
    None without a confirmation."""
    from tuner.sim.inprocess import true_objective
    from tuner.trials import CONFIRMATION, study_trials

    c = study.user_attrs.get(CONFIRMATION)
    if not isinstance(c, dict) or not c.get("trials"):
        return None
    trials = study_trials(study)
    best = 0.0
    for number in c["trials"]:
        key = tuple(sorted(trials[number].params.items()))
        if key not in cache:
            cache[key] = true_objective(config, trials[number].params)
        best = max(best, cache[key])
    return best / optimum


def _regression_pruned(t: Any) -> bool:
    return t.user_attrs.get("pruned_skipped_scenarios") is not None


def _fast_tmp() -> str | None:
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() else None


def at(fractions: list[float], k: int) -> float:
    if not fractions:
        return 0.0
    return fractions[min(k, len(fractions)) - 1]


def first_reaching(fractions: list[float], target: float) -> float:
    return next((i + 1 for i, f in enumerate(fractions) if f >= target), math.inf)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(REPO / "studies" / "demo.toml"))
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--noise", type=float, default=0.02)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--n-startup-trials", type=int, default=None, help="override [search] for 'tune'")
    parser.add_argument("--prune-against", choices=("best", "baseline"), default=None)
    parser.add_argument(
        "--repeats",
        default="sequential",
        help="comma-separated repeat modes to compare: fixed (--fixed-repeats, no early stop), sequential "
        "(the study file's policy), sequential:P (the same with precision P, e.g. sequential:0.03)",
    )
    parser.add_argument("--fixed-repeats", type=int, default=2, help="repeats per scenario of the fixed mode")
    parser.add_argument(
        "--fixed-warmup-requests",
        type=int,
        default=1,
        help="warm-up requests before every scenario in the fixed and sequential-always modes (the study "
        "files had 1 before warmup = \"auto\")",
    )
    parser.add_argument(
        "--cold-start",
        type=float,
        default=0.0,
        help="the model server's first pass at each batch size is this fraction slower (0: warm once ready)",
    )
    args = parser.parse_args()

    from tuner.config import load_config
    from tuner.sim.inprocess import true_optimum

    t0 = time.monotonic()
    config = load_config(args.config)
    optimum, best_params = true_optimum(config)
    print(f"true optimum {optimum:.1f} tok/s (weighted geomean) at {best_params}  [{time.monotonic() - t0:.0f} s]")
    from tuner.sim.inprocess import true_objective

    print(f"baseline: {true_objective(config, config.baseline) / optimum:.1%} of the optimum")
    search: dict[str, Any] = {}
    if args.n_startup_trials is not None:
        search["n_startup_trials"] = args.n_startup_trials
    if args.prune_against is not None:
        search["prune_against"] = args.prune_against
    search["fixed_repeats"] = args.fixed_repeats
    search["fixed_warmup_requests"] = args.fixed_warmup_requests
    search["cold_start"] = args.cold_start
    modes = [m for m in args.repeats.split(",") if m]
    strategies = [f"{s} ({m})" for s in args.strategies.split(",") if s for m in modes]
    tasks = [
        (args.config, s, m, seed, args.trials, optimum, args.noise, dict(search))
        for s in args.strategies.split(",")
        if s
        for m in modes
        for seed in range(args.seeds)
    ]
    t1 = time.monotonic()
    with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
        results = pool.map(run_one, tasks, chunksize=1)
    print(f"{len(tasks)} studies in {time.monotonic() - t1:.0f} s on {args.jobs} processes\n")

    checkpoints = [k for k in CHECKPOINTS if k <= args.trials]
    header = (
        "| strategy | "
        + " | ".join(f"median @{k}" for k in checkpoints)
        + f" | worst @{args.trials} | median trials to {TARGET:.0%} | seeds reaching {TARGET:.0%} "
        + "| failed/pruned trials (median) | benchmark time saved by pruning (modelled) "
        + f"| benchmark time (modelled, all seeds; share of {modes[0]}) | repeats per scenario (mean) "
        + f"| confirmed best @{args.trials}: median / worst | confirmation time (modelled) |"
    )
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    first_mode_bench: dict[str, float] = {}
    for s in strategies:
        rows = [r for r in results if r["strategy"] == s]
        strategy = s.partition(" (")[0]
        fr = [r["fractions"] for r in rows]
        reach = [first_reaching(f, TARGET) for f in fr]
        med_reach = statistics.median(reach)
        reached = sum(1 for x in reach if math.isfinite(x))
        saved = sum(r["saved_s"] for r in rows)
        bench = sum(r["bench_s"] for r in rows)
        first = first_mode_bench.setdefault(strategy, bench)
        # The share of what the benchmark would have cost without pruning (spent + saved), so it stays <= 100%.
        share = f"{saved:.0f} s ({saved / (bench + saved):.0%})" if bench + saved else "-"
        cells = [f"{statistics.median(at(f, k) for f in fr):.1%}" for k in checkpoints]
        print(
            f"| {s} | "
            + " | ".join(cells)
            + f" | {min(at(f, args.trials) for f in fr):.1%}"
            + f" | {med_reach if math.isfinite(med_reach) else '>' + str(args.trials)}"
            + f" | {reached}/{len(rows)}"
            + f" | {statistics.median(r['failed'] for r in rows):.0f}"
            + f"/{statistics.median(r['pruned'] for r in rows):.0f}"
            + f" | {share}"
            + f" | {bench / 3600:.3f} h ({bench / first:.0%}) | {statistics.fmean(r['repeats'] for r in rows):.2f}"
            + f" | {statistics.median(r['confirmed'] for r in rows):.1%} / {min(r['confirmed'] for r in rows):.1%}"
            + f" | {sum(r['confirm_s'] for r in rows) / 3600:.2f} h |"
        )
    print("\ngrid has only its 4 distinct configs: its later columns repeat its final value.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
